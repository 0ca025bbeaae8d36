// The GPU engine's routing tables of a mixture of experts (rl/gpu_moe_routing.h).
#include "rl/gpu_moe_routing.h"

#if HONE_CUDA

#include <cmath>
#include <vector>

#include "cuda/check.h"
#include "rl/moe_metrics.h"

namespace hone::rl {

void GpuMoeRouting::before_forward(GpuTransformer& policy, const MicroBatch& mb, const TrainLoss& loss,
                                   bool router_replay, bool always_unreplayed, MoeStepStats& stats) {
  MoeFeedForward<CudaBackend>& moe = *policy.moe();
  const int T = mb.batch.num_tokens();
  const bool replay = router_replay && !mb.gen_routing.empty();
  if (replay || always_unreplayed) {
    moe.set_forced_routing(nullptr);
    moe.set_routing_record(nullptr);
    policy.forward(mb.batch, loss.temperature, /*need_entropy=*/false, /*need_backward=*/true);
  }
  if (replay) {
    const std::vector<float> lp = policy.logprobs_host();
    for (int t = 0; t < T; ++t)
      if (mb.mask[size_t(t)]) {
        stats.unreplayed_mpe_sum += std::exp(std::fabs(double(mb.gen[size_t(t)]) - lp[size_t(t)]));
        ++stats.unreplayed_tokens;
      }
  }
  moe.set_aux_loss_weight(loss.total_tokens > 0 ? loss.moe_aux_loss_coef * double(T) / loss.total_tokens : 0);
  moe.set_forced_routing(replay ? upload(mb.gen_routing.data(), T) : nullptr);
  moe.set_routing_record(mb.gen_routing.empty() ? nullptr : record(T));
}

const int32_t* GpuMoeRouting::upload(const int32_t* host, int T) {
  if (!host) return nullptr;
  const int64_t n = entries(T);
  if (forced_.size() < n) forced_ = DeviceArray<int32_t>(n, "replayed routing");
  CUDA_CHECK(cudaMemcpyAsync(forced_.get(), host, size_t(n) * sizeof(int32_t), cudaMemcpyHostToDevice, ctx_.stream));
  CUDA_CHECK(cudaStreamSynchronize(ctx_.stream));
  return forced_.get();
}

int32_t* GpuMoeRouting::record(int T) {
  const int64_t n = entries(T);
  if (recorded_.size() < n) recorded_ = DeviceArray<int32_t>(n, "training routing");
  recording_ = true;
  return recorded_.get();
}

void GpuMoeRouting::after_forward(MoeFeedForward<CudaBackend>& moe, const MicroBatch& mb, MoeStepStats& stats,
                                  const ModelConfig& c, const cuda::GpuContext& ctx) {
  moe.set_forced_routing(nullptr);
  moe.set_routing_record(nullptr);
  const int S = moe.num_sparse_layers(), E = c.num_experts, k = c.num_experts_per_tok, T = mb.batch.num_tokens();
  const std::vector<int32_t> loads = moe.expert_counts(ctx);
  const std::vector<int64_t> counts(loads.begin(), loads.end());
  std::vector<int32_t> mine;
  if (recording_ && !mb.gen_routing.empty() && mb.routing_width == S * k) {
    mine.resize(size_t(T) * S * k);
    CUDA_CHECK(cudaMemcpyAsync(mine.data(), recorded_.get(), mine.size() * sizeof(int32_t), cudaMemcpyDeviceToHost,
                               ctx.stream));
    CUDA_CHECK(cudaStreamSynchronize(ctx.stream));
  }
  recording_ = false;
  add_moe_routing(stats, S, E, k, counts, moe.aux_loss(ctx), mine, mb);
}

}  // namespace hone::rl

#endif  // HONE_CUDA
