// The GPU decoder layer body (Llama / Qwen2 / Qwen3), forward and backward, written against cuda/ops_cuda.h in the
// order of model/transformer_layer.cpp. The post-attention residual add and RMSNorm run as one fused op.
#include "model/gpu_transformer_layer.h"

#if HONE_CUDA

#include <cmath>

#include "cuda/check.h"
#include "model/gpu_op_profiler.h"
#include "runtime/error.h"

namespace hone {
namespace {

// Bump allocation of per-token regions (T * per_token elements of `bytes` each), 256-byte aligned; with
// base == nullptr it only counts.
struct ByteCarver {
  char* base;
  int T;
  size_t used = 0;
  template <typename E>
  E* take(int64_t per_token) {
    E* r = base ? reinterpret_cast<E*>(base + used) : nullptr;
    used += (size_t(per_token) * size_t(T) * sizeof(E) + 255) / 256 * 256;
    return r;
  }
};

// Activation gradients accumulate (+=), so every one is zeroed before the op that fills it.
void zero(bf16* p, int64_t n, const cuda::GpuContext& ctx) {
  CUDA_CHECK(cudaMemsetAsync(p, 0, size_t(n) * sizeof(bf16), ctx.stream));
}

}  // namespace

size_t carve_gpu_layer_activations(GpuLayerActivations& a, char* base, const LayerShape& s, int T) {
  const int64_t C = s.hidden, Q = s.q_dim(), K = s.kv_dim(), I = s.intermediate;
  ByteCarver cv{base, T};
  a.rstd1 = cv.take<float>(1);
  a.h1 = cv.take<bf16>(C);
  a.q = cv.take<bf16>(Q);
  a.k = cv.take<bf16>(K);
  a.v = cv.take<bf16>(K);
  if (s.qk_norm) {
    a.q_n = cv.take<bf16>(Q);
    a.k_n = cv.take<bf16>(K);
    a.rstd_q = cv.take<float>(s.heads);
    a.rstd_k = cv.take<float>(s.kv_heads);
  } else {
    a.q_n = a.q;
    a.k_n = a.k;
    a.rstd_q = a.rstd_k = nullptr;
  }
  a.q_r = cv.take<bf16>(Q);
  a.k_r = cv.take<bf16>(K);
  a.attn = cv.take<bf16>(Q);
  a.lse = cv.take<float>(s.heads);
  a.x_mid = cv.take<bf16>(C);
  a.rstd2 = cv.take<float>(1);
  a.h2 = cv.take<bf16>(C);
  a.gate = cv.take<bf16>(I);
  a.up = cv.take<bf16>(I);
  a.act = cv.take<bf16>(I);
  return cv.used;
}

size_t carve_gpu_layer_forward_scratch(GpuLayerScratch& scratch, char* base, const LayerShape& sh, int T) {
  ByteCarver cv{base, T};
  scratch.branch = cv.take<bf16>(sh.hidden);
  return cv.used;
}

size_t carve_gpu_layer_backward_scratch(GpuLayerScratch& s, char* base, const LayerShape& sh, int T) {
  const int64_t C = sh.hidden, Q = sh.q_dim(), K = sh.kv_dim(), I = sh.intermediate;
  ByteCarver cv{base, T};
  s.dh = cv.take<bf16>(C);
  s.dact = cv.take<bf16>(I);
  s.dgate = cv.take<bf16>(I);
  s.dup = cv.take<bf16>(I);
  s.dattn = cv.take<bf16>(Q);
  s.dq_r = cv.take<bf16>(Q);
  s.dq_n = cv.take<bf16>(Q);
  s.dq = cv.take<bf16>(Q);
  s.dk_r = cv.take<bf16>(K);
  s.dk_n = cv.take<bf16>(K);
  s.dk = cv.take<bf16>(K);
  s.dv = cv.take<bf16>(K);
  return cv.used;
}

void GpuPackedAttention::forward(int, const LayerShape& s, const GpuLayerBatch& b, const GpuLayerActivations& a,
                                 const cuda::GpuContext& ctx) {
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
                       LayerCollectives<bf16>* collectives, bf16* x_out, const cuda::GpuContext& ctx,
                       GpuOpProfiler* prof) {
  const int T = b.T, C = sh.hidden, Q = sh.q_dim(), K = sh.kv_dim(), I = sh.intermediate;
  const int Hq = sh.heads, Hkv = sh.kv_heads, D = sh.head_dim;
  const float eps = sh.eps;
  HONE_CHECK(!collectives || !collectives->sequence_parallel_for(T),
             "the GPU layer body computes whole token rows: no sequence parallelism");
  {
    ProfileScope ps(prof, "rmsnorm");
    cuda::rmsnorm_forward(a.h1, a.rstd1, a.x_in, w.input_layernorm, T, C, eps, ctx);
  }
  {
    ProfileScope ps(prof, "linear");
    cuda::linear_forward(a.q, a.h1, w.q_proj, w.q_bias, T, C, Q, ctx);
    cuda::linear_forward(a.k, a.h1, w.k_proj, w.k_bias, T, C, K, ctx);
    cuda::linear_forward(a.v, a.h1, w.v_proj, w.v_bias, T, C, K, ctx);
  }
  if (sh.qk_norm) {
    ProfileScope ps(prof, "rmsnorm");
    cuda::rmsnorm_forward(a.q_n, a.rstd_q, a.q, w.q_norm, T * Hq, D, eps, ctx);
    cuda::rmsnorm_forward(a.k_n, a.rstd_k, a.k, w.k_norm, T * Hkv, D, eps, ctx);
  }
  {
    ProfileScope ps(prof, "rope");
    cuda::rope_forward(a.q_r, a.q_n, b.positions, b.inv_freq, T, Hq, D, ctx);
    cuda::rope_forward(a.k_r, a.k_n, b.positions, b.inv_freq, T, Hkv, D, ctx);
  }
  {
    ProfileScope ps(prof, "attention");
    attention.forward(layer, sh, b, a, ctx);
  }
  {
    ProfileScope ps(prof, "linear");
    cuda::linear_forward(s.branch, a.attn, w.o_proj, nullptr, T, Q, C, ctx);
  }
  if (collectives) collectives->reduce_row_parallel_output(s.branch, s.branch, int64_t(T) * C);
  {
    ProfileScope ps(prof, "add_rmsnorm");
    cuda::add_rmsnorm_forward(a.x_mid, a.h2, a.rstd2, s.branch, a.x_in, w.post_attention_layernorm, T, C, eps, ctx);
  }
  {
    ProfileScope ps(prof, "linear");
    cuda::linear_forward(a.gate, a.h2, w.gate_proj, nullptr, T, C, I, ctx);
    cuda::linear_forward(a.up, a.h2, w.up_proj, nullptr, T, C, I, ctx);
  }
  {
    ProfileScope ps(prof, "swiglu");
    cuda::swiglu_forward(a.act, a.gate, a.up, int64_t(T) * I, ctx);
  }
  {
    ProfileScope ps(prof, "linear");
    cuda::linear_forward(s.branch, a.act, w.down_proj, nullptr, T, I, C, ctx);
  }
  if (collectives) collectives->reduce_row_parallel_output(s.branch, s.branch, int64_t(T) * C);
  {
    ProfileScope ps(prof, "add");
    cuda::add_forward(x_out, s.branch, a.x_mid, int64_t(T) * C, ctx);
  }
}

namespace {

// The feed-forward branch of the backward: x_out = x_mid + down(swiglu(gate(h2), up(h2))), h2 = rmsnorm(x_mid).
void mlp_branch_backward(const LayerShape& sh, const GpuLayerParams<const bf16>& w, const GpuLayerParams<float>& g,
                         const GpuLayerBatch& b, const GpuLayerActivations& a, const GpuLayerScratch& s,
                         LayerCollectives<bf16>* collectives, bf16* dres, const cuda::GpuContext& ctx,
                         GpuOpProfiler* prof) {
  const int T = b.T, C = sh.hidden, I = sh.intermediate;
  const int64_t TC = int64_t(T) * C, TI = int64_t(T) * I;
  // dres is read as d(x_out) by the down projection before rmsnorm_backward adds the branch's share of d(x_mid)
  // into it.
  {
    ProfileScope ps(prof, "memset");
    zero(s.dact, TI, ctx);
    zero(s.dgate, TI, ctx);
    zero(s.dup, TI, ctx);
    zero(s.dh, TC, ctx);
  }
  {
    ProfileScope ps(prof, "linear_backward");
    cuda::linear_backward(s.dact, g.down_proj, nullptr, dres, a.act, w.down_proj, T, I, C, ctx);
  }
  {
    ProfileScope ps(prof, "swiglu_backward");
    cuda::swiglu_backward(s.dgate, s.dup, s.dact, a.gate, a.up, TI, ctx);
  }
  {
    ProfileScope ps(prof, "linear_backward");
    cuda::linear_backward(s.dh, g.gate_proj, nullptr, s.dgate, a.h2, w.gate_proj, T, C, I, ctx);
    cuda::linear_backward(s.dh, g.up_proj, nullptr, s.dup, a.h2, w.up_proj, T, C, I, ctx);
  }
  if (collectives) collectives->reduce_column_parallel_input_grad(s.dh, s.dh, TC);
  {
    ProfileScope ps(prof, "rmsnorm_backward");
    cuda::rmsnorm_backward(dres, g.post_attention_layernorm, s.dh, a.x_mid, w.post_attention_layernorm, a.rstd2, T,
                           C, ctx);
  }

}

// The attention branch: x_mid = x_in + o_proj(attention(rope(norm(q)), rope(norm(k)), v)).
void attention_branch_backward(const LayerShape& sh, const GpuLayerParams<const bf16>& w, const GpuLayerParams<float>& g,
                               const GpuLayerBatch& b, const GpuLayerActivations& a, const GpuLayerScratch& s,
                               GpuLayerAttention& attention, LayerCollectives<bf16>* collectives, bf16* dres,
                               const cuda::GpuContext& ctx, GpuOpProfiler* prof) {
  const int T = b.T, C = sh.hidden, Q = sh.q_dim(), K = sh.kv_dim();
  const int Hq = sh.heads, Hkv = sh.kv_heads, D = sh.head_dim;
  const int64_t TC = int64_t(T) * C, TQ = int64_t(T) * Q, TK = int64_t(T) * K;
  {
    ProfileScope ps(prof, "memset");
    zero(s.dattn, TQ, ctx);
    zero(s.dq_r, TQ, ctx);
    zero(s.dk_r, TK, ctx);
    zero(s.dv, TK, ctx);
    zero(s.dq, TQ, ctx);
    zero(s.dk, TK, ctx);
    if (sh.qk_norm) {
      zero(s.dq_n, TQ, ctx);
      zero(s.dk_n, TK, ctx);
    }
    zero(s.dh, TC, ctx);
  }
  {
    ProfileScope ps(prof, "linear_backward");
    cuda::linear_backward(s.dattn, g.o_proj, nullptr, dres, a.attn, w.o_proj, T, Q, C, ctx);
  }
  {
    ProfileScope ps(prof, "attention_backward");
    attention.backward(sh, b, a, s.dattn, s.dq_r, s.dk_r, s.dv, ctx);
  }
  if (sh.qk_norm) {
    {
      ProfileScope ps(prof, "rope_backward");
      cuda::rope_backward(s.dq_n, s.dq_r, b.positions, b.inv_freq, T, Hq, D, ctx);
      cuda::rope_backward(s.dk_n, s.dk_r, b.positions, b.inv_freq, T, Hkv, D, ctx);
    }
    ProfileScope ps(prof, "rmsnorm_backward");
    cuda::rmsnorm_backward(s.dq, g.q_norm, s.dq_n, a.q, w.q_norm, a.rstd_q, T * Hq, D, ctx);
    cuda::rmsnorm_backward(s.dk, g.k_norm, s.dk_n, a.k, w.k_norm, a.rstd_k, T * Hkv, D, ctx);
  } else {
    ProfileScope ps(prof, "rope_backward");
    cuda::rope_backward(s.dq, s.dq_r, b.positions, b.inv_freq, T, Hq, D, ctx);
    cuda::rope_backward(s.dk, s.dk_r, b.positions, b.inv_freq, T, Hkv, D, ctx);
  }
  {
    ProfileScope ps(prof, "linear_backward");
    cuda::linear_backward(s.dh, g.q_proj, g.q_bias, s.dq, a.h1, w.q_proj, T, C, Q, ctx);
    cuda::linear_backward(s.dh, g.k_proj, g.k_bias, s.dk, a.h1, w.k_proj, T, C, K, ctx);
    cuda::linear_backward(s.dh, g.v_proj, g.v_bias, s.dv, a.h1, w.v_proj, T, C, K, ctx);
  }
  if (collectives) collectives->reduce_column_parallel_input_grad(s.dh, s.dh, TC);
  {
    ProfileScope ps(prof, "rmsnorm_backward");
    cuda::rmsnorm_backward(dres, g.input_layernorm, s.dh, a.x_in, w.input_layernorm, a.rstd1, T, C, ctx);
  }
}

}  // namespace

void gpu_layer_backward(const LayerShape& sh, const GpuLayerParams<const bf16>& w, const GpuLayerParams<float>& g,
                        const GpuLayerBatch& b, const GpuLayerActivations& a, const GpuLayerScratch& s,
                        GpuLayerAttention& attention, LayerCollectives<bf16>* collectives, bf16* dres,
                        const cuda::GpuContext& ctx, GpuOpProfiler* prof) {
  mlp_branch_backward(sh, w, g, b, a, s, collectives, dres, ctx, prof);
  attention_branch_backward(sh, w, g, b, a, s, attention, collectives, dres, ctx, prof);
}

}  // namespace hone

#endif  // HONE_CUDA
