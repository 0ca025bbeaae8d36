// The GPU engine's routing tables of a mixture of experts: a host routing table (MicroBatch::gen_routing,
// [T x sparse layers x k]) uploaded for routing replay, the device table a training forward records its routing
// into, and after that forward the step statistics (expert loads, the load-balancing loss, the expert sets against
// generation's: rl/moe_metrics.h), and what a training forward is set up with.
#pragma once

#if HONE_CUDA

#include <cstdint>

#include "cuda/device_memory.h"
#include "cuda/ops_cuda.h"
#include "model/moe_feed_forward.h"
#include "model/transformer.h"
#include "model/model_config.h"
#include "rl/grpo_batch.h"
#include "roles/role_stats.h"

namespace hone::rl {

class GpuMoeRouting {
 public:
  GpuMoeRouting(const ModelConfig& c, const cuda::GpuContext& ctx) : c_(c), ctx_(ctx) {}
  // host on the device (null stays null); waits for the copy, so the host table may change after the call.
  const int32_t* upload(const int32_t* host, int T);
  // The device table of T rows a forward records its routing into.
  int32_t* record(int T);
  // Before a training forward of mb on policy (a mixture of experts): its share of the load-balancing loss, routing
  // replay when router_replay and mb carries generation's routing (with the mismatch of a forward that routes by
  // itself added to stats first: one more forward), and the table the forward records its routing into.
  // always_unreplayed: run that one more forward even where mb carries no routing (expert parallelism's lockstep).
  void before_forward(GpuTransformer& policy, const MicroBatch& mb, const TrainLoss& loss, bool router_replay,
                      bool always_unreplayed, MoeStepStats& stats);
  // After a training forward of mb: clears moe's replay and record, and adds the forward's routing to stats.
  void after_forward(MoeFeedForward<CudaBackend>& moe, const MicroBatch& mb, MoeStepStats& stats,
                     const ModelConfig& c, const cuda::GpuContext& ctx);

 private:
  int64_t entries(int T) const { return int64_t(T) * c_.num_moe_layers() * c_.num_experts_per_tok; }

  ModelConfig c_;
  cuda::GpuContext ctx_;
  DeviceArray<int32_t> forced_, recorded_;
  bool recording_ = false;
};

}  // namespace hone::rl

#endif  // HONE_CUDA
