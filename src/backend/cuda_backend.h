// The CUDA backend: bf16 activations and compute weights on the device (fp32 statistics, fp32 parameter gradients),
// the ops of cuda/ops_cuda.h asynchronous on one stream, per-op timing when a profiler is given. The same op table
// as backend/cpu_backend.h, op for op; each CUDA op is the fused kernel the CPU composes from its reference ops.
#pragma once

#if HONE_CUDA

#include <cstddef>
#include <cstdint>

#include "backend/op_profiler.h"
#include "cuda/check.h"
#include "cuda/ops_cuda.h"

namespace hone {

using bf16 = cuda::bf16;

struct CudaBackend {
  using Act = cuda::bf16;
  static constexpr const char* kName = "cuda";
  static constexpr size_t kAlignment = 256;  // carved regions (backend/carver.h)

  // The stream, library handles and workspace (the GpuContext, which outlives every Exec made from it) and the
  // per-op profiler (null: no timing).
  struct Exec {
    const cuda::GpuContext* gpu = nullptr;
    GpuOpProfiler* prof = nullptr;
    const cuda::GpuContext& ctx() const { return *gpu; }
  };
  struct Scope {
    Scope(const Exec& x, const char* family) : scope(x.prof, family) {}
    ProfileScope scope;
  };

  static void zero(const Exec& x, void* p, size_t bytes) { CUDA_CHECK(cudaMemsetAsync(p, 0, bytes, x.gpu->stream)); }

  static void rmsnorm_forward(const Exec& x, Act* out, float* rstd, const Act* in, const Act* w, int rows, int C,
                              float eps) {
    cuda::rmsnorm_forward(out, rstd, in, w, rows, C, eps, *x.gpu);
  }
  static void rmsnorm_backward(const Exec& x, Act* dx, float* dw, const Act* dout, const Act* in, const Act* w,
                               const float* rstd, int rows, int C, bool accumulate) {
    cuda::rmsnorm_backward(dx, dw, dout, in, w, rstd, rows, C, accumulate, *x.gpu);
  }
  static void add_rmsnorm_forward(const Exec& x, Act* sum, Act* out, float* rstd, const Act* a, const Act* b,
                                  const Act* w, int rows, int C, float eps) {
    cuda::add_rmsnorm_forward(sum, out, rstd, a, b, w, rows, C, eps, *x.gpu);
  }
  static void add_forward(const Exec& x, Act* out, const Act* a, const Act* b, int64_t N) {
    cuda::add_forward(out, a, b, N, *x.gpu);
  }
  static void linear_forward(const Exec& x, Act* out, const Act* in, const Act* w, const Act* bias, int T, int IC,
                             int OC) {
    cuda::linear_forward(out, in, w, bias, T, IC, OC, *x.gpu);
  }
  static void linear_forward_pair(const Exec& x, Act* out0, Act* out1, const Act* in, const Act* w0, const Act* w1,
                                  int T, int IC, int OC) {
    cuda::linear_forward_pair(out0, out1, in, w0, w1, T, IC, OC, *x.gpu);
  }
  static void linear_backward(const Exec& x, Act* dx, float* dw, float* dbias, const Act* dout, const Act* in,
                              const Act* w, int T, int IC, int OC, bool accumulate_dx) {
    cuda::linear_backward(dx, dw, dbias, dout, in, w, T, IC, OC, accumulate_dx, *x.gpu);
  }
  static void rope_forward(const Exec& x, Act* out, const Act* in, const int32_t* pos, const float* inv_freq, int T,
                           int H, int D, int64_t ldx) {
    cuda::rope_forward(out, in, pos, inv_freq, T, H, D, *x.gpu, ldx);
  }
  static void rope_backward(const Exec& x, Act* dx, const Act* dout, const int32_t* pos, const float* inv_freq, int T,
                            int H, int D, bool accumulate) {
    cuda::rope_backward(dx, dout, pos, inv_freq, T, H, D, accumulate, *x.gpu);
  }
  static void qk_norm_rope_forward(const Exec& x, Act* out, float* rstd, const Act* in, const Act* w,
                                   const int32_t* pos, const float* inv_freq, int T, int H, int D, float eps,
                                   int64_t ldx) {
    cuda::qk_norm_rope_forward(out, rstd, in, w, pos, inv_freq, T, H, D, eps, *x.gpu, ldx);
  }
  static void qk_norm_rope_backward(const Exec& x, Act* dx, float* dw, const Act* dout, const Act* in, const Act* w,
                                    const float* rstd, const int32_t* pos, const float* inv_freq, int T, int H,
                                    int D) {
    cuda::qk_norm_rope_backward(dx, dw, dout, in, w, rstd, pos, inv_freq, T, H, D, *x.gpu);
  }
  static void attention_forward(const Exec& x, Act* out, float* lse, const Act* q, const Act* k, const Act* v,
                                const int32_t* cu_seqlens, int num_seqs, int max_seqlen, int T, int Hq, int Hkv,
                                int D, float scale) {
    cuda::attention_forward(out, lse, q, k, v, cu_seqlens, num_seqs, max_seqlen, T, Hq, Hkv, D, scale, *x.gpu);
  }
  static void attention_backward(const Exec& x, Act* dq, Act* dk, Act* dv, const Act* dout, const Act* out,
                                 const float* lse, const Act* q, const Act* k, const Act* v,
                                 const int32_t* cu_seqlens, int num_seqs, int max_seqlen, int T, int Hq, int Hkv,
                                 int D, float scale) {
    cuda::attention_backward(dq, dk, dv, dout, out, lse, q, k, v, cu_seqlens, num_seqs, max_seqlen, T, Hq, Hkv, D,
                             scale, *x.gpu);
  }
  static void swiglu_forward(const Exec& x, Act* out, const Act* gate, const Act* up, int64_t N) {
    cuda::swiglu_forward(out, gate, up, N, *x.gpu);
  }
  static void swiglu_backward(const Exec& x, Act* dgate, Act* dup, const Act* dout, const Act* gate, const Act* up,
                              int64_t N, bool accumulate) {
    cuda::swiglu_backward(dgate, dup, dout, gate, up, N, accumulate, *x.gpu);
  }
};

}  // namespace hone

#endif  // HONE_CUDA
