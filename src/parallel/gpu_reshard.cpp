// The resharding refit in bf16 on the device (gpu_reshard.h).
#include "parallel/gpu_reshard.h"

#if HONE_CUDA

#include <algorithm>

#include "cuda/check.h"
#include "runtime/error.h"

namespace hone {

GpuResharder::GpuResharder(ReshardPlan plan, Comm& world, const cuda::GpuContext& ctx)
    : plan_(std::move(plan)),
      world_(world),
      ctx_(ctx),
      send_(std::max<int64_t>(1, plan_.send_capacity), "refit send staging"),
      recv_(std::max<int64_t>(1, plan_.recv_capacity), "refit receive staging") {
  HONE_CHECK(world.on_device(), "the GPU resharder needs a device Comm of the world");
}

void GpuResharder::copy(const std::vector<ReshardBlock>& blocks, const cuda::bf16* src, cuda::bf16* dst) {
  constexpr size_t e = sizeof(cuda::bf16);
  for (const ReshardBlock& b : blocks) {
    const size_t width = size_t(b.cols) * e;
    const size_t spitch = b.rows > 1 ? size_t(b.src_pitch) * e : width;
    const size_t dpitch = b.rows > 1 ? size_t(b.dst_pitch) * e : width;
    CUDA_CHECK(cudaMemcpy2DAsync(dst + b.dst, dpitch, src + b.src, spitch, width, size_t(b.rows),
                                 cudaMemcpyDeviceToDevice, ctx_.stream));
  }
}

void GpuResharder::run(const cuda::bf16* train, cuda::bf16* gen) {
  for (const ReshardRound& r : plan_.rounds) {
    HONE_CHECK(int(r.send_counts.size()) == world_.size(), "a plan for ", r.send_counts.size(), " ranks on the ",
               world_.describe());
    for (size_t w = 0; w < r.send.size(); ++w) copy(r.send[w], train, send_.get() + r.send_displs[w]);
    world_.all_to_allv_raw(send_.get(), r.send_counts, r.send_displs, recv_.get(), r.recv_counts, r.recv_displs,
                           CommType::bf16);
    copy(r.local, train, gen);
    for (size_t w = 0; w < r.recv.size(); ++w) copy(r.recv[w], recv_.get() + r.recv_displs[w], gen);
  }
}

}  // namespace hone

#endif  // HONE_CUDA
