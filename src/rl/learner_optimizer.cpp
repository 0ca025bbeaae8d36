// The data-parallel optimizer's options a learner's layout implies (learner_optimizer.h).
#include "rl/learner_optimizer.h"

#include "backend/backend.h"
#include "backend/optimizer_ops.h"
#include "comm/host_collectives.h"

namespace hone::rl {

template <typename B>
DataParallelOptions learner_optimizer_options(const ShardLayout& stage, const ParallelState& ps,
                                              TensorParallelGroup<B>* tp, bool pipeline, bool expert_parallel,
                                              Comm* edp, const typename B::Exec& x, bool grad_reduce_in_fp32) {
  DataParallelOptions po;
  po.grad_reduce_in_fp32 = grad_reduce_in_fp32;
  // The stage's weighting of each value, the sums of squares in the gradients' memory.
  auto stage_squares = [&stage, x](const float* g, int64_t begin, int64_t n) {
    return stage.weighted_sum_squares(begin, n, [&](int64_t off, int64_t count) {
      return sum_squares(x, g + off, count);
    });
  };
  if (expert_parallel) {
    Comm& ep = ps.ep();
    po.norm.group = &ep;
    po.norm.weighted_sum_squares = stage_squares;
    po.norm.sum = [tp, &ep](double v) {
      if (tp) v = tp->sum_over_group(v);
      return all_reduce_sum_value(ep, v);
    };
    po.expert_begin = stage.num_dense_params();
    po.edp = edp;
  } else if (pipeline) {
    Comm& pp = ps.pp();
    if (tp) po.norm = tp->sharded_norm();
    else po.norm.weighted_sum_squares = stage_squares;
    po.norm.group = &pp;
    po.norm.sum = [tp, &pp](double v) {
      if (tp) v = tp->sum_over_group(v);
      return all_reduce_sum_value(pp, v);
    };
  } else if (tp) {
    po.norm = tp->sharded_norm();
  }
  return po;
}

#define HONE_INSTANTIATE_LEARNER_OPTIMIZER(B)                                                                    \
  template DataParallelOptions learner_optimizer_options<B>(const ShardLayout&, const ParallelState&,          \
                                                            TensorParallelGroup<B>*, bool, bool, Comm*,        \
                                                            const typename B::Exec&, bool);
HONE_FOR_EACH_BACKEND(HONE_INSTANTIATE_LEARNER_OPTIMIZER)
#undef HONE_INSTANTIATE_LEARNER_OPTIMIZER

}  // namespace hone::rl
