// What the optimizers (train/adamw.h, train/data_parallel_optimizer.h) need of a backend beyond its op table:
//   * the AdamW update, the sum of squares and the in-place scaling of clipping, over flat fp32 buffers in the
//     backend's memory, and the refit cast of fp32 master weights into compute weights (B::Act: a copy on the CPU,
//     whose fp32 weights are their own masters; a bf16 rounding on the GPU);
//   * bf16 for what travels between ranks (gradients reduced with train.grad_reduce_in_fp32 = false): Bf16<B> holds
//     its bits (uint16_t on the CPU, a Comm's bf16; cuda::bf16 on the GPU), with casts from and to fp32;
//   * collectives whose completion is waited for later (CollectiveWork<B>: nothing to wait for on the CPU, where
//     a Comm call returns done; an NcclWork on the GPU) and a queue beside the compute for them
//     (CollectiveQueue<B>: the compute itself on the CPU; a high-priority stream ordered by events on the GPU), so
//     that gradient buckets reduce while backward runs (train/grad_reducer.h);
//   * the sum over a group of one double (the gradient norm), through device memory for a device Comm;
//   * the optimizer-state offload policy (train.optimizer_offload): on the GPU the Adam moments leave the device for
//     pinned host memory while generation runs; on the CPU they already live in host memory and stay.
// Overloaded on the backend's Exec (as backend/strided_copy.h), so code over B calls them and dispatch is at compile
// time.
#pragma once

#include <cstddef>
#include <cstdint>
#include <cstring>

#include "backend/backend.h"
#include "comm/comm.h"
#include "ops/ops.h"
#include "tensor/dtype.h"

#if HONE_CUDA
#include <cuda_runtime.h>

#include "comm/nccl_comm.h"
#endif

namespace hone {

// Whether offload_state() moves the Adam moments out of the backend's memory (train.optimizer_offload).
template <typename B>
inline constexpr bool kOffloadsOptimizerState = B::kDeviceMemory;

// The element type of a Comm for the compute weights (the refit's all-gather).
template <typename B>
constexpr CommType act_comm_type() {
  return sizeof(typename B::Act) == 2 ? CommType::bf16 : CommType::f32;
}

// ---- CPU --------------------------------------------------------------------------------------------------------

inline void adamw_update(const CpuBackend::Exec&, float* param, const float* grad, float* m, float* v, int64_t n,
                         float lr, float beta1, float beta2, float eps, float weight_decay, int step) {
  cpu::adamw_update(param, grad, m, v, n, lr, beta1, beta2, eps, weight_decay, step);
}
inline double sum_squares(const CpuBackend::Exec&, const float* x, int64_t n) { return cpu::sum_squares(x, n); }
inline void scale_inplace(const CpuBackend::Exec&, float* x, float s, int64_t n) { cpu::scale_inplace(x, s, n); }
inline void refit_cast(const CpuBackend::Exec&, float* out, const float* master, int64_t n) {
  if (out != master && n > 0) std::memcpy(out, master, size_t(n) * sizeof(float));
}
// Rounded to nearest even, as tensor/dtype.h rounds (and the GPU's conversion kernel).
inline void f32_to_bf16(const CpuBackend::Exec&, uint16_t* out, const float* in, int64_t n) {
  for (int64_t i = 0; i < n; ++i) out[i] = f32_to_bf16(in[i]);
}
inline void bf16_to_f32(const CpuBackend::Exec&, float* out, const uint16_t* in, int64_t n) {
  for (int64_t i = 0; i < n; ++i) out[i] = bf16_to_f32(in[i]);
}

// A collective that returned done.
struct InlineWork {
  void wait() {}
  bool pending() const { return false; }
};

inline InlineWork all_reduce_sum_async(const CpuBackend::Exec&, Comm& c, const void* send, void* recv, int64_t n,
                                       CommType t) {
  c.all_reduce_sum_raw(send, recv, n, t);
  return {};
}
inline InlineWork reduce_scatter_sum_async(const CpuBackend::Exec&, Comm& c, const void* send, void* recv,
                                           int64_t recv_count, CommType t) {
  c.reduce_scatter_sum_raw(send, recv, recv_count, t);
  return {};
}
inline InlineWork all_gather_async(const CpuBackend::Exec&, Comm& c, const void* send, void* recv,
                                   int64_t send_count, CommType t) {
  c.all_gather_raw(send, recv, send_count, t);
  return {};
}
// Work that stages its result through a conversion completes with the conversion: nothing to mark here.
inline void completes_here(const CpuBackend::Exec&, InlineWork&) {}

// The sum of v over c (scratch: unused on the CPU).
inline double sum_over(const CpuBackend::Exec&, Comm& c, double v, double* /*scratch*/) {
  if (c.size() > 1) c.all_reduce_sum(&v, 1);
  return v;
}

// The CPU's collectives run on the compute: nothing to order.
class InlineCollectiveQueue {
 public:
  explicit InlineCollectiveQueue(const CpuBackend::Exec& compute) : x_(compute) {}
  const CpuBackend::Exec& exec() const { return x_; }
  void after_compute() {}  // the collectives queued next start after the compute queued so far
  void compute_after() {}  // the compute queued next starts after the collectives queued so far

