// Ring attention over the backend (see ring_attention.h). Instantiated for every backend (backend/backend.h).
#include "parallel/ring_attention.h"

#include "runtime/error.h"

namespace hone {

template <typename B>
RingAttention<B>::RingAttention(ContextParallelGroup<B>& cp, Exec exec)
    : cp_(cp), exec_(exec), transfers_(B::overlapped_transfers(cp.comm(), exec_)) {}

template <typename B>
RingAttention<B>::~RingAttention() {
  try {
    drain();  // before the buffers the transfers use are freed
  } catch (...) {  // a failed transfer was reported by the watchdog; nothing more to do here
  }
}

template <typename B>
void RingAttention<B>::drain() {
  transfers_.drain();
}

template <typename B>
void RingAttention<B>::release() {
  drain();
  B::sync(exec_);
  transfers_.synchronize();
  for (auto& kv : kv_) kv = Array<A>();
  out_acc_ = Array<float>();
  block_out_ = Array<A>();
  block_lse_ = Array<float>();
  for (auto& d : dkv_acc_) d = Array<float>();
  dkv_block_ = Array<A>();
}

template <typename B>
size_t RingAttention<B>::scratch_bytes(const LayerShape& s, int T) {
  const size_t TK = size_t(T) * size_t(s.kv_dim()), TQ = size_t(T) * size_t(s.q_dim());
  size_t n = 2 * (2 * TK * sizeof(A)) + TQ * sizeof(A) + size_t(s.heads) * T * sizeof(float) +
             2 * (2 * TK * sizeof(float));
  if constexpr (!kF32Acts) n += TQ * sizeof(float) + 2 * TK * sizeof(A);
  return n;
}

template <typename B>
void RingAttention<B>::ensure_buffers(const LayerShape& s, int T) {
  const int64_t TK = int64_t(T) * s.kv_dim(), TQ = int64_t(T) * s.q_dim();
  if (kv_[0].size() >= 2 * TK && (kF32Acts || out_acc_.size() >= TQ) && block_lse_.size() >= int64_t(s.heads) * T)
    return;
  // Growing frees the old buffers, which the streams may still read.
  B::sync(exec_);
  transfers_.synchronize();
  auto grow = [](auto& a, int64_t n, const char* what) {
    using Buf = std::remove_reference_t<decltype(a)>;
    if (a.size() < n) a = Buf(n, what);
  };
  for (auto& kv : kv_) grow(kv, 2 * TK, "ring attention K/V block");
  if constexpr (!kF32Acts) grow(out_acc_, TQ, "ring attention running output");
  grow(block_out_, TQ, "ring attention block output");
  grow(block_lse_, int64_t(s.heads) * T, "ring attention block lse");
  for (auto& d : dkv_acc_) grow(d, 2 * TK, "ring attention K/V gradients");
  if constexpr (!kF32Acts) grow(dkv_block_, 2 * TK, "ring attention block K/V gradients");
}

template <typename B>
AttentionSegments RingAttention<B>::segments_at(int step) const {
  const int i = cp_.rank(), C = cp_.size();
  const int r = (i - step + C) % C;
  return r < i ? cp_.earlier() : cp_.later();
}

template <typename B>
int RingAttention<B>::pass(const void* send, void* recv, int64_t n, CommType type) {
  const int i = cp_.rank(), C = cp_.size();
  return transfers_.send_recv(send, recv, n, (i + 1) % C, (i - 1 + C) % C, type);
}

template <typename B>
void RingAttention<B>::forward(int, const LayerShape& s, const LayerBatch& b, const LayerActivations<B>& a,
                               const Exec& x) {
  const int T = b.T, Hq = s.heads, Hkv = s.kv_heads, D = s.head_dim, C = cp_.size();
  const int64_t TK = int64_t(T) * s.kv_dim(), TQ = int64_t(T) * s.q_dim();
  HONE_CHECK(T == cp_.current().local_tokens(), "ring attention: the layer batch (", T,
             " rows) is not the current context-parallel split (", cp_.current().local_tokens(), ")");
  transfers_.next_call();
  if (C > 1) {  // this rank's block starts around the ring while the diagonal block is computed
    ensure_buffers(s, T);
    B::copy(x, kv_[0].get(), a.k_r, size_t(TK) * sizeof(A));
    B::copy(x, kv_[0].get() + TK, a.v, size_t(TK) * sizeof(A));
  }
  int transfer = C > 1 ? pass(kv_[0].get(), kv_[1].get(), 2 * TK, kActType) : -1;
  B::attention_forward(x, a.attn, a.lse, a.q_r, a.k_r, a.v, b.cu_seqlens, b.S, b.max_seqlen, T, Hq, Hkv, D,
                       s.attention_scale());
  if (C == 1) return;
  float* out;
  if constexpr (kF32Acts) {
    out = a.attn;
  } else {
    out = out_acc_.get();
    B::act_to_f32(x, out, a.attn, TQ);
  }
  for (int j = 1; j < C; ++j) {
    const int arriving = transfer;
    // The next block travels while this one is computed; its buffer held the block of step j-1.
    transfer = j + 1 < C ? pass(kv_[j % 2].get(), kv_[(j + 1) % 2].get(), 2 * TK, kActType) : -1;
    arrived(arriving);
    const A* kv = kv_[j % 2].get();
    const AttentionSegments seg = segments_at(j);
    B::attention_block_forward(x, block_out_.get(), block_lse_.get(), a.q_r, kv, kv + TK, seg, T, T, Hq, Hkv, D,
                               s.attention_scale());
    B::attention_merge_forward(x, out, a.lse, block_out_.get(), block_lse_.get(), seg, T, Hq, D);
  }
  if constexpr (!kF32Acts) B::f32_to_act(x, a.attn, out, TQ);
}

template <typename B>
void RingAttention<B>::backward(const LayerShape& s, const LayerBatch& b, const LayerActivations<B>& a,
                                const A* dattn, A* dq_r, A* dk_r, A* dv, const Exec& x) {
  const int T = b.T, Hq = s.heads, Hkv = s.kv_heads, D = s.head_dim, C = cp_.size();
  const int64_t TK = int64_t(T) * s.kv_dim();
  transfers_.next_call();
  if (C > 1) {
    ensure_buffers(s, T);
    B::copy(x, kv_[0].get(), a.k_r, size_t(TK) * sizeof(A));
    B::copy(x, kv_[0].get() + TK, a.v, size_t(TK) * sizeof(A));
  }
  int transfer = C > 1 ? pass(kv_[0].get(), kv_[1].get(), 2 * TK, kActType) : -1;
  B::attention_backward(x, dq_r, dk_r, dv, dattn, a.attn, a.lse, a.q_r, a.k_r, a.v, b.cu_seqlens, b.S, b.max_seqlen,
                        T, Hq, Hkv, D, s.attention_scale());
  if (C == 1) return;
  for (int j = 1; j < C; ++j) {
    const int arriving = transfer;
    // The gradients of the block this rank held at step j-1 go on to the next rank, and the previous rank's of
    // this step's block come in; then the next K/V block travels. Both run while this step's block is computed.
    const int grads = j >= 2 ? pass(dkv_acc_[(j - 1) % 2].get(), dkv_acc_[j % 2].get(), 2 * TK, CommType::f32) : -1;
    transfer = j + 1 < C ? pass(kv_[j % 2].get(), kv_[(j + 1) % 2].get(), 2 * TK, kActType) : -1;
    arrived(arriving);
    const A* kv = kv_[j % 2].get();
    float* acc = dkv_acc_[j % 2].get();
    if constexpr (kF32Acts) {
      // The block's share accumulates into the gradients that arrived (none at the first step).
      arrived(grads);
      if (j == 1) B::zero(x, acc, size_t(2 * TK) * sizeof(float));
      B::attention_block_backward(x, dq_r, acc, acc + TK, dattn, a.attn, a.lse, a.q_r, kv, kv + TK, segments_at(j),
                                  T, T, Hq, Hkv, D, s.attention_scale());
    } else {
      // The block's share in the activations' type, added in fp32 once the gradients so far have arrived.
      A* dkv = dkv_block_.get();
      B::zero(x, dkv, size_t(2 * TK) * sizeof(A));
      B::attention_block_backward(x, dq_r, dkv, dkv + TK, dattn, a.attn, a.lse, a.q_r, kv, kv + TK, segments_at(j),
                                  T, T, Hq, Hkv, D, s.attention_scale());
      if (j == 1) {
        B::act_to_f32(x, acc, dkv, 2 * TK);
      } else {
        arrived(grads);
        B::accumulate_act_into_f32(x, acc, dkv, 2 * TK);
      }
    }
  }
  // After the last step the gradients here are the next rank's block's, with every other rank's share: they go
  // home, and this rank's own come back from the previous rank.
  const int home = pass(dkv_acc_[(C - 1) % 2].get(), dkv_acc_[C % 2].get(), 2 * TK, CommType::f32);
  arrived(home);
  B::accumulate_f32_into_act(x, dk_r, dkv_acc_[C % 2].get(), TK);
  B::accumulate_f32_into_act(x, dv, dkv_acc_[C % 2].get() + TK, TK);
}

#define HONE_INSTANTIATE_RING_ATTENTION(B) template class RingAttention<B>;
HONE_FOR_EACH_BACKEND(HONE_INSTANTIATE_RING_ATTENTION)
#undef HONE_INSTANTIATE_RING_ATTENTION

}  // namespace hone
