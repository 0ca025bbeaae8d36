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

// out0 = x W0^T, out1 = x W1^T, one batched GEMM when the pair's weights and outputs each lie at one non-negative
// distance (W1 after W0, out1 after out0, without overlap): the parameter table stores gate_proj before up_proj and
// k_proj before v_proj, and the layer carves the outputs in the same order. Any other placement runs two GEMMs.
void linear_forward_pair(bf16* out0, bf16* out1, const bf16* x, const bf16* w0, const bf16* w1, int T, int IC, int OC,
                         const GpuContext& ctx) {
  check_shape(T, IC, OC);
  if (T == 0 || OC == 0) return;
  const int64_t dw = w1 - w0, dout = out1 - out0;
  if (dw >= int64_t(OC) * IC && dout >= int64_t(T) * OC) {
    gemm_batched(/*trans_a=*/false, /*trans_b=*/true, T, OC, IC, 1.f, x, IC, /*stride_a=*/0, w0, IC, dw, 0.f, out0,
                 GemmOut::bf16, OC, dout, /*batch=*/2, ctx);
    return;
  }
  linear_forward(out0, x, w0, nullptr, T, IC, OC, ctx);
  linear_forward(out1, x, w1, nullptr, T, IC, OC, ctx);
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