 private:
  CpuBackend::Exec x_;
};

template <typename B>
struct CollectiveTypes;
template <>
struct CollectiveTypes<CpuBackend> {
  using Work = InlineWork;
  using Queue = InlineCollectiveQueue;
  using Bf16 = uint16_t;
};

// ---- CUDA -------------------------------------------------------------------------------------------------------

#if HONE_CUDA

inline void adamw_update(const CudaBackend::Exec& x, float* param, const float* grad, float* m, float* v, int64_t n,
                         float lr, float beta1, float beta2, float eps, float weight_decay, int step) {
  cuda::adamw_update(param, grad, m, v, n, lr, beta1, beta2, eps, weight_decay, step, *x.gpu);
}
// Synchronizes the stream to return the sum.
inline double sum_squares(const CudaBackend::Exec& x, const float* p, int64_t n) {
  return cuda::sum_squares(p, n, *x.gpu);
}
inline void scale_inplace(const CudaBackend::Exec& x, float* p, float s, int64_t n) {
  cuda::scale_inplace(p, s, n, *x.gpu);
}
inline void refit_cast(const CudaBackend::Exec& x, cuda::bf16* out, const float* master, int64_t n) {
  cuda::refit_cast(out, master, n, *x.gpu);
}
inline void f32_to_bf16(const CudaBackend::Exec& x, cuda::bf16* out, const float* in, int64_t n) {
  cuda::f32_to_bf16(out, in, n, *x.gpu);
}
inline void bf16_to_f32(const CudaBackend::Exec& x, float* out, const cuda::bf16* in, int64_t n) {
  cuda::bf16_to_f32(out, in, n, *x.gpu);
}

// On the Exec's stream, over NCCL; a device Comm that is not NCCL (a test's pair of ranks) runs in line.
NcclWork all_reduce_sum_async(const CudaBackend::Exec& x, Comm& c, const void* send, void* recv, int64_t n,
                              CommType t);
NcclWork reduce_scatter_sum_async(const CudaBackend::Exec& x, Comm& c, const void* send, void* recv,
                                  int64_t recv_count, CommType t);
NcclWork all_gather_async(const CudaBackend::Exec& x, Comm& c, const void* send, void* recv, int64_t send_count,
                          CommType t);
// The work completes once what the Exec's stream queued after it (a conversion back from bf16) is done.
void completes_here(const CudaBackend::Exec& x, NcclWork& w);
// The sum of v over c: through scratch (one device double) for a device Comm; synchronizes.
double sum_over(const CudaBackend::Exec& x, Comm& c, double v, double* scratch);

// A high-priority stream of its own beside the compute stream, ordered with it by events.
class CudaCollectiveQueue {
 public:
  explicit CudaCollectiveQueue(const CudaBackend::Exec& compute);
  ~CudaCollectiveQueue();
  CudaCollectiveQueue(const CudaCollectiveQueue&) = delete;
  CudaCollectiveQueue& operator=(const CudaCollectiveQueue&) = delete;
  const CudaBackend::Exec& exec() const { return x_; }
  void after_compute();
  void compute_after();

 private:
  cudaStream_t compute_ = nullptr;
  cuda::GpuContext ctx_;  // the compute's context on the queue's stream
  CudaBackend::Exec x_;
  cudaEvent_t compute_done_ = nullptr, queue_done_ = nullptr;
};

template <>
struct CollectiveTypes<CudaBackend> {
  using Work = NcclWork;
  using Queue = CudaCollectiveQueue;
  using Bf16 = cuda::bf16;
};

#endif  // HONE_CUDA

template <typename B>
using CollectiveWork = typename CollectiveTypes<B>::Work;
template <typename B>
using CollectiveQueue = typename CollectiveTypes<B>::Queue;
template <typename B>
using Bf16 = typename CollectiveTypes<B>::Bf16;

}  // namespace hone
