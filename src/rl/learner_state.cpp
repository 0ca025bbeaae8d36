// The learner's checkpoint state over the backend (what moves where: learner_state.h).
#include "rl/learner_state.h"

#include <vector>

#include "backend/backend.h"
#include "parallel/shard_weights.h"

namespace hone::rl {

namespace {

// The whole model's master weights and moments on the root (tp and pp rank 0) from this rank's flat buffers of
// `layout`. Collective over the tensor- and pipeline-parallel groups.
void gather_whole_state(const ModelConfig& mc, const ParallelState& ps, const ShardLayout& layout, const float* w,
                        const float* sm, const float* sv, ModelWeights& master, Tensor& m, Tensor& v) {
  const bool root = ps.tp_rank() == 0 && ps.pp_rank() == 0;
  const int64_t whole = count_parameters(mc);
  if (root) {
    if (master.flat.numel() != whole) master = allocate_weights(mc);
    m = Tensor::empty({whole});
    v = Tensor::empty({whole});
  }
  Comm& tp = ps.tp();
  gather_model_flat(mc, layout, w, tp, ps.pp(), root ? master.flat.f32() : nullptr);
  gather_model_flat(mc, layout, sm, tp, ps.pp(), root ? m.f32() : nullptr);
  gather_model_flat(mc, layout, sv, tp, ps.pp(), root ? v.f32() : nullptr);
}

}  // namespace

template <typename B>
void read_learner_state(const ModelConfig& mc, const ParallelState& ps, const ShardLayout& stage, bool sharded,
                        ExpertParallelGroup<B>* ep, bool dp_root, DataParallelOptimizer<B>& optimizer,
                        ModelWeights& master, Tensor& m, Tensor& v) {
  const int64_t n = optimizer.num_params();
  if (ep) {
    // Every rank reads its part (root -1: collective over the optimizer's group, sharded or not), the experts are
    // all-gathered over the host ep group (the whole tp shard on every ep rank), then the dp-rank-0 ranks gather
    // the shards over tp onto world rank 0 (pp = 1 under ep).
    const ShardLayout& full = ep->full_layout();
    const int64_t nf = full.num_local_params();
    ModelWeights shard = allocate_shard_weights(stage, mc);
    std::vector<float> shard_m(static_cast<size_t>(n)), shard_v(static_cast<size_t>(n));
    optimizer.read_state(&shard, shard_m.data(), shard_v.data(), -1);
    const size_t nfs = static_cast<size_t>(nf);
    std::vector<float> all_w(nfs), all_m(nfs), all_v(nfs);
    ep->gather_experts_host(shard.flat.f32(), all_w.data());
    ep->gather_experts_host(shard_m.data(), all_m.data());
    ep->gather_experts_host(shard_v.data(), all_v.data());
    if (!dp_root) return;
    gather_whole_state(mc, ps, full, all_w.data(), all_m.data(), all_v.data(), master, m, v);
    return;
  }
  if (!sharded) {  // the whole state on dp rank 0, which is world rank 0
    if (dp_root) {
      if (master.flat.numel() != n) master = allocate_weights(mc);
      m = Tensor::empty({n});
      v = Tensor::empty({n});
    }
    optimizer.read_state(dp_root ? &master : nullptr, dp_root ? m.f32() : nullptr, dp_root ? v.f32() : nullptr, 0);
    return;
  }
  // Tensor or pipeline parallelism: the ranks of dp rank 0 read their stage's shard, gathered onto world rank 0.
  ModelWeights shard;
  std::vector<float> shard_m, shard_v;
  if (dp_root) {
    shard = allocate_shard_weights(stage, mc);
    shard_m.resize(size_t(n));
    shard_v.resize(size_t(n));
  }
  optimizer.read_state(dp_root ? &shard : nullptr, shard_m.data(), shard_v.data(), 0);
  if (!dp_root) return;
  gather_whole_state(mc, ps, stage, shard.flat.f32(), shard_m.data(), shard_v.data(), master, m, v);
}

template <typename B>
void write_learner_state(const ModelConfig& mc, const ShardLayout& stage, bool sharded,
                         DataParallelOptimizer<B>& optimizer, const ModelWeights& master, const float* m,
                         const float* v, int step_count) {
  if (!sharded) {
    optimizer.write_state(master, m, v, step_count);
    return;
  }
  ModelWeights shard = allocate_shard_weights(stage, mc);
  extract_shard(stage, master, shard);
  const size_t ns = static_cast<size_t>(shard.flat.numel());
  std::vector<float> shard_m(ns), shard_v(ns);
  extract_shard_flat(stage, m, shard_m.data());
  extract_shard_flat(stage, v, shard_v.data());
  optimizer.write_state(shard, shard_m.data(), shard_v.data(), step_count);
}

#define HONE_INSTANTIATE_LEARNER_STATE(B)                                                                       \
  template void read_learner_state<B>(const ModelConfig&, const ParallelState&, const ShardLayout&, bool,      \
                                      ExpertParallelGroup<B>*, bool, DataParallelOptimizer<B>&, ModelWeights&, \
                                      Tensor&, Tensor&);                                                       \
  template void write_learner_state<B>(const ModelConfig&, const ShardLayout&, bool, DataParallelOptimizer<B>&, \
                                       const ModelWeights&, const float*, const float*, int);
HONE_FOR_EACH_BACKEND(HONE_INSTANTIATE_LEARNER_STATE)
#undef HONE_INSTANTIATE_LEARNER_STATE

}  // namespace hone::rl
