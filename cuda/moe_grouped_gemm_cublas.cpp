// The experts' grouped linear layers through cuBLASLt, one GEMM per expert with rows (the offsets on the host): what
// a large pass of the model runs (backend/moe_ops.h), and what the benchmark measures our one-launch
// kernel (cuda/moe_grouped_gemm.cu) against. Same math as linear_forward / linear_backward on each expert's rows;
// the row counts change every pass, so the GEMMs take gemm_varying's bucketed plans.
#include "cuda/gemm.h"
#include "cuda/moe_ops.h"
#include "runtime/error.h"

namespace hone::cuda {

void moe_grouped_linear_forward_cublas(bf16* out, const bf16* x, const bf16* w, const int32_t* host_offsets, int E,
                                       int IC, int OC, const GpuContext& ctx) {
  HONE_CHECK(IC > 0, "grouped linear with no input features");
  for (int e = 0; e < E; ++e) {
    const int64_t b = host_offsets[e];
    const int n = host_offsets[e + 1] - host_offsets[e];
    if (n == 0 || OC == 0) continue;
    gemm_varying(false, true, n, OC, IC, 1.f, x + b * IC, IC, w + int64_t(e) * OC * IC, IC, 0.f, out + b * OC,
                 GemmOut::bf16, OC, ctx);
  }
}

void moe_grouped_linear_backward_cublas(bf16* dx, float* dw, const bf16* dout, const bf16* x, const bf16* w,
                                        const int32_t* host_offsets, int E, int IC, int OC, const GpuContext& ctx) {
  for (int e = 0; e < E; ++e) {
    const int64_t b = host_offsets[e];
    const int n = host_offsets[e + 1] - host_offsets[e];
    if (n == 0 || OC == 0 || IC == 0) continue;
    const bf16* we = w + int64_t(e) * OC * IC;
    if (dx)
      gemm_varying(false, false, n, IC, OC, 1.f, dout + b * OC, OC, we, IC, 1.f, dx + b * IC, GemmOut::bf16, IC, ctx);
    gemm_varying(true, false, OC, IC, n, 1.f, dout + b * OC, OC, x + b * IC, IC, 1.f, dw + int64_t(e) * OC * IC,
                 GemmOut::f32, IC, ctx);
  }
}

}  // namespace hone::cuda
