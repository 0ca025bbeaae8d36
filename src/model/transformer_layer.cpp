// The CPU decoder layer body (Llama / Qwen2 / Qwen3), forward and backward, and its dense feed-forward, written
// against the op API.
#include "model/transformer_layer.h"

#include <cmath>
#include <cstring>

#include "ops/ops.h"
#include "runtime/error.h"

namespace hone {
namespace {

void zero(float* p, int64_t n) { std::memset(p, 0, size_t(n) * sizeof(float)); }
const float* opt(const Tensor& t) { return t.defined() ? t.f32() : nullptr; }
float* opt_mut(Tensor& t) { return t.defined() ? t.f32() : nullptr; }

// Bump allocation of per-token regions: every region is rows * per_token floats (T rows unless given), rounded to
// 16 floats (64 bytes). With base == nullptr it only counts (used), so sizing and carving share one code path.
struct Carver {
  float* base;
  int T;
  int64_t used = 0;
  float* take(int64_t per_token, int rows = -1) {
    float* r = base ? base + used : nullptr;
    used += (per_token * (rows < 0 ? T : rows) + 15) / 16 * 16;
    return r;
  }
};

// The backward of a row-parallel projection y = x W^T (o_proj, down_proj; x [T, IC] holds this rank's slice of the
// features): the input gradient dx from the residual gradient dres [local rows, C], gathered to all T rows in dy
// under sequence parallelism (dy is dres without), then the weight gradient.
void row_parallel_linear_backward(float* dx, float* dw, const float* x, const float* w, int T, int IC, int C,
                                  float* dres, float* dy, LayerCollectives<float>* collectives) {
  auto dgrad = [&](int r0, int n) {
    cpu::linear_backward(dx + int64_t(r0) * IC, nullptr, nullptr, dy + int64_t(r0) * C, x + int64_t(r0) * IC, w, n,
                         IC, C, true);
  };
  auto wgrad = [&] { cpu::linear_backward(nullptr, dw, nullptr, dy, x, w, T, IC, C, true); };
  if (collectives) {
    collectives->row_parallel_backward(dres, dy, T, C, dgrad, wgrad);
  } else {
    dgrad(0, T);
    wgrad();
  }
}

}  // namespace

int64_t carve_layer_activations(LayerActivations& a, float* base, const LayerShape& s, int T, int local_rows) {
  const int64_t C = s.hidden, Q = s.q_dim(), K = s.kv_dim(), I = s.intermediate;
  const int Tl = local_rows < 0 ? T : local_rows;
  const bool sp = Tl != T;
  Carver cv{base, T};
  a.rstd1 = cv.take(1, Tl);
  // Under sequence parallelism the gathered rows (h1, h2) and the row-parallel partial sums are not kept per
  // layer: carve_gathered_rows gives them one shared place, and the backward gathers h1 and h2 again.
  a.h1 = sp ? nullptr : cv.take(C);
  a.h1_local = sp ? cv.take(C, Tl) : a.h1;
  a.q = cv.take(Q);
  a.k = cv.take(K);
  a.v = cv.take(K);
  if (s.qk_norm) {
    a.q_n = cv.take(Q);
    a.k_n = cv.take(K);
    a.rstd_q = cv.take(s.heads);
    a.rstd_k = cv.take(s.kv_heads);
  } else {
    a.q_n = a.q;
    a.k_n = a.k;
    a.rstd_q = a.rstd_k = nullptr;
  }
  a.q_r = cv.take(Q);
  a.k_r = cv.take(K);
  a.attn = cv.take(Q);
  a.lse = cv.take(s.heads);
  a.x_mid = cv.take(C, Tl);
  a.rstd2 = cv.take(1, Tl);
  a.h2 = sp ? nullptr : cv.take(C);
  a.h2_local = sp ? cv.take(C, Tl) : a.h2;
  a.gate = cv.take(I);
  a.up = cv.take(I);
  a.act = cv.take(I);
  a.row_out = nullptr;
  return cv.used;
}

int64_t carve_gathered_rows(LayerActivations& a, float* base, const LayerShape& s, int T) {
  Carver cv{base, T};
  a.h1 = cv.take(s.hidden);
  a.h2 = cv.take(s.hidden);
  a.row_out = cv.take(s.hidden);
  return cv.used;
}

int64_t carve_layer_grad_scratch(LayerGradScratch& g, float* base, const LayerShape& s, int T, int local_rows) {
  const int64_t C = s.hidden, Q = s.q_dim(), K = s.kv_dim(), I = s.intermediate;
  const int Tl = local_rows < 0 ? T : local_rows;
  Carver cv{base, T};
  g.dh = cv.take(C);
  g.dh_local = Tl != T ? cv.take(C, Tl) : g.dh;
  g.dy = Tl != T ? cv.take(C) : nullptr;
  g.dact = cv.take(I);
  g.dgate = cv.take(I);
  g.dup = cv.take(I);
  g.dattn = cv.take(Q);
  g.dq_r = cv.take(Q);
  g.dq_n = cv.take(Q);
  g.dq = cv.take(Q);
  g.dk_r = cv.take(K);
  g.dk_n = cv.take(K);
  g.dk = cv.take(K);
  g.dv = cv.take(K);
  return cv.used;
}

void LayerAttention::backward(const LayerShape&, const LayerBatch&, const LayerActivations&, const float*, float*,
                              float*, float*) {
  HONE_CHECK(false, "this attention seam has no backward (only training's attention has one)");
}

void PackedAttention::forward(int, const LayerShape& s, const LayerBatch& b, const LayerActivations& a) {
  cpu::attention_forward(a.attn, a.lse, a.q_r, a.k_r, a.v, b.cu_seqlens, b.S, b.T, s.heads, s.kv_heads, s.head_dim,
                         s.attention_scale());
}

void PackedAttention::backward(const LayerShape& s, const LayerBatch& b, const LayerActivations& a,
                               const float* dattn, float* dq_r, float* dk_r, float* dv) {
  cpu::attention_backward(dq_r, dk_r, dv, dattn, a.attn, a.lse, a.q_r, a.k_r, a.v, b.cu_seqlens, b.S, b.T, s.heads,
                          s.kv_heads, s.head_dim, s.attention_scale());
}

void DenseFeedForward::forward(int, const LayerShape& s, const LayerWeights& w, const LayerBatch& b,
                               const LayerActivations& a, LayerCollectives<float>* collectives, float* y,
                               float* out) {
  const int T = b.T, C = s.hidden, I = s.intermediate;
  auto gate_up = [&](int r0, int n) {
    const float* h = a.h2 + int64_t(r0) * C;
    cpu::linear_forward_pair(a.gate + int64_t(r0) * I, a.up + int64_t(r0) * I, h, w.gate_proj.f32(), w.up_proj.f32(),
                             n, C, I);
  };
  if (collectives) collectives->column_parallel_forward(a.h2_local, a.h2, T, C, gate_up);
  else gate_up(0, T);
  cpu::swiglu_forward(a.act, a.gate, a.up, int64_t(T) * I);
  auto down = [&](int r0, int n) {
    cpu::linear_forward(y + int64_t(r0) * C, a.act + int64_t(r0) * I, w.down_proj.f32(), nullptr, n, I, C);
  };
  if (collectives) collectives->row_parallel_forward(y, out, T, C, down);
  else down(0, T);
}

void DenseFeedForward::backward(int, const LayerShape& sh, const LayerWeights& w, LayerWeights& g,
                                const LayerBatch& b, const LayerActivations& a, const LayerGradScratch& s,
                                LayerCollectives<float>* collectives, float* dres) {
  const int T = b.T, C = sh.hidden, I = sh.intermediate;
  const int64_t TC = int64_t(T) * C, TI = int64_t(T) * I;
  const int Tl = collectives ? collectives->local_rows(T) : T;
  float* dy = Tl != T ? s.dy : dres;  // the residual gradient on all T rows, as layer_backward reads it
  zero(s.dact, TI);
  row_parallel_linear_backward(s.dact, g.down_proj.f32(), a.act, w.down_proj.f32(), T, I, C, dres, dy, collectives);
  zero(s.dgate, TI);
  zero(s.dup, TI);
  cpu::swiglu_backward(s.dgate, s.dup, s.dact, a.gate, a.up, TI, true);
  zero(s.dh, TC);
  auto gate_up_dgrad = [&](int r0, int n) {
    float* dh = s.dh + int64_t(r0) * C;
    const float* h = a.h2 + int64_t(r0) * C;
    cpu::linear_backward(dh, nullptr, nullptr, s.dgate + int64_t(r0) * I, h, w.gate_proj.f32(), n, C, I, true);
    cpu::linear_backward(dh, nullptr, nullptr, s.dup + int64_t(r0) * I, h, w.up_proj.f32(), n, C, I, true);
  };
  auto gate_up_wgrad = [&] {  // under sequence parallelism a.h2 is the shared place, gathered again
    cpu::linear_backward(nullptr, g.gate_proj.f32(), nullptr, s.dgate, a.h2, w.gate_proj.f32(), T, C, I, true);
    cpu::linear_backward(nullptr, g.up_proj.f32(), nullptr, s.dup, a.h2, w.up_proj.f32(), T, C, I, true);
  };
  if (collectives) {
    collectives->column_parallel_backward(a.h2_local, a.h2, s.dh, s.dh_local, T, C, gate_up_dgrad, gate_up_wgrad);
  } else {
    gate_up_dgrad(0, T);
    gate_up_wgrad();
  }
}

void layer_forward(int layer, const LayerShape& s, const LayerWeights& w, const LayerBatch& b,
                   const LayerActivations& a, LayerAttention& attention, LayerFeedForward& feed_forward,
                   LayerCollectives<float>* collectives, float* x_out) {
  const int T = b.T, C = s.hidden, Q = s.q_dim(), K = s.kv_dim();
  const int Hq = s.heads, Hkv = s.kv_heads, D = s.head_dim;
  const int Tl = collectives ? collectives->local_rows(T) : T;  // rows of the residual stream here
  const bool sp = Tl != T;
  const int64_t TlC = int64_t(Tl) * C;
  const float eps = s.eps;

  cpu::rmsnorm_forward(a.h1_local, a.rstd1, a.x_in, w.input_layernorm.f32(), Tl, C, eps);
  auto qkv = [&](int r0, int n) {
    const float* h = a.h1 + int64_t(r0) * C;
    cpu::linear_forward(a.q + int64_t(r0) * Q, h, w.q_proj.f32(), opt(w.q_bias), n, C, Q);
    cpu::linear_forward(a.k + int64_t(r0) * K, h, w.k_proj.f32(), opt(w.k_bias), n, C, K);
    cpu::linear_forward(a.v + int64_t(r0) * K, h, w.v_proj.f32(), opt(w.v_bias), n, C, K);
  };
  if (collectives) collectives->column_parallel_forward(a.h1_local, a.h1, T, C, qkv);
  else qkv(0, T);
  if (s.qk_norm) {
    cpu::rmsnorm_forward(a.q_n, a.rstd_q, a.q, w.q_norm.f32(), T * Hq, D, eps);
    cpu::rmsnorm_forward(a.k_n, a.rstd_k, a.k, w.k_norm.f32(), T * Hkv, D, eps);
  }
  cpu::rope_forward(a.q_r, a.q_n, b.positions, b.inv_freq, T, Hq, D);
  cpu::rope_forward(a.k_r, a.k_n, b.positions, b.inv_freq, T, Hkv, D);
  attention.forward(layer, s, b, a);
  float* o = sp ? a.row_out : a.x_mid;
  auto o_proj = [&](int r0, int n) {
    cpu::linear_forward(o + int64_t(r0) * C, a.attn + int64_t(r0) * Q, w.o_proj.f32(), nullptr, n, Q, C);
  };
  if (collectives) collectives->row_parallel_forward(o, a.x_mid, T, C, o_proj);
  else o_proj(0, T);
  cpu::add_forward(a.x_mid, a.x_mid, a.x_in, TlC);

  cpu::rmsnorm_forward(a.h2_local, a.rstd2, a.x_mid, w.post_attention_layernorm.f32(), Tl, C, eps);
  feed_forward.forward(layer, s, w, b, a, collectives, sp ? a.row_out : x_out, x_out);
  cpu::add_forward(x_out, x_out, a.x_mid, TlC);
}

void layer_backward(int layer, const LayerShape& sh, const LayerWeights& w, LayerWeights& g, const LayerBatch& b,
                    const LayerActivations& a, const LayerGradScratch& s, LayerAttention& attention,
                    LayerFeedForward& feed_forward, LayerCollectives<float>* collectives, float* dres) {
  const int T = b.T, C = sh.hidden, Q = sh.q_dim(), K = sh.kv_dim();
  const int Hq = sh.heads, Hkv = sh.kv_heads, D = sh.head_dim;
  const int64_t TC = int64_t(T) * C, TQ = int64_t(T) * Q, TK = int64_t(T) * K;
  const int Tl = collectives ? collectives->local_rows(T) : T;
  const bool sp = Tl != T;
  // The residual gradient as the row-parallel GEMMs' backward reads it: all T rows (gathered under sequence
  // parallelism: the gradient of a reduce-scatter is an all-gather).
  float* dy = sp ? s.dy : dres;

  // Feed-forward branch: x_out = x_mid + ffn(h2), h2 = rmsnorm(x_mid). dres is read as d(x_out) by the
  // feed-forward's backward before rmsnorm_backward adds the branch's share of d(x_mid) into it.
  feed_forward.backward(layer, sh, w, g, b, a, s, collectives, dres);
  cpu::rmsnorm_backward(dres, g.post_attention_layernorm.f32(), s.dh_local, a.x_mid, w.post_attention_layernorm.f32(),
                        a.rstd2, Tl, C);

  // Attention branch: x_mid = x_in + o_proj(attention(rope(norm(q)), rope(norm(k)), v)).
  zero(s.dattn, TQ);
  row_parallel_linear_backward(s.dattn, g.o_proj.f32(), a.attn, w.o_proj.f32(), T, Q, C, dres, dy, collectives);
  zero(s.dq_r, TQ);
  zero(s.dk_r, TK);
  zero(s.dv, TK);
  attention.backward(sh, b, a, s.dattn, s.dq_r, s.dk_r, s.dv);
  zero(s.dq, TQ);
  zero(s.dk, TK);
  if (sh.qk_norm) {
    zero(s.dq_n, TQ);
    zero(s.dk_n, TK);
    cpu::rope_backward(s.dq_n, s.dq_r, b.positions, b.inv_freq, T, Hq, D);
    cpu::rope_backward(s.dk_n, s.dk_r, b.positions, b.inv_freq, T, Hkv, D);
    cpu::rmsnorm_backward(s.dq, g.q_norm.f32(), s.dq_n, a.q, w.q_norm.f32(), a.rstd_q, T * Hq, D);
    cpu::rmsnorm_backward(s.dk, g.k_norm.f32(), s.dk_n, a.k, w.k_norm.f32(), a.rstd_k, T * Hkv, D);
  } else {
    cpu::rope_backward(s.dq, s.dq_r, b.positions, b.inv_freq, T, Hq, D);
    cpu::rope_backward(s.dk, s.dk_r, b.positions, b.inv_freq, T, Hkv, D);
  }
  zero(s.dh, TC);
  auto qkv_dgrad = [&](int r0, int n) {
    float* dh = s.dh + int64_t(r0) * C;
    const float* h = a.h1 + int64_t(r0) * C;
    cpu::linear_backward(dh, nullptr, nullptr, s.dq + int64_t(r0) * Q, h, w.q_proj.f32(), n, C, Q, true);
    cpu::linear_backward(dh, nullptr, nullptr, s.dk + int64_t(r0) * K, h, w.k_proj.f32(), n, C, K, true);
    cpu::linear_backward(dh, nullptr, nullptr, s.dv + int64_t(r0) * K, h, w.v_proj.f32(), n, C, K, true);
  };
  auto qkv_wgrad = [&] {
    cpu::linear_backward(nullptr, g.q_proj.f32(), opt_mut(g.q_bias), s.dq, a.h1, w.q_proj.f32(), T, C, Q, true);
    cpu::linear_backward(nullptr, g.k_proj.f32(), opt_mut(g.k_bias), s.dk, a.h1, w.k_proj.f32(), T, C, K, true);
    cpu::linear_backward(nullptr, g.v_proj.f32(), opt_mut(g.v_bias), s.dv, a.h1, w.v_proj.f32(), T, C, K, true);
  };
  if (collectives) {
    collectives->column_parallel_backward(a.h1_local, a.h1, s.dh, s.dh_local, T, C, qkv_dgrad, qkv_wgrad);
  } else {
    qkv_dgrad(0, T);
    qkv_wgrad();
  }
  cpu::rmsnorm_backward(dres, g.input_layernorm.f32(), s.dh_local, a.x_in, w.input_layernorm.f32(), a.rstd1, Tl, C);
}

}  // namespace hone
