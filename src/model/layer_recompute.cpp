// Activation recompute choices and selective recompute of the CPU layer (see layer_recompute.h).
#include "model/layer_recompute.h"

#include "ops/ops.h"

namespace hone {

int64_t carve_selective_activations(LayerActivations& a, float* base, const LayerActivations& scratch,
                                    const LayerShape& s, int T, int local_rows) {
  const int64_t C = s.hidden, Q = s.q_dim(), K = s.kv_dim(), I = s.intermediate;
  const int Tl = local_rows < 0 ? T : local_rows;
  int64_t used = 0;
  auto take = [&](int64_t per_token, int rows) -> float* {
    float* r = base ? base + used : nullptr;
    used += (per_token * rows + 15) / 16 * 16;
    return r;
  };
  a = scratch;  // the recomputed ones
  a.x_in = nullptr;
  a.rstd1 = take(1, Tl);
  a.q = take(Q, T);
  a.k = take(K, T);
  a.v = take(K, T);
  if (s.qk_norm) {
    a.rstd_q = take(s.heads, T);
    a.rstd_k = take(s.kv_heads, T);
  } else {  // RoPE reads the projections themselves
    a.q_n = a.q;
    a.k_n = a.k;
  }
  a.attn = take(Q, T);
  a.lse = take(s.heads, T);
  a.x_mid = take(C, Tl);
  a.rstd2 = take(1, Tl);
  a.gate = take(I, T);
  a.up = take(I, T);
  return used;
}

void recompute_selective_activations(const LayerShape& s, const LayerWeights& w, const LayerBatch& b,
                                     const LayerActivations& a, int local_rows) {
  const int T = b.T, C = s.hidden, D = s.head_dim;
  const float eps = s.eps;
  cpu::rmsnorm_forward(a.h1_local, a.rstd1, a.x_in, w.input_layernorm.f32(), local_rows, C, eps);
  if (s.qk_norm) {
    cpu::rmsnorm_forward(a.q_n, a.rstd_q, a.q, w.q_norm.f32(), T * s.heads, D, eps);
    cpu::rmsnorm_forward(a.k_n, a.rstd_k, a.k, w.k_norm.f32(), T * s.kv_heads, D, eps);
  }
  cpu::rope_forward(a.q_r, a.q_n, b.positions, b.inv_freq, T, s.heads, D);
  cpu::rope_forward(a.k_r, a.k_n, b.positions, b.inv_freq, T, s.kv_heads, D);
  cpu::rmsnorm_forward(a.h2_local, a.rstd2, a.x_mid, w.post_attention_layernorm.f32(), local_rows, C, eps);
  cpu::swiglu_forward(a.act, a.gate, a.up, int64_t(T) * s.intermediate);
}

}  // namespace hone
