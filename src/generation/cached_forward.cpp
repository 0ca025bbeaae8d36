// The cached transformer forward of generation (what it computes: cached_forward.h).
#include "generation/cached_forward.h"

#include <algorithm>
#include <cmath>

#include "ops/ops.h"
#include "runtime/error.h"

namespace hone {

namespace {

const float* opt(const Tensor& t, bool present) { return present ? t.f32() : nullptr; }

template <typename T>
void grow(std::vector<T>& v, int64_t n) {
  if (v.size() < size_t(n)) v.resize(size_t(n));
}

}  // namespace

CachedForward::CachedForward(const ModelConfig& config) : c_(config) {
  HONE_CHECK(c_.vocab_size > 0 && c_.hidden_size > 0 && c_.num_hidden_layers >= 0 && c_.num_attention_heads > 0 &&
                 c_.num_key_value_heads > 0 && c_.head_dim > 0 && c_.intermediate_size > 0,
             "generation needs a complete model shape");
  HONE_CHECK(c_.num_attention_heads % c_.num_key_value_heads == 0, "attention heads ", c_.num_attention_heads,
             " not a multiple of kv heads ", c_.num_key_value_heads);
  RopeParams rope = c_.rope;
  if (rope.head_dim == 0) rope.head_dim = c_.head_dim;
  HONE_CHECK(rope.head_dim == c_.head_dim, "rope.head_dim ", rope.head_dim, " != head_dim ", c_.head_dim);
  inv_freq_.resize(size_t(c_.head_dim / 2));
  cpu::rope_inv_freq(inv_freq_.data(), rope);
  scale_ = 1.0f / std::sqrt(float(c_.head_dim));
}

void CachedForward::reserve(int R) {
  if (R <= capacity_) return;
  const int64_t C = c_.hidden_size, Q = c_.q_dim(), KV = c_.kv_dim(), I = c_.intermediate_size;
  grow(pos_, R);
  grow(row_slot_, R);
  grow(lens_, R);
  grow(rows_, R);
  grow(x_, R * C);
  grow(xn_, R * C);
  grow(rstd_, R);
  grow(q_, R * Q);
  grow(k_, R * KV);
  grow(v_, R * KV);
  grow(qn_, R * Q);
  grow(kn_, R * KV);
  grow(head_rstd_, int64_t(R) * c_.num_attention_heads);
  grow(att_, R * Q);
  grow(lse_, int64_t(R) * c_.num_attention_heads);
  grow(proj_, R * C);
  grow(gate_, R * I);
  grow(up_, R * I);
  grow(act_, R * I);
  capacity_ = R;
}

void CachedForward::layers(const ModelWeights& w, KvCache& cache, Mode mode, const int32_t* tokens, int R,
                           const int32_t* cu_seqlens, int num_seqs, const int32_t* decode_slots) {
  const int C = c_.hidden_size, Hq = c_.num_attention_heads, Hkv = c_.num_key_value_heads, D = c_.head_dim;
  const int Q = c_.q_dim(), KV = c_.kv_dim(), I = c_.intermediate_size;
  const float eps = c_.rms_norm_eps;
  HONE_CHECK(int(w.layers.size()) == c_.num_hidden_layers, "weights have ", w.layers.size(), " layers, config ",
             c_.num_hidden_layers);
  HONE_CHECK(cache.num_layers() == c_.num_hidden_layers && cache.row_size() == KV, "KV cache shaped for another model");

  cpu::embedding_forward(x_.data(), tokens, w.embed_tokens.f32(), R, C);
  for (int l = 0; l < c_.num_hidden_layers; ++l) {
    const LayerWeights& lw = w.layers[size_t(l)];
    cpu::rmsnorm_forward(xn_.data(), rstd_.data(), x_.data(), lw.input_layernorm.f32(), R, C, eps);
    cpu::linear_forward(q_.data(), xn_.data(), lw.q_proj.f32(), opt(lw.q_bias, c_.attention_bias), R, C, Q);
    cpu::linear_forward(k_.data(), xn_.data(), lw.k_proj.f32(), opt(lw.k_bias, c_.attention_bias), R, C, KV);
    cpu::linear_forward(v_.data(), xn_.data(), lw.v_proj.f32(), opt(lw.v_bias, c_.attention_bias), R, C, KV);
    float* qr = q_.data();
    float* kr = k_.data();
    if (c_.qk_norm) {
      cpu::rmsnorm_forward(qn_.data(), head_rstd_.data(), q_.data(), lw.q_norm.f32(), R * Hq, D, eps);
      cpu::rmsnorm_forward(kn_.data(), head_rstd_.data(), k_.data(), lw.k_norm.f32(), R * Hkv, D, eps);
      qr = qn_.data();
      kr = kn_.data();
    }
    cpu::rope_forward(qr, qr, pos_.data(), inv_freq_.data(), R, Hq, D);
    cpu::rope_forward(kr, kr, pos_.data(), inv_freq_.data(), R, Hkv, D);
    for (int r = 0; r < R; ++r) {
      std::copy_n(kr + int64_t(r) * KV, KV, cache.k_row(l, row_slot_[size_t(r)], pos_[size_t(r)]));
      std::copy_n(v_.data() + int64_t(r) * KV, KV, cache.v_row(l, row_slot_[size_t(r)], pos_[size_t(r)]));
    }
    if (mode == Mode::prefill) {
      cpu::attention_forward(att_.data(), lse_.data(), qr, kr, v_.data(), cu_seqlens, num_seqs, R, Hq, Hkv, D,
                             scale_);
    } else {
      cpu::attention_decode_forward(att_.data(), qr, cache.k(l), cache.v(l), decode_slots, lens_.data(), R,
                                    cache.max_len(), Hq, Hkv, D, scale_);
    }
    cpu::linear_forward(proj_.data(), att_.data(), lw.o_proj.f32(), nullptr, R, Q, C);
    cpu::add_forward(x_.data(), x_.data(), proj_.data(), int64_t(R) * C);
    cpu::rmsnorm_forward(xn_.data(), rstd_.data(), x_.data(), lw.post_attention_layernorm.f32(), R, C, eps);
    cpu::linear_forward(gate_.data(), xn_.data(), lw.gate_proj.f32(), nullptr, R, C, I);
    cpu::linear_forward(up_.data(), xn_.data(), lw.up_proj.f32(), nullptr, R, C, I);
    cpu::swiglu_forward(act_.data(), gate_.data(), up_.data(), int64_t(R) * I);
    cpu::linear_forward(proj_.data(), act_.data(), lw.down_proj.f32(), nullptr, R, I, C);
    cpu::add_forward(x_.data(), x_.data(), proj_.data(), int64_t(R) * C);
  }
}

void CachedForward::head(const ModelWeights& w, const int32_t* rows, int n, float* logits) {
  const int C = c_.hidden_size;
  // Gather the rows that need logits (the final norm is per row, so norming only them changes nothing).
  for (int i = 0; i < n; ++i) std::copy_n(x_.data() + int64_t(rows[i]) * C, C, proj_.data() + int64_t(i) * C);
  cpu::rmsnorm_forward(xn_.data(), rstd_.data(), proj_.data(), w.norm.f32(), n, C, c_.rms_norm_eps);
  const Tensor& lm_head = c_.tie_word_embeddings ? w.embed_tokens : w.lm_head;
  cpu::lm_head_logits(logits, xn_.data(), lm_head.f32(), n, C, c_.vocab_size);
}

void CachedForward::prefill(const ModelWeights& w, KvCache& cache, const int32_t* tokens, const int32_t* cu_seqlens,
                            const int32_t* slots, int num_seqs, float* logits) {
  HONE_CHECK(num_seqs > 0 && cu_seqlens[0] == 0, "prefill needs sequences packed from row 0");
  const int R = cu_seqlens[num_seqs];
  reserve(R);
  for (int s = 0; s < num_seqs; ++s) {
    const int b = cu_seqlens[s], e = cu_seqlens[s + 1];
    HONE_CHECK(e > b, "prefill of an empty prompt (sequence ", s, ")");
    HONE_CHECK(e - b <= cache.max_len() && slots[s] >= 0 && slots[s] < cache.num_slots(), "prompt ", s, " of ",
               e - b, " tokens does not fit slot ", slots[s], " of the KV cache");
    for (int r = b; r < e; ++r) {
      pos_[size_t(r)] = r - b;
      row_slot_[size_t(r)] = slots[s];
    }
    rows_[size_t(s)] = e - 1;
  }
  layers(w, cache, Mode::prefill, tokens, R, cu_seqlens, num_seqs, nullptr);
  head(w, rows_.data(), num_seqs, logits);
}

void CachedForward::decode(const ModelWeights& w, KvCache& cache, const int32_t* tokens, const int32_t* positions,
                           const int32_t* slots, int B, float* logits) {
  if (B == 0) return;
  reserve(B);
  for (int b = 0; b < B; ++b) {
    HONE_CHECK(positions[b] >= 0 && positions[b] < cache.max_len() && slots[b] >= 0 && slots[b] < cache.num_slots(),
               "decode position ", positions[b], " of slot ", slots[b], " outside the KV cache");
    pos_[size_t(b)] = positions[b];
    row_slot_[size_t(b)] = slots[b];
    lens_[size_t(b)] = positions[b] + 1;
    rows_[size_t(b)] = b;
  }
  layers(w, cache, Mode::decode, tokens, B, nullptr, 0, slots);
  head(w, rows_.data(), B, logits);
}

}  // namespace hone
