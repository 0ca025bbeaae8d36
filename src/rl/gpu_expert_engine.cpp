// The GPU policy engine's pieces for expert parallelism (rl/gpu_expert_engine.h).
#include "rl/gpu_expert_engine.h"

#if HONE_CUDA


#include "comm/host_collectives.h"
#include "cuda/check.h"
#include "runtime/error.h"

namespace hone::rl {

std::unique_ptr<DeviceArray<bf16>> every_expert_weights(const GpuExpertParallel& ep) {
  const ParamLayout gen = ep.full_layout().param_layout();
  size_t free_b = 0, total_b = 0;
  CUDA_CHECK(cudaMemGetInfo(&free_b, &total_b));
  const double need = double(gen.num_params) * 2;
  HONE_USER_CHECK(need < 0.8 * double(free_b), "parallel.ep = ", ep.size(), ": generation keeps every expert on every "
                  "GPU (", need / double(int64_t(1) << 30), " GiB of bf16 weights) but only ",
                  double(free_b) / double(int64_t(1) << 30), " GiB are free next to the training weights; split the "
                  "model further with parallel.tp");
  return std::make_unique<DeviceArray<bf16>>(gen.num_params, "generation weights (every expert)");
}

void set_expert_parallel_options(GpuDataParallelOptions& po, const ShardLayout& stage, const ParallelState& ps,
                                 GpuTensorParallel* tp, double nccl_timeout_s, const cuda::GpuContext& ctx,
                                 std::unique_ptr<NcclComm>& edp_comm) {
  po.norm.weighted_sum_squares = [&stage, ctx](const float* g, int64_t begin, int64_t n) {
    return stage.weighted_sum_squares(begin, n, [&](int64_t off, int64_t count) {
      return cuda::sum_squares(g + off, count, ctx);
    });
  };
  Comm& ep = ps.ep();
  po.norm.group = &ep;
  po.norm.sum = [tp, &ep](double v) {
    if (tp) v = tp->sum_over_group(v);
    return all_reduce_sum_value(ep, v);
  };
  po.expert_begin = stage.num_dense_params();
  if (ps.edp_size() > 1) {
    NcclOptions eo;
    eo.timeout_s = nccl_timeout_s;
    edp_comm = ps.device(CommGroup::edp, eo);
    po.edp = edp_comm.get();
  }
}

}  // namespace hone::rl

#endif  // HONE_CUDA
