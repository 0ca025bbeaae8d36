// The resharding refit on the GPU engine: the plan of parallel/reshard.h executed in bf16 on the device, from the
// training stage's bf16 compute weights into the generation replica's, over a device Comm of the world (an
// NcclComm on the engine's stream): each round packs this rank's blocks into a staging buffer allocated once
// (strided blocks by cudaMemcpy2DAsync), one all-to-all moves them, and the received blocks are unpacked into the
// generation weights; what a rank needs from itself is copied directly. No host round trip.
#pragma once

#if HONE_CUDA

#include "comm/comm.h"
#include "cuda/device_memory.h"
#include "cuda/ops_cuda.h"
#include "parallel/reshard.h"

namespace hone {

class GpuResharder {
 public:
  // world: a device Comm of every rank, ordered on ctx's stream; both must outlive this object.
  GpuResharder(ReshardPlan plan, Comm& world, const cuda::GpuContext& ctx);
  const ReshardPlan& plan() const { return plan_; }
  // Collective over the world: gen receives this rank's generation shard of train's values (bf16, device).
  void run(const cuda::bf16* train, cuda::bf16* gen);
  size_t device_bytes() const { return send_.bytes() + recv_.bytes(); }

 private:
  void copy(const std::vector<ReshardBlock>& blocks, const cuda::bf16* src, cuda::bf16* dst);
  ReshardPlan plan_;
  Comm& world_;
  cuda::GpuContext ctx_;
  DeviceArray<cuda::bf16> send_, recv_;
};

}  // namespace hone

#endif  // HONE_CUDA
