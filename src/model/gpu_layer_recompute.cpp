// Selective recompute of the GPU decoder layer (see gpu_layer_recompute.h).
#include "model/gpu_layer_recompute.h"

#if HONE_CUDA

#include "cuda/carver.h"

namespace hone {

size_t carve_gpu_selective_activations(GpuLayerActivations& a, char* base, const GpuLayerActivations& scratch,
                                       const LayerShape& s, int T) {
  const int64_t C = s.hidden, Q = s.q_dim(), K = s.kv_dim(), I = s.intermediate;
  cuda::Carver cv{base};
  a = scratch;  // the recomputed ones
  a.x_in = nullptr;
  a.rstd1 = cv.take<float>(T);
  a.q = cv.take<bf16>(T * Q);
  a.k = cv.take<bf16>(T * K);
  a.v = cv.take<bf16>(T * K);
  if (s.qk_norm) {
    a.rstd_q = cv.take<float>(int64_t(T) * s.heads);
    a.rstd_k = cv.take<float>(int64_t(T) * s.kv_heads);
  }
  a.attn = cv.take<bf16>(T * Q);
  a.lse = cv.take<float>(int64_t(T) * s.heads);
  a.x_mid = cv.take<bf16>(T * C);
  a.rstd2 = cv.take<float>(T);
  a.gate = cv.take<bf16>(T * I);
  a.up = cv.take<bf16>(T * I);
  return cv.used;
}

void recompute_gpu_selective_activations(const LayerShape& s, const GpuLayerParams<const bf16>& w,
                                         const GpuLayerBatch& b, const GpuLayerActivations& a,
                                         const cuda::GpuContext& ctx) {
  const int T = b.T, C = s.hidden, D = s.head_dim;
  const float eps = s.eps;
  cuda::rmsnorm_forward(a.h1, a.rstd1, a.x_in, w.input_layernorm, T, C, eps, ctx);
  if (s.qk_norm) {
    cuda::qk_norm_rope_forward(a.q_r, a.rstd_q, a.q, w.q_norm, b.positions, b.inv_freq, T, s.heads, D, eps, ctx);
    cuda::qk_norm_rope_forward(a.k_r, a.rstd_k, a.k, w.k_norm, b.positions, b.inv_freq, T, s.kv_heads, D, eps, ctx);
  } else {
    cuda::rope_forward(a.q_r, a.q, b.positions, b.inv_freq, T, s.heads, D, ctx);
    cuda::rope_forward(a.k_r, a.k, b.positions, b.inv_freq, T, s.kv_heads, D, ctx);
  }
  // The forward's fused residual add + RMSNorm normalized the rounded sum, which x_mid holds: the same values.
  cuda::rmsnorm_forward(a.h2, a.rstd2, a.x_mid, w.post_attention_layernorm, T, C, eps, ctx);
  cuda::swiglu_forward(a.act, a.gate, a.up, int64_t(T) * s.intermediate, ctx);
}

}  // namespace hone

#endif  // HONE_CUDA
