// Ring attention on the CPU (see ring_attention.h).
#include "parallel/ring_attention.h"

#include <algorithm>

#include "ops/ops.h"
#include "runtime/error.h"

namespace hone {

AttentionSegments RingAttention::segments_at(int step) const {
  const ContextParallelSplit& sp = cp_.current();
  const int i = cp_.rank(), C = cp_.size();
  const int r = (i - step + C) % C;
  return r < i ? sp.earlier() : sp.later();
}

void RingAttention::pass(const std::vector<float>& from, std::vector<float>& to) {
  const int i = cp_.rank(), C = cp_.size();
  to.resize(from.size());
  cp_.comm().send_recv(from.data(), int64_t(from.size()), (i + 1) % C, to.data(), int64_t(to.size()), (i - 1 + C) % C);
}

void RingAttention::forward(int, const LayerShape& s, const LayerBatch& b, const LayerActivations<CpuBackend>& a,
                            const CpuBackend::Exec&) {
  const int T = b.T, Hq = s.heads, Hkv = s.kv_heads, D = s.head_dim, C = cp_.size();
  const int64_t TK = int64_t(T) * s.kv_dim();
  HONE_CHECK(T == cp_.current().local_tokens(), "ring attention: the layer batch (", T,
             " rows) is not the current context-parallel split (", cp_.current().local_tokens(), ")");
  cpu::attention_forward(a.attn, a.lse, a.q_r, a.k_r, a.v, b.cu_seqlens, b.S, T, Hq, Hkv, D, s.attention_scale());
  if (C == 1) return;
  kv_.resize(size_t(2 * TK));
  std::copy_n(a.k_r, TK, kv_.begin());
  std::copy_n(a.v, TK, kv_.begin() + TK);
  block_out_.resize(size_t(T) * size_t(s.q_dim()));
  block_lse_.resize(size_t(Hq) * size_t(T));
  for (int j = 1; j < C; ++j) {
    pass(kv_, kv_next_);
    std::swap(kv_, kv_next_);
    const AttentionSegments seg = segments_at(j);
    cpu::attention_block_forward(block_out_.data(), block_lse_.data(), a.q_r, kv_.data(), kv_.data() + TK, seg, T, T,
                                 Hq, Hkv, D, s.attention_scale());
    cpu::attention_merge_forward(a.attn, a.lse, block_out_.data(), block_lse_.data(), seg, T, Hq, D);
  }
}

void RingAttention::backward(const LayerShape& s, const LayerBatch& b, const LayerActivations<CpuBackend>& a,
                             const float* dattn, float* dq_r, float* dk_r, float* dv, const CpuBackend::Exec&) {
  const int T = b.T, Hq = s.heads, Hkv = s.kv_heads, D = s.head_dim, C = cp_.size();
  const int64_t TK = int64_t(T) * s.kv_dim();
  cpu::attention_backward(dq_r, dk_r, dv, dattn, a.attn, a.lse, a.q_r, a.k_r, a.v, b.cu_seqlens, b.S, T, Hq, Hkv, D,
                          s.attention_scale());
  if (C == 1) return;
  kv_.resize(size_t(2 * TK));
  std::copy_n(a.k_r, TK, kv_.begin());
  std::copy_n(a.v, TK, kv_.begin() + TK);
  for (int j = 1; j < C; ++j) {
    pass(kv_, kv_next_);
    std::swap(kv_, kv_next_);
    // The visiting block's gradients so far: none at the first step, else what the previous rank accumulated (it
    // held this block one step ago).
    if (j == 1) {
      dkv_.assign(size_t(2 * TK), 0.f);
    } else {
      pass(dkv_, dkv_next_);
      std::swap(dkv_, dkv_next_);
    }
    cpu::attention_block_backward(dq_r, dkv_.data(), dkv_.data() + TK, dattn, a.attn, a.lse, a.q_r, kv_.data(),
                                  kv_.data() + TK, segments_at(j), T, T, Hq, Hkv, D, s.attention_scale());
  }
  // After the last step the block here is the next rank's, with every other rank's share: it goes home, and this
  // rank's own block comes back from the previous rank.
  pass(dkv_, dkv_next_);
  for (int64_t n = 0; n < TK; ++n) {
    dk_r[n] += dkv_next_[size_t(n)];
    dv[n] += dkv_next_[size_t(TK + n)];
  }
}

}  // namespace hone
