// Selective recompute of the decoder layer (see layer_recompute.h), instantiated for every backend.
#include "model/layer_recompute.h"

#include "backend/backend.h"
#include "backend/carver.h"
#include "model/moe_feed_forward.h"

namespace hone {

template <typename B>
size_t carve_selective_activations(LayerActivations<B>& a, char* base, const LayerActivations<B>& scratch,
                                   const LayerShape& s, int T, int local_rows) {
  using A = typename B::Act;
  const int64_t C = s.hidden, Q = s.q_dim(), K = s.kv_dim(), I = s.intermediate;
  const int Tl = local_rows < 0 ? T : local_rows;
  Carver cv{base, B::kAlignment};
  a = scratch;  // the recomputed ones
  a.x_in = nullptr;
  a.rstd1 = cv.take<float>(Tl);
  a.q = cv.take<A>(T * Q);
  a.k = cv.take<A>(T * K);
  a.v = cv.take<A>(T * K);
  if (s.qk_norm) {
    a.rstd_q = cv.take<float>(int64_t(T) * s.heads);
    a.rstd_k = cv.take<float>(int64_t(T) * s.kv_heads);
  }
  a.attn = cv.take<A>(T * Q);
  a.lse = cv.take<float>(int64_t(T) * s.heads);
  a.x_mid = cv.take<A>(Tl * C);
  a.rstd2 = cv.take<float>(Tl);
  a.gate = cv.take<A>(T * I);
  a.up = cv.take<A>(T * I);
  const size_t ffn = s.experts_total > 0 ? moe_feed_forward_bytes(B{}, s, T).saved : 0;
  a.ffn = ffn > 0 ? cv.take_bytes(ffn) : nullptr;
  return cv.used;
}

template <typename B>
void recompute_selective_activations(const LayerShape& s, const LayerWeightPtrs<B>& w, const LayerBatch& b,
                                     const LayerActivations<B>& a, int local_rows, const typename B::Exec& x) {
  const int T = b.T, C = s.hidden, D = s.head_dim;
  const float eps = s.eps;
  B::rmsnorm_forward(x, a.h1_local, a.rstd1, a.x_in, w.input_layernorm, local_rows, C, eps);
  if (s.qk_norm) {
    B::qk_norm_rope_forward(x, a.q_r, a.rstd_q, a.q, w.q_norm, b.positions, b.inv_freq, T, s.heads, D, eps, 0);
    B::qk_norm_rope_forward(x, a.k_r, a.rstd_k, a.k, w.k_norm, b.positions, b.inv_freq, T, s.kv_heads, D, eps, 0);
  } else {
    B::rope_forward(x, a.q_r, a.q, b.positions, b.inv_freq, T, s.heads, D, 0);
    B::rope_forward(x, a.k_r, a.k, b.positions, b.inv_freq, T, s.kv_heads, D, 0);
  }
  // The forward's residual add + RMSNorm normalized the sum as stored, which x_mid holds: the same values.
  B::rmsnorm_forward(x, a.h2_local, a.rstd2, a.x_mid, w.post_attention_layernorm, local_rows, C, eps);
  B::swiglu_forward(x, a.act, a.gate, a.up, int64_t(T) * s.intermediate);
}

#define HONE_INSTANTIATE_RECOMPUTE(B)                                                                        \
  template size_t carve_selective_activations<B>(LayerActivations<B>&, char*, const LayerActivations<B>&,  \
                                                 const LayerShape&, int, int);                              \
  template void recompute_selective_activations<B>(const LayerShape&, const LayerWeightPtrs<B>&,            \
                                                   const LayerBatch&, const LayerActivations<B>&, int,      \
                                                   const B::Exec&);
HONE_FOR_EACH_BACKEND(HONE_INSTANTIATE_RECOMPUTE)

}  // namespace hone
