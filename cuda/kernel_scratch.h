// A small persistent device buffer per GpuContext for kernels that need temporary space between two launches
// (partial sums of a reduction), plus one pinned host double for results read back by the host. It lives in
// GpuContextImpl::scratch_state, grows on demand and is never shrunk. Users on the context's stream only: the
// stream orders consecutive users, so one buffer serves them all.
// Plain header (CUDA runtime only): usable from .cu files.
#pragma once

#include <cstddef>

#include "cuda/ops_cuda.h"

namespace hone::cuda {

// Device memory of at least `bytes` (256-byte aligned), valid until the next call on this context. Growing it
// synchronizes the context's stream first, so work still reading the old buffer completes.
void* kernel_scratch(const GpuContext& ctx, size_t bytes);

// One pinned host double, for a value copied back with cudaMemcpyAsync before a stream synchronization.
double* kernel_scratch_host_double(const GpuContext& ctx);

}  // namespace hone::cuda
