// The decoder layer body (Llama / Qwen2 / Qwen3), forward and backward, and its dense feed-forward, written once
// over the backend's op table (see transformer_layer.h) and instantiated for every backend. The GEMMs that a
// tensor-parallel collective brackets go to the collectives hook as functions of their rows (the hook may move the
// rows in chunks and run the GEMMs chunk by chunk); at tp = 1 they run directly on all rows.
#include "model/transformer_layer.h"

#include "backend/backend.h"
#include "backend/carver.h"
#include "model/moe_feed_forward.h"
#include "runtime/error.h"

namespace hone {

template <typename B>
size_t carve_layer_activations(LayerActivations<B>& a, char* base, const LayerShape& s, int T, int local_rows) {
  using A = typename B::Act;
  const int64_t C = s.hidden, Q = s.q_dim(), K = s.kv_dim(), I = s.intermediate;
  const int Tl = local_rows < 0 ? T : local_rows;
  const bool sp = Tl != T;
  Carver cv{base, B::kAlignment};
  a.rstd1 = cv.take<float>(Tl);
  // Under sequence parallelism the gathered rows are not kept per layer (carve_gathered_rows).
  a.h1 = sp ? nullptr : cv.take<A>(T * C);
  a.h1_local = sp ? cv.take<A>(Tl * C) : a.h1;
  a.q = cv.take<A>(T * Q);
  a.k = cv.take<A>(T * K);
  a.v = cv.take<A>(T * K);
  if (s.qk_norm) {
    a.rstd_q = cv.take<float>(int64_t(T) * s.heads);
    a.rstd_k = cv.take<float>(int64_t(T) * s.kv_heads);
  } else {
    a.rstd_q = a.rstd_k = nullptr;
  }
  a.q_r = cv.take<A>(T * Q);
  a.k_r = cv.take<A>(T * K);
  a.attn = cv.take<A>(T * Q);
  a.lse = cv.take<float>(int64_t(T) * s.heads);
  a.x_mid = cv.take<A>(Tl * C);
  a.rstd2 = cv.take<float>(Tl);
  a.h2 = sp ? nullptr : cv.take<A>(T * C);
  a.h2_local = sp ? cv.take<A>(Tl * C) : a.h2;
  a.gate = cv.take<A>(T * I);
  a.up = cv.take<A>(T * I);
  a.act = cv.take<A>(T * I);
  const size_t ffn = s.experts_total > 0 ? moe_feed_forward_bytes(B{}, s, T).saved : 0;
  a.ffn = ffn > 0 ? cv.take_bytes(ffn) : nullptr;
  return cv.used;
}

template <typename B>
size_t carve_gathered_rows(LayerActivations<B>& a, char* base, const LayerShape& s, int T) {
  using A = typename B::Act;
  Carver cv{base, B::kAlignment};
  a.h1 = cv.take<A>(int64_t(T) * s.hidden);
  a.h2 = cv.take<A>(int64_t(T) * s.hidden);
  return cv.used;
}

template <typename B>
size_t carve_layer_forward_scratch(LayerScratch<B>& scratch, char* base, const LayerShape& sh, int T,
                                   int local_rows) {
  using A = typename B::Act;
  const int Tl = local_rows < 0 ? T : local_rows;
  Carver cv{base, B::kAlignment};
  scratch.branch = cv.take<A>(int64_t(T) * sh.hidden);
  scratch.branch_local = Tl != T ? cv.take<A>(int64_t(Tl) * sh.hidden) : scratch.branch;
  const size_t ffn = sh.experts_total > 0 ? moe_feed_forward_bytes(B{}, sh, T).forward_scratch : 0;
  scratch.ffn = ffn > 0 ? cv.take_bytes(ffn) : nullptr;
  return cv.used;
}

template <typename B>
size_t carve_layer_backward_scratch(LayerScratch<B>& s, char* base, const LayerShape& sh, int T, int local_rows) {
  using A = typename B::Act;
  const int64_t C = sh.hidden, Q = sh.q_dim(), K = sh.kv_dim(), I = sh.intermediate;
  const int Tl = local_rows < 0 ? T : local_rows;
  Carver cv{base, B::kAlignment};
  s.dh = cv.take<A>(T * C);
  s.dh_local = Tl != T ? cv.take<A>(Tl * C) : s.dh;
  s.dy = Tl != T ? cv.take<A>(T * C) : nullptr;
  s.dact = cv.take<A>(T * I);
  s.dgate = cv.take<A>(T * I);
  s.dup = cv.take<A>(T * I);
  s.dattn = cv.take<A>(T * Q);
  s.dq_r = cv.take<A>(T * Q);
  s.dq = cv.take<A>(T * Q);
  s.dk_r = cv.take<A>(T * K);
  s.dk = cv.take<A>(T * K);
  s.dv = cv.take<A>(T * K);
  const size_t ffn = sh.experts_total > 0 ? moe_feed_forward_bytes(B{}, sh, T).backward_scratch : 0;
  s.ffn_backward = ffn > 0 ? cv.take_bytes(ffn) : nullptr;
  return cv.used;
}

template <typename B>
void LayerAttention<B>::backward(const LayerShape&, const LayerBatch&, const LayerActivations<B>&, const A*, A*, A*,
                                 A*, const typename B::Exec&) {
  HONE_CHECK(false, "this attention seam has no backward (only training's attention has one)");
}

template <typename B>
void PackedAttention<B>::forward(int, const LayerShape& s, const LayerBatch& b, const LayerActivations<B>& a,
                                 const typename B::Exec& x) {
  HONE_CHECK(a.qkv_ld == 0, "packed attention reads v as rows of their own (no fused QKV projection)");
  B::attention_forward(x, a.attn, a.lse, a.q_r, a.k_r, a.v, b.cu_seqlens, b.S, b.max_seqlen, b.T, s.heads,
                       s.kv_heads, s.head_dim, s.attention_scale());
}

template <typename B>
void PackedAttention<B>::backward(const LayerShape& s, const LayerBatch& b, const LayerActivations<B>& a,
                                  const A* dattn, A* dq_r, A* dk_r, A* dv, const typename B::Exec& x) {
  B::attention_backward(x, dq_r, dk_r, dv, dattn, a.attn, a.lse, a.q_r, a.k_r, a.v, b.cu_seqlens, b.S, b.max_seqlen,
                        b.T, s.heads, s.kv_heads, s.head_dim, s.attention_scale());
}

template <typename B>
void layer_forward(int layer, const LayerShape& sh, const LayerWeightPtrs<B>& w, const LayerBatch& b,
                   const LayerActivations<B>& a, const LayerScratch<B>& s, LayerAttention<B>& attention,
                   LayerFeedForward<B>& feed_forward, LayerCollectives<typename B::Act>* collectives,
                   typename B::Act* x_out, const typename B::Exec& x) {
  using A = typename B::Act;
  using Scope = typename B::Scope;
  const int T = b.T, C = sh.hidden, Q = sh.q_dim(), K = sh.kv_dim();
  const int Hq = sh.heads, Hkv = sh.kv_heads, D = sh.head_dim;
  const int Tl = collectives ? collectives->local_rows(T) : T;  // rows of the residual stream here
  const float eps = sh.eps;
  {
    Scope ps(x, "rmsnorm");
    B::rmsnorm_forward(x, a.h1_local, a.rstd1, a.x_in, w.input_layernorm, Tl, C, eps);
  }
  // One GEMM for q, k and v where the pass asks for it and the weights allow (LayerActivations::fuse_qkv): at a
  // decode step's few hundred rows each projection alone fills only part of a GPU, so the three cost about one.
  const bool fused = a.fuse_qkv && !collectives && !w.q_bias && !w.k_bias && !w.v_bias &&
                     w.k_proj == w.q_proj + int64_t(Q) * C && w.v_proj == w.k_proj + int64_t(K) * C &&
                     a.k >= a.q + int64_t(T) * Q && a.v >= a.k + int64_t(T) * K;
  LayerActivations<B> av = a;  // what the attention seam reads: q, k, v as laid out below
  if (fused) {
    Scope ps(x, "linear");
    const int64_t ld = int64_t(Q) + 2 * int64_t(K);
    B::linear_forward(x, a.q, a.h1, w.q_proj, nullptr, T, C, int(ld));
    av.k = a.q + Q;
    av.v = a.q + Q + K;
    av.qkv_ld = ld;
  }
  auto qkv = [&](int r0, int n) {
    Scope ps(x, "linear");
    const A* h = a.h1 + int64_t(r0) * C;
    B::linear_forward(x, a.q + int64_t(r0) * Q, h, w.q_proj, w.q_bias, n, C, Q);
    if (w.k_bias || w.v_bias) {
      B::linear_forward(x, a.k + int64_t(r0) * K, h, w.k_proj, w.k_bias, n, C, K);
      B::linear_forward(x, a.v + int64_t(r0) * K, h, w.v_proj, w.v_bias, n, C, K);
    } else {  // one batched GEMM on the GPU: k_proj and v_proj, a.k and a.v are adjacent
      B::linear_forward_pair(x, a.k + int64_t(r0) * K, a.v + int64_t(r0) * K, h, w.k_proj, w.v_proj, n, C, K);
    }
  };
  if (!fused) {
    if (collectives) collectives->column_parallel_forward(a.h1_local, a.h1, T, C, qkv);
    else qkv(0, T);
  }
  const int64_t ld = av.qkv_ld;
  if (sh.qk_norm) {
    Scope ps(x, "qk_norm_rope");
    B::qk_norm_rope_forward(x, a.q_r, a.rstd_q, av.q, w.q_norm, b.positions, b.inv_freq, T, Hq, D, eps, ld);
    B::qk_norm_rope_forward(x, a.k_r, a.rstd_k, av.k, w.k_norm, b.positions, b.inv_freq, T, Hkv, D, eps, ld);
  } else {
    Scope ps(x, "rope");
    B::rope_forward(x, a.q_r, av.q, b.positions, b.inv_freq, T, Hq, D, ld);
    B::rope_forward(x, a.k_r, av.k, b.positions, b.inv_freq, T, Hkv, D, ld);
  }
  {
    Scope ps(x, "attention");
    attention.forward(layer, sh, b, av, x);
  }
  auto o_proj = [&](int r0, int n) {
    Scope ps(x, "linear");
    B::linear_forward(x, s.branch + int64_t(r0) * C, a.attn + int64_t(r0) * Q, w.o_proj, nullptr, n, Q, C);
  };
  if (collectives) collectives->row_parallel_forward(s.branch, s.branch_local, T, C, o_proj);
  else o_proj(0, T);
  {
    Scope ps(x, "add_rmsnorm");
    B::add_rmsnorm_forward(x, a.x_mid, a.h2_local, a.rstd2, s.branch_local, a.x_in, w.post_attention_layernorm, Tl, C,
                           eps);
  }
  feed_forward.forward(layer, sh, w, b, a, s, collectives, s.branch, s.branch_local, x);
  {
    Scope ps(x, "add");
    B::add_forward(x, x_out, s.branch_local, a.x_mid, int64_t(Tl) * C);
  }
}

namespace {

// The backward of a row-parallel projection y = x W^T (o_proj, down_proj; x [T, IC] holds this rank's slice of the
// features): the input gradient dx from the residual gradient dres [local rows, C], gathered to all T rows in dy
// under sequence parallelism (dy is dres without), then the weight gradient. dx is written (each chunk of rows by
// its own GEMM): it is the first producer of that gradient.
template <typename B>
void row_parallel_linear_backward(typename B::Act* dx, float* dw, const typename B::Act* in,
                                  const typename B::Act* w, int T, int IC, int C, typename B::Act* dres,
                                  typename B::Act* dy, LayerCollectives<typename B::Act>* collectives,
                                  const typename B::Exec& x) {
  using Scope = typename B::Scope;
  auto dgrad = [&](int r0, int n) {
    Scope ps(x, "linear_backward");
    B::linear_backward(x, dx + int64_t(r0) * IC, nullptr, nullptr, dy + int64_t(r0) * C, in + int64_t(r0) * IC, w, n,
                       IC, C, /*accumulate_dx=*/false);
  };
  auto wgrad = [&] {
    Scope ps(x, "linear_backward");
    B::linear_backward(x, nullptr, dw, nullptr, dy, in, w, T, IC, C, /*accumulate_dx=*/true);
  };
  if (collectives) {
    collectives->row_parallel_backward(dres, dy, T, C, dgrad, wgrad);
  } else {
    dgrad(0, T);
    wgrad();
  }
}

// The attention branch: x_mid = x_in + o_proj(attention(rope(norm(q)), rope(norm(k)), v)).
template <typename B>
void attention_branch_backward(const LayerShape& sh, const LayerWeightPtrs<B>& w, const LayerGradPtrs& g,
                               const LayerBatch& b, const LayerActivations<B>& a, const LayerScratch<B>& s,
                               LayerAttention<B>& attention, LayerCollectives<typename B::Act>* collectives,
                               typename B::Act* dres, const typename B::Exec& x) {
  using A = typename B::Act;
  using Scope = typename B::Scope;
  const int T = b.T, C = sh.hidden, Q = sh.q_dim(), K = sh.kv_dim();
  const int Hq = sh.heads, Hkv = sh.kv_heads, D = sh.head_dim;
  const int Tl = collectives ? collectives->local_rows(T) : T;
  A* dy = Tl != T ? s.dy : dres;
  // First writers: o_proj's dgrad writes dattn; attention's backward dq_r, dk_r and dv; the q/k norm with RoPE's
  // backward (or RoPE's alone) dq and dk; q_proj's dgrad dh (row chunk by row chunk), k_proj's and v_proj's add to
  // it. Nothing is zeroed.
  row_parallel_linear_backward<B>(s.dattn, g.o_proj, a.attn, w.o_proj, T, Q, C, dres, dy, collectives, x);
  {
    Scope ps(x, "attention_backward");
    attention.backward(sh, b, a, s.dattn, s.dq_r, s.dk_r, s.dv, x);
  }
  if (sh.qk_norm) {  // writes dq and dk (the norm weights' gradients accumulate)
    Scope ps(x, "qk_norm_rope_backward");
    B::qk_norm_rope_backward(x, s.dq, g.q_norm, s.dq_r, a.q, w.q_norm, a.rstd_q, b.positions, b.inv_freq, T, Hq, D);
    B::qk_norm_rope_backward(x, s.dk, g.k_norm, s.dk_r, a.k, w.k_norm, a.rstd_k, b.positions, b.inv_freq, T, Hkv, D);
  } else {
    Scope ps(x, "rope_backward");
    B::rope_backward(x, s.dq, s.dq_r, b.positions, b.inv_freq, T, Hq, D, /*accumulate=*/false);
    B::rope_backward(x, s.dk, s.dk_r, b.positions, b.inv_freq, T, Hkv, D, /*accumulate=*/false);
  }
  auto qkv_dgrad = [&](int r0, int n) {
    Scope ps(x, "linear_backward");
    A* dh = s.dh + int64_t(r0) * C;
    const A* h = a.h1 + int64_t(r0) * C;
    B::linear_backward(x, dh, nullptr, nullptr, s.dq + int64_t(r0) * Q, h, w.q_proj, n, C, Q, false);
    B::linear_backward(x, dh, nullptr, nullptr, s.dk + int64_t(r0) * K, h, w.k_proj, n, C, K, true);
    B::linear_backward(x, dh, nullptr, nullptr, s.dv + int64_t(r0) * K, h, w.v_proj, n, C, K, true);
  };
  auto qkv_wgrad = [&] {
    Scope ps(x, "linear_backward");
    B::linear_backward(x, nullptr, g.q_proj, g.q_bias, s.dq, a.h1, w.q_proj, T, C, Q, true);
    B::linear_backward(x, nullptr, g.k_proj, g.k_bias, s.dk, a.h1, w.k_proj, T, C, K, true);
    B::linear_backward(x, nullptr, g.v_proj, g.v_bias, s.dv, a.h1, w.v_proj, T, C, K, true);
  };
  if (collectives) {
    collectives->column_parallel_backward(a.h1_local, a.h1, s.dh, s.dh_local, T, C, qkv_dgrad, qkv_wgrad);
  } else {
    qkv_dgrad(0, T);
    qkv_wgrad();
  }
  {
    Scope ps(x, "rmsnorm_backward");
    B::rmsnorm_backward(x, dres, g.input_layernorm, s.dh_local, a.x_in, w.input_layernorm, a.rstd1, Tl, C, true);
  }
}

}  // namespace

template <typename B>
void DenseFeedForward<B>::forward(int, const LayerShape& sh, const LayerWeightPtrs<B>& w, const LayerBatch& b,
                                  const LayerActivations<B>& a, const LayerScratch<B>&, LayerCollectives<A>* collectives,
                                  A* y, A* out, const typename B::Exec& x) {
  using Scope = typename B::Scope;
  const int T = b.T, C = sh.hidden, I = sh.intermediate;
  auto gate_up = [&](int r0, int n) {
    Scope ps(x, "linear");
    const A* h = a.h2 + int64_t(r0) * C;
    B::linear_forward_pair(x, a.gate + int64_t(r0) * I, a.up + int64_t(r0) * I, h, w.gate_proj, w.up_proj, n, C, I);
  };
  if (collectives) collectives->column_parallel_forward(a.h2_local, a.h2, T, C, gate_up);
  else gate_up(0, T);
  {
    Scope ps(x, "swiglu");
    B::swiglu_forward(x, a.act, a.gate, a.up, int64_t(T) * I);
  }
  auto down = [&](int r0, int n) {
    Scope ps(x, "linear");
    B::linear_forward(x, y + int64_t(r0) * C, a.act + int64_t(r0) * I, w.down_proj, nullptr, n, I, C);
  };
  if (collectives) collectives->row_parallel_forward(y, out, T, C, down);
  else down(0, T);
}

template <typename B>
void DenseFeedForward<B>::backward(int, const LayerShape& sh, const LayerWeightPtrs<B>& w, const LayerGradPtrs& g,
                                   const LayerBatch& b, const LayerActivations<B>& a, const LayerScratch<B>& s,
                                   LayerCollectives<A>* collectives, A* dres, const typename B::Exec& x) {
  using Scope = typename B::Scope;
  const int T = b.T, C = sh.hidden, I = sh.intermediate;
  const int Tl = collectives ? collectives->local_rows(T) : T;
  const int64_t TI = int64_t(T) * I;
  // The residual gradient as the down projection's backward reads it: all T rows (gathered under sequence
  // parallelism).
  A* dy = Tl != T ? s.dy : dres;
  // First writers: down_proj's dgrad writes dact, swiglu_backward dgate and dup, gate_proj's dgrad dh (row chunk by
  // row chunk, as the collectives hook hands them out); up_proj's dgrad adds to dh.
  row_parallel_linear_backward<B>(s.dact, g.down_proj, a.act, w.down_proj, T, I, C, dres, dy, collectives, x);
  {
    Scope ps(x, "swiglu_backward");
    B::swiglu_backward(x, s.dgate, s.dup, s.dact, a.gate, a.up, TI, /*accumulate=*/false);
  }
  auto gate_up_dgrad = [&](int r0, int n) {
    Scope ps(x, "linear_backward");
    A* dh = s.dh + int64_t(r0) * C;
    const A* h = a.h2 + int64_t(r0) * C;
    B::linear_backward(x, dh, nullptr, nullptr, s.dgate + int64_t(r0) * I, h, w.gate_proj, n, C, I, false);
    B::linear_backward(x, dh, nullptr, nullptr, s.dup + int64_t(r0) * I, h, w.up_proj, n, C, I, true);
  };
  auto gate_up_wgrad = [&] {  // under sequence parallelism a.h2 is the layers' shared place, gathered again
    Scope ps(x, "linear_backward");
    B::linear_backward(x, nullptr, g.gate_proj, nullptr, s.dgate, a.h2, w.gate_proj, T, C, I, true);
    B::linear_backward(x, nullptr, g.up_proj, nullptr, s.dup, a.h2, w.up_proj, T, C, I, true);
  };
  if (collectives) {
    collectives->column_parallel_backward(a.h2_local, a.h2, s.dh, s.dh_local, T, C, gate_up_dgrad, gate_up_wgrad);
  } else {
    gate_up_dgrad(0, T);
    gate_up_wgrad();
  }
}

template <typename B>
void layer_backward(int layer, const LayerShape& sh, const LayerWeightPtrs<B>& w, const LayerGradPtrs& g,
                    const LayerBatch& b, const LayerActivations<B>& a, const LayerScratch<B>& s,
                    LayerAttention<B>& attention, LayerFeedForward<B>& feed_forward,
                    LayerCollectives<typename B::Act>* collectives, typename B::Act* dres,
                    const typename B::Exec& x) {
  const int Tl = collectives ? collectives->local_rows(b.T) : b.T;
  // The feed-forward branch: x_out = x_mid + ffn(h2), h2 = rmsnorm(x_mid). dres is read as d(x_out) by the
  // feed-forward's backward before rmsnorm_backward adds the branch's share of d(x_mid) into it.
  feed_forward.backward(layer, sh, w, g, b, a, s, collectives, dres, x);
  {
    typename B::Scope ps(x, "rmsnorm_backward");
    B::rmsnorm_backward(x, dres, g.post_attention_layernorm, s.dh_local, a.x_mid, w.post_attention_layernorm,
                        a.rstd2, Tl, sh.hidden, true);
  }
  attention_branch_backward<B>(sh, w, g, b, a, s, attention, collectives, dres, x);
}

#define HONE_INSTANTIATE_LAYER(B)                                                                                    \
  template size_t carve_layer_activations<B>(LayerActivations<B>&, char*, const LayerShape&, int, int);           \
  template size_t carve_gathered_rows<B>(LayerActivations<B>&, char*, const LayerShape&, int);                     \
  template size_t carve_layer_forward_scratch<B>(LayerScratch<B>&, char*, const LayerShape&, int, int);            \
  template size_t carve_layer_backward_scratch<B>(LayerScratch<B>&, char*, const LayerShape&, int, int);           \
  template class LayerAttention<B>;                                                                                \
  template class PackedAttention<B>;                                                                               \
  template class DenseFeedForward<B>;                                                                              \
  template void layer_forward<B>(int, const LayerShape&, const LayerWeightPtrs<B>&, const LayerBatch&,             \
                                 const LayerActivations<B>&, const LayerScratch<B>&, LayerAttention<B>&,           \
                                 LayerFeedForward<B>&, LayerCollectives<B::Act>*, B::Act*, const B::Exec&);        \
  template void layer_backward<B>(int, const LayerShape&, const LayerWeightPtrs<B>&, const LayerGradPtrs&,         \
                                  const LayerBatch&, const LayerActivations<B>&, const LayerScratch<B>&,           \
                                  LayerAttention<B>&, LayerFeedForward<B>&, LayerCollectives<B::Act>*, B::Act*,    \
                                  const B::Exec&);
HONE_FOR_EACH_BACKEND(HONE_INSTANTIATE_LAYER)

}  // namespace hone
