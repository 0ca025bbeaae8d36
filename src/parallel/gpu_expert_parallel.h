// Expert parallelism on the GPU engine: the twin of parallel/expert_parallel.h over device rows. The counts cross
// the expert-parallel group on the host (its MpiComm: the host has them, it needed them to size the rows), the rows
// over the group's NcclComm on the engine's stream (grouped ncclSend/ncclRecv: Comm::all_to_allv), regrouped by
// expert on the receiver with a row gather (cuda::moe_permute_forward) and back before the combine. Generation
// keeps every expert (gather_experts all-gathers this rank's bf16 experts into the generation buffer at refit) or
// runs its passes in lockstep over these hooks (generation.experts: parallel/expert_lockstep.h).
// Guarded by HONE_CUDA.
#pragma once

#if HONE_CUDA

#include <cstdint>
#include <vector>

#include "comm/comm.h"
#include "cuda/device_memory.h"
#include "cuda/ops_cuda.h"
#include "model/expert_dispatch.h"
#include "model/model_config.h"
#include "parallel/expert_exchange.h"
#include "parallel/shard_layout.h"

namespace hone {

class GpuExpertParallel final : public ExpertDispatch<cuda::bf16> {
 public:
  // host and device: the expert-parallel group's communicators (the device one on ctx's stream); they outlive
  // this object. Layouts as ExpertParallel's.
  GpuExpertParallel(const ModelConfig& c, Comm& host, Comm& device, const cuda::GpuContext& ctx, int tp = 1,
                    int tp_rank = 0);
  GpuExpertParallel(const GpuExpertParallel&) = delete;
  GpuExpertParallel& operator=(const GpuExpertParallel&) = delete;

  const ShardLayout& layout() const { return layout_; }
  const ShardLayout& full_layout() const { return full_; }
  const LayerShape& shape() const { return layout_.shape(); }
  Comm& host() const { return host_; }
  int size() const { return host_.size(); }
  int rank() const { return host_.rank(); }

  int64_t plan(int layer, const int64_t* counts, int64_t* expert_counts) override;
  void dispatch(int layer, const cuda::bf16* token_rows, cuda::bf16* expert_rows, int64_t row) override;
  void combine(int layer, const cuda::bf16* expert_rows, cuda::bf16* token_rows, int64_t row) override;

  // Collective over the group: full (device, full_layout) gets local's dense part (device, layout) and every rank's
  // experts. T: the buffers' element type (bf16 compute weights, fp32 master weights or moments).
  template <typename T>
  void gather_experts(const T* local, T* full) const;
  // Host buffers (checkpoints): the same over the host Comm.
  void gather_experts_host(const float* local, float* full) const;

 private:
  struct Plan {
    ExpertExchangePlan exchange;
    DeviceArray<int32_t> source, inverse;  // expert-side row p <- received row source[p]; inverse the other way
    int64_t rows = 0;
  };
  struct ExpertBlock {
    int64_t local = 0, full = 0, n = 0;
  };

  Comm& host_;
  Comm& device_;
  cuda::GpuContext ctx_;
  ShardLayout layout_, full_;
  int El_ = 0;
  std::vector<Plan> plans_;
  std::vector<ExpertBlock> blocks_;
  DeviceArray<cuda::bf16> stage_;  // received (dispatch) or regrouped (combine) rows
  std::vector<int64_t> a_, b_, c_, d_;
  std::vector<int32_t> source_, inverse_;  // host staging of a plan's row gathers
};

}  // namespace hone

#endif  // HONE_CUDA
