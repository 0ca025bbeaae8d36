// The GPU decoder layer body (Llama / Qwen2 / Qwen3), forward and backward, and its dense feed-forward, written
// against cuda/ops_cuda.h in the order of model/transformer_layer.cpp. The post-attention residual add and RMSNorm
// run as one fused op, and so do Qwen3's q/k norms and RoPE. The GEMMs that a tensor-parallel collective brackets go
// to the collectives hook as functions of their rows (the hook may move the rows in chunks and run the GEMMs chunk by
// chunk); at tp = 1 they run directly on all rows.
#include "model/gpu_transformer_layer.h"

#if HONE_CUDA

#include <cmath>

#include "cuda/carver.h"
#include "cuda/check.h"
#include "model/gpu_moe_feed_forward.h"
#include "model/gpu_op_profiler.h"
#include "runtime/error.h"

namespace hone {

// Activation gradients are not zeroed: the first op to produce one writes it (accumulate false) and the ops after it
// add to it.

size_t carve_gpu_layer_activations(GpuLayerActivations& a, char* base, const LayerShape& s, int T, int local_rows) {
  const int64_t C = s.hidden, Q = s.q_dim(), K = s.kv_dim(), I = s.intermediate;
  const int Tl = local_rows < 0 ? T : local_rows;
  const bool sp = Tl != T;
  cuda::Carver cv{base};
  a.rstd1 = cv.take<float>(Tl);
  // Under sequence parallelism the gathered rows are not kept per layer (carve_gpu_gathered_rows).
  a.h1 = sp ? nullptr : cv.take<bf16>(T * C);
  a.h1_local = sp ? cv.take<bf16>(Tl * C) : a.h1;
  a.q = cv.take<bf16>(T * Q);
  a.k = cv.take<bf16>(T * K);
  a.v = cv.take<bf16>(T * K);
  if (s.qk_norm) {  // the normed q and k are not kept: the fused norm + RoPE's backward needs only q, k and rstd
    a.rstd_q = cv.take<float>(int64_t(T) * s.heads);
    a.rstd_k = cv.take<float>(int64_t(T) * s.kv_heads);
  } else {
    a.rstd_q = a.rstd_k = nullptr;
  }
  a.q_r = cv.take<bf16>(T * Q);
  a.k_r = cv.take<bf16>(T * K);
  a.attn = cv.take<bf16>(T * Q);
  a.lse = cv.take<float>(int64_t(T) * s.heads);
  a.x_mid = cv.take<bf16>(Tl * C);
  a.rstd2 = cv.take<float>(Tl);
  a.h2 = sp ? nullptr : cv.take<bf16>(T * C);
  a.h2_local = sp ? cv.take<bf16>(Tl * C) : a.h2;
  a.gate = cv.take<bf16>(T * I);
  a.up = cv.take<bf16>(T * I);
  a.act = cv.take<bf16>(T * I);
  a.ffn = s.experts_total > 0 ? cv.take_bytes(gpu_moe_saved_bytes(s, T)) : nullptr;
  return cv.used;
}

size_t carve_gpu_gathered_rows(GpuLayerActivations& a, char* base, const LayerShape& s, int T) {
  cuda::Carver cv{base};
  a.h1 = cv.take<bf16>(int64_t(T) * s.hidden);
  a.h2 = cv.take<bf16>(int64_t(T) * s.hidden);
  return cv.used;
}

size_t carve_gpu_layer_forward_scratch(GpuLayerScratch& scratch, char* base, const LayerShape& sh, int T,
                                       int local_rows) {
  const int Tl = local_rows < 0 ? T : local_rows;
  cuda::Carver cv{base};
  scratch.branch = cv.take<bf16>(int64_t(T) * sh.hidden);
  scratch.branch_local = Tl != T ? cv.take<bf16>(int64_t(Tl) * sh.hidden) : scratch.branch;
  scratch.ffn = sh.experts_total > 0 ? cv.take_bytes(gpu_moe_forward_scratch_bytes(sh, T)) : nullptr;
  return cv.used;
}

size_t carve_gpu_layer_backward_scratch(GpuLayerScratch& s, char* base, const LayerShape& sh, int T, int local_rows) {
  const int64_t C = sh.hidden, Q = sh.q_dim(), K = sh.kv_dim(), I = sh.intermediate;
  const int Tl = local_rows < 0 ? T : local_rows;
  cuda::Carver cv{base};
  s.dh = cv.take<bf16>(T * C);
  s.dh_local = Tl != T ? cv.take<bf16>(Tl * C) : s.dh;
  s.dy = Tl != T ? cv.take<bf16>(T * C) : nullptr;
  s.dact = cv.take<bf16>(T * I);
  s.dgate = cv.take<bf16>(T * I);
  s.dup = cv.take<bf16>(T * I);
  s.dattn = cv.take<bf16>(T * Q);
  s.dq_r = cv.take<bf16>(T * Q);
  s.dq = cv.take<bf16>(T * Q);
  s.dk_r = cv.take<bf16>(T * K);
  s.dk = cv.take<bf16>(T * K);
  s.dv = cv.take<bf16>(T * K);
  s.ffn_backward = sh.experts_total > 0 ? cv.take_bytes(gpu_moe_backward_scratch_bytes(sh, T)) : nullptr;
  return cv.used;
}

void GpuPackedAttention::forward(int, const LayerShape& s, const GpuLayerBatch& b, const GpuLayerActivations& a,
                                 const cuda::GpuContext& ctx) {
  HONE_CHECK(a.qkv_ld == 0, "packed attention reads v as rows of their own (no fused QKV projection)");
  cuda::attention_forward(a.attn, a.lse, a.q_r, a.k_r, a.v, b.cu_seqlens, b.S, b.max_seqlen, b.T, s.heads, s.kv_heads,
                          s.head_dim, s.attention_scale(), ctx);
}

void GpuLayerAttention::backward(const LayerShape&, const GpuLayerBatch&, const GpuLayerActivations&, const bf16*,
                                 bf16*, bf16*, bf16*, const cuda::GpuContext&) {
  HONE_CHECK(false, "this attention seam has no backward (only training's attention has one)");
}

void GpuPackedAttention::backward(const LayerShape& s, const GpuLayerBatch& b, const GpuLayerActivations& a,
                                  const bf16* dattn, bf16* dq_r, bf16* dk_r, bf16* dv, const cuda::GpuContext& ctx) {
  cuda::attention_backward(dq_r, dk_r, dv, dattn, a.attn, a.lse, a.q_r, a.k_r, a.v, b.cu_seqlens, b.S, b.max_seqlen,
                           b.T, s.heads, s.kv_heads, s.head_dim, s.attention_scale(), ctx);
}

void gpu_layer_forward(int layer, const LayerShape& sh, const GpuLayerParams<const bf16>& w, const GpuLayerBatch& b,
                       const GpuLayerActivations& a, const GpuLayerScratch& s, GpuLayerAttention& attention,
                       GpuLayerFeedForward& feed_forward, LayerCollectives<bf16>* collectives, bf16* x_out,
                       const cuda::GpuContext& ctx, GpuOpProfiler* prof) {
  const int T = b.T, C = sh.hidden, Q = sh.q_dim(), K = sh.kv_dim();
  const int Hq = sh.heads, Hkv = sh.kv_heads, D = sh.head_dim;
  const int Tl = collectives ? collectives->local_rows(T) : T;  // rows of the residual stream here
  const float eps = sh.eps;
  {
    ProfileScope ps(prof, "rmsnorm");
    cuda::rmsnorm_forward(a.h1_local, a.rstd1, a.x_in, w.input_layernorm, Tl, C, eps, ctx);
  }
  // One GEMM for q, k and v where the pass asks for it and the weights allow (GpuLayerActivations::fuse_qkv): at a
  // decode step's few hundred rows each projection alone fills only part of the GPU, so the three cost about one.
  const bool fused = a.fuse_qkv && !collectives && !w.q_bias && !w.k_bias && !w.v_bias &&
                     w.k_proj == w.q_proj + int64_t(Q) * C && w.v_proj == w.k_proj + int64_t(K) * C &&
                     a.k >= a.q + int64_t(T) * Q && a.v >= a.k + int64_t(T) * K;
  GpuLayerActivations av = a;  // what the attention seam reads: q, k, v as laid out below
  if (fused) {
    ProfileScope ps(prof, "linear");
    const int64_t ld = int64_t(Q) + 2 * int64_t(K);
    cuda::linear_forward(a.q, a.h1, w.q_proj, nullptr, T, C, int(ld), ctx);
    av.k = a.q + Q;
    av.v = a.q + Q + K;
    av.qkv_ld = ld;
  }
  auto qkv = [&](int r0, int n) {
    ProfileScope ps(prof, "linear");
    const bf16* h = a.h1 + int64_t(r0) * C;
    cuda::linear_forward(a.q + int64_t(r0) * Q, h, w.q_proj, w.q_bias, n, C, Q, ctx);
    if (w.k_bias || w.v_bias) {
      cuda::linear_forward(a.k + int64_t(r0) * K, h, w.k_proj, w.k_bias, n, C, K, ctx);
      cuda::linear_forward(a.v + int64_t(r0) * K, h, w.v_proj, w.v_bias, n, C, K, ctx);
    } else {  // one batched GEMM: k_proj and v_proj, a.k and a.v are adjacent
      cuda::linear_forward_pair(a.k + int64_t(r0) * K, a.v + int64_t(r0) * K, h, w.k_proj, w.v_proj, n, C, K, ctx);
    }
  };
  if (!fused) {
    if (collectives) collectives->column_parallel_forward(a.h1_local, a.h1, T, C, qkv);
    else qkv(0, T);
  }
  const int64_t ld = av.qkv_ld;
  if (sh.qk_norm) {
    ProfileScope ps(prof, "qk_norm_rope");
    cuda::qk_norm_rope_forward(a.q_r, a.rstd_q, av.q, w.q_norm, b.positions, b.inv_freq, T, Hq, D, eps, ctx, ld);
    cuda::qk_norm_rope_forward(a.k_r, a.rstd_k, av.k, w.k_norm, b.positions, b.inv_freq, T, Hkv, D, eps, ctx, ld);
  } else {
    ProfileScope ps(prof, "rope");
    cuda::rope_forward(a.q_r, av.q, b.positions, b.inv_freq, T, Hq, D, ctx, ld);
    cuda::rope_forward(a.k_r, av.k, b.positions, b.inv_freq, T, Hkv, D, ctx, ld);
  }
  {
    ProfileScope ps(prof, "attention");
    attention.forward(layer, sh, b, av, ctx);
  }
  auto o_proj = [&](int r0, int n) {
    ProfileScope ps(prof, "linear");
    cuda::linear_forward(s.branch + int64_t(r0) * C, a.attn + int64_t(r0) * Q, w.o_proj, nullptr, n, Q, C, ctx);
  };
  if (collectives) collectives->row_parallel_forward(s.branch, s.branch_local, T, C, o_proj);
  else o_proj(0, T);
  {
    ProfileScope ps(prof, "add_rmsnorm");
    cuda::add_rmsnorm_forward(a.x_mid, a.h2_local, a.rstd2, s.branch_local, a.x_in, w.post_attention_layernorm, Tl,
                              C, eps, ctx);
  }
  feed_forward.forward(layer, sh, w, b, a, s, collectives, s.branch, s.branch_local, ctx, prof);
  {
    ProfileScope ps(prof, "add");
    cuda::add_forward(x_out, s.branch_local, a.x_mid, int64_t(Tl) * C, ctx);
  }
}

namespace {

// The backward of a row-parallel projection y = x W^T (o_proj, down_proj; x [T, IC] holds this rank's slice of the
// features): the input gradient dx from the residual gradient dres [local rows, C], gathered to all T rows in dy
// under sequence parallelism (dy is dres without), then the weight gradient. dx is written (each chunk of rows by
// its own GEMM): it is the first producer of that gradient.
void row_parallel_linear_backward(bf16* dx, float* dw, const bf16* x, const bf16* w, int T, int IC, int C, bf16* dres,
                                  bf16* dy, LayerCollectives<bf16>* collectives, const cuda::GpuContext& ctx,
                                  GpuOpProfiler* prof) {
  auto dgrad = [&](int r0, int n) {
    ProfileScope ps(prof, "linear_backward");
    cuda::linear_backward(dx + int64_t(r0) * IC, nullptr, nullptr, dy + int64_t(r0) * C, x + int64_t(r0) * IC, w, n,
                          IC, C, /*accumulate_dx=*/false, ctx);
  };
  auto wgrad = [&] {
    ProfileScope ps(prof, "linear_backward");
    cuda::linear_backward(nullptr, dw, nullptr, dy, x, w, T, IC, C, /*accumulate_dx=*/true, ctx);
  };
  if (collectives) {
    collectives->row_parallel_backward(dres, dy, T, C, dgrad, wgrad);
  } else {
    dgrad(0, T);
    wgrad();
  }
}

}  // namespace

void GpuDenseFeedForward::forward(int, const LayerShape& sh, const GpuLayerParams<const bf16>& w,
                                  const GpuLayerBatch& b, const GpuLayerActivations& a, const GpuLayerScratch&,
                                  LayerCollectives<bf16>* collectives, bf16* y, bf16* out, const cuda::GpuContext& ctx,
                                  GpuOpProfiler* prof) {
  const int T = b.T, C = sh.hidden, I = sh.intermediate;
  auto gate_up = [&](int r0, int n) {
    ProfileScope ps(prof, "linear");
    const bf16* h = a.h2 + int64_t(r0) * C;
    cuda::linear_forward_pair(a.gate + int64_t(r0) * I, a.up + int64_t(r0) * I, h, w.gate_proj, w.up_proj, n, C, I,
                              ctx);
  };
  if (collectives) collectives->column_parallel_forward(a.h2_local, a.h2, T, C, gate_up);
  else gate_up(0, T);
  {
    ProfileScope ps(prof, "swiglu");
    cuda::swiglu_forward(a.act, a.gate, a.up, int64_t(T) * I, ctx);
  }
  auto down = [&](int r0, int n) {
    ProfileScope ps(prof, "linear");
    cuda::linear_forward(y + int64_t(r0) * C, a.act + int64_t(r0) * I, w.down_proj, nullptr, n, I, C, ctx);
  };
  if (collectives) collectives->row_parallel_forward(y, out, T, C, down);
  else down(0, T);
}

void GpuDenseFeedForward::backward(int, const LayerShape& sh, const GpuLayerParams<const bf16>& w,
                                   const GpuLayerParams<float>& g, const GpuLayerBatch& b,
                                   const GpuLayerActivations& a, const GpuLayerScratch& s,
                                   LayerCollectives<bf16>* collectives, bf16* dres, const cuda::GpuContext& ctx,
                                   GpuOpProfiler* prof) {
  const int T = b.T, C = sh.hidden, I = sh.intermediate;
  const int Tl = collectives ? collectives->local_rows(T) : T;
  const int64_t TI = int64_t(T) * I;
  // The residual gradient as the down projection's backward reads it: all T rows (gathered under sequence
  // parallelism).
  bf16* dy = Tl != T ? s.dy : dres;
  // First writers: down_proj's dgrad writes dact, swiglu_backward dgate and dup, gate_proj's dgrad dh (row chunk by
  // row chunk, as the collectives hook hands them out); up_proj's dgrad adds to dh.
  row_parallel_linear_backward(s.dact, g.down_proj, a.act, w.down_proj, T, I, C, dres, dy, collectives, ctx, prof);
  {
    ProfileScope ps(prof, "swiglu_backward");
    cuda::swiglu_backward(s.dgate, s.dup, s.dact, a.gate, a.up, TI, /*accumulate=*/false, ctx);
  }
  auto gate_up_dgrad = [&](int r0, int n) {
    ProfileScope ps(prof, "linear_backward");
    bf16* dh = s.dh + int64_t(r0) * C;
    const bf16* h = a.h2 + int64_t(r0) * C;
    cuda::linear_backward(dh, nullptr, nullptr, s.dgate + int64_t(r0) * I, h, w.gate_proj, n, C, I, false, ctx);
    cuda::linear_backward(dh, nullptr, nullptr, s.dup + int64_t(r0) * I, h, w.up_proj, n, C, I, true, ctx);
  };
  auto gate_up_wgrad = [&] {  // under sequence parallelism a.h2 is the layers' shared place, gathered again
    ProfileScope ps(prof, "linear_backward");
    cuda::linear_backward(nullptr, g.gate_proj, nullptr, s.dgate, a.h2, w.gate_proj, T, C, I, true, ctx);
    cuda::linear_backward(nullptr, g.up_proj, nullptr, s.dup, a.h2, w.up_proj, T, C, I, true, ctx);
  };
  if (collectives) {
    collectives->column_parallel_backward(a.h2_local, a.h2, s.dh, s.dh_local, T, C, gate_up_dgrad, gate_up_wgrad);
  } else {
    gate_up_dgrad(0, T);
    gate_up_wgrad();
  }
}


namespace {

// The attention branch: x_mid = x_in + o_proj(attention(rope(norm(q)), rope(norm(k)), v)).
void attention_branch_backward(const LayerShape& sh, const GpuLayerParams<const bf16>& w, const GpuLayerParams<float>& g,
                               const GpuLayerBatch& b, const GpuLayerActivations& a, const GpuLayerScratch& s,
                               GpuLayerAttention& attention, LayerCollectives<bf16>* collectives, bf16* dres,
                               const cuda::GpuContext& ctx, GpuOpProfiler* prof) {
  const int T = b.T, C = sh.hidden, Q = sh.q_dim(), K = sh.kv_dim();
  const int Hq = sh.heads, Hkv = sh.kv_heads, D = sh.head_dim;
  const int Tl = collectives ? collectives->local_rows(T) : T;
  bf16* dy = Tl != T ? s.dy : dres;
  // First writers: o_proj's dgrad writes dattn; attention's backward dq_r, dk_r and dv; the q/k norm with RoPE's
  // backward (or RoPE's alone) dq and dk; q_proj's dgrad dh (row chunk by row chunk), k_proj's and v_proj's add to
  // it. Nothing is zeroed.
  row_parallel_linear_backward(s.dattn, g.o_proj, a.attn, w.o_proj, T, Q, C, dres, dy, collectives, ctx, prof);
  {
    ProfileScope ps(prof, "attention_backward");
    attention.backward(sh, b, a, s.dattn, s.dq_r, s.dk_r, s.dv, ctx);
  }
  if (sh.qk_norm) {  // writes dq and dk (the norm weights' gradients accumulate)
    ProfileScope ps(prof, "qk_norm_rope_backward");
    cuda::qk_norm_rope_backward(s.dq, g.q_norm, s.dq_r, a.q, w.q_norm, a.rstd_q, b.positions, b.inv_freq, T, Hq, D,
                                ctx);
    cuda::qk_norm_rope_backward(s.dk, g.k_norm, s.dk_r, a.k, w.k_norm, a.rstd_k, b.positions, b.inv_freq, T, Hkv, D,
                                ctx);
  } else {
    ProfileScope ps(prof, "rope_backward");
    cuda::rope_backward(s.dq, s.dq_r, b.positions, b.inv_freq, T, Hq, D, /*accumulate=*/false, ctx);
    cuda::rope_backward(s.dk, s.dk_r, b.positions, b.inv_freq, T, Hkv, D, /*accumulate=*/false, ctx);
  }
  auto qkv_dgrad = [&](int r0, int n) {
    ProfileScope ps(prof, "linear_backward");
    bf16* dh = s.dh + int64_t(r0) * C;
    const bf16* h = a.h1 + int64_t(r0) * C;
    cuda::linear_backward(dh, nullptr, nullptr, s.dq + int64_t(r0) * Q, h, w.q_proj, n, C, Q, false, ctx);
    cuda::linear_backward(dh, nullptr, nullptr, s.dk + int64_t(r0) * K, h, w.k_proj, n, C, K, true, ctx);
    cuda::linear_backward(dh, nullptr, nullptr, s.dv + int64_t(r0) * K, h, w.v_proj, n, C, K, true, ctx);
  };
  auto qkv_wgrad = [&] {
    ProfileScope ps(prof, "linear_backward");
    cuda::linear_backward(nullptr, g.q_proj, g.q_bias, s.dq, a.h1, w.q_proj, T, C, Q, true, ctx);
    cuda::linear_backward(nullptr, g.k_proj, g.k_bias, s.dk, a.h1, w.k_proj, T, C, K, true, ctx);
    cuda::linear_backward(nullptr, g.v_proj, g.v_bias, s.dv, a.h1, w.v_proj, T, C, K, true, ctx);
  };
  if (collectives) {
    collectives->column_parallel_backward(a.h1_local, a.h1, s.dh, s.dh_local, T, C, qkv_dgrad, qkv_wgrad);
  } else {
    qkv_dgrad(0, T);
    qkv_wgrad();
  }
  {
    ProfileScope ps(prof, "rmsnorm_backward");
    cuda::rmsnorm_backward(dres, g.input_layernorm, s.dh_local, a.x_in, w.input_layernorm, a.rstd1, Tl, C, ctx);
  }
}

}  // namespace

void gpu_layer_backward(int layer, const LayerShape& sh, const GpuLayerParams<const bf16>& w,
                        const GpuLayerParams<float>& g, const GpuLayerBatch& b, const GpuLayerActivations& a,
                        const GpuLayerScratch& s, GpuLayerAttention& attention, GpuLayerFeedForward& feed_forward,
                        LayerCollectives<bf16>* collectives, bf16* dres, const cuda::GpuContext& ctx,
                        GpuOpProfiler* prof) {
  const int Tl = collectives ? collectives->local_rows(b.T) : b.T;
  // The feed-forward branch: x_out = x_mid + ffn(h2), h2 = rmsnorm(x_mid). dres is read as d(x_out) by the
  // feed-forward's backward before rmsnorm_backward adds the branch's share of d(x_mid) into it.
  feed_forward.backward(layer, sh, w, g, b, a, s, collectives, dres, ctx, prof);
  {
    ProfileScope ps(prof, "rmsnorm_backward");
    cuda::rmsnorm_backward(dres, g.post_attention_layernorm, s.dh_local, a.x_mid, w.post_attention_layernorm,
                           a.rstd2, Tl, sh.hidden, ctx);
  }
  attention_branch_backward(sh, w, g, b, a, s, attention, collectives, dres, ctx, prof);
}

}  // namespace hone

#endif  // HONE_CUDA
