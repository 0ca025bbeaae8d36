// The linear layer on the GPU: out = x W^T (+ bias) and its backward, as GEMMs through cuda/gemm.h
// (W stored [OC, IC] as Hugging Face stores it). Same math as hone::cpu::linear_forward/backward.
#include "cuda/linear_bias.h"
#include "cuda/check.h"
#include "cuda/gemm.h"
#include "cuda/ops_cuda.h"
#include "runtime/error.h"

namespace hone::cuda {

namespace {
void check_shape(int T, int IC, int OC) {
  HONE_CHECK(T >= 0 && IC > 0 && OC >= 0, "bad linear shape T=", T, " IC=", IC, " OC=", OC);
}
}  // namespace

// out[T, OC] = x[T, IC] W[OC, IC]^T + bias[OC]: the bias rides on the GEMM's epilogue.
void linear_forward(bf16* out, const bf16* x, const bf16* w, const bf16* bias, int T, int IC, int OC,
                    const GpuContext& ctx) {
  check_shape(T, IC, OC);
  if (T == 0 || OC == 0) return;
  gemm(/*trans_a=*/false, /*trans_b=*/true, T, OC, IC, 1.f, x, IC, w, IC, 0.f, out, GemmOut::bf16, OC, bias, ctx);
}

// dx[T, IC] (+)= dout[T, OC] W[OC, IC] (bf16; with accumulate_dx summed in fp32 with the old dx and rounded once,
// else written: beta 0, the old dx is not read); dW[OC, IC] += dout^T x (fp32); dbias[OC] += column sums of dout
// (fp32, a reduction kernel). Each may be null.
void linear_backward(bf16* dx, float* dw, float* dbias, const bf16* dout, const bf16* x, const bf16* w, int T, int IC,
                     int OC, bool accumulate_dx, const GpuContext& ctx) {
  check_shape(T, IC, OC);
  if (T == 0) return;
  if (OC == 0) {  // no product: a written dx is zero
    if (dx && !accumulate_dx) CUDA_CHECK(cudaMemsetAsync(dx, 0, size_t(T) * IC * sizeof(bf16), ctx.stream));
    return;
  }
  if (dx)
    gemm(false, false, T, IC, OC, 1.f, dout, OC, w, IC, accumulate_dx ? 1.f : 0.f, dx, GemmOut::bf16, IC, nullptr,
         ctx);
  if (dw) gemm(/*trans_a=*/true, false, OC, IC, T, 1.f, dout, OC, x, IC, 1.f, dw, GemmOut::f32, IC, nullptr, ctx);
  if (dbias) bias_grad_accumulate(dbias, dout, T, OC, ctx);
}

}  // namespace hone::cuda
