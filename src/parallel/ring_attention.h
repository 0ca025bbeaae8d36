// Ring attention: the attention seam of the layer body (model/transformer_layer.h) under context parallelism,
// written once over a backend B. This rank holds q, k, v of its rows of the current split
// (parallel/context_parallel.h); the K/V blocks travel around the group (rank i sends to i+1 and receives from
// i-1, send_recv over the cp Comm), and each block's partial attention is merged into the running result by its
// log-sum-exp:
//
//   forward   step 0: the diagonal block, causal (B::attention_forward on the local rows);
//             step j = 1..C-1: the block of rank r = i - j (mod C), earlier() when r < i, later() when r > i
//             (B::attention_block_forward), merged into an fp32 running output and lse (B::attention_merge_forward)
//             that is rounded to the activations' type once at the end
//   backward  the same steps from the merged out and lse (B::attention_backward, B::attention_block_backward): dq
//             stays here; the gradients of a visiting block's k and v travel with it in fp32, each rank adding its
//             share, and come home after the last step
//
// The arithmetic is that of the causal attention over the whole sequence, regrouped by key block. Where the
// activations are fp32 (the CPU) the running output is the attention output itself and a block's K/V gradients
// accumulate straight into the traveling ones; in bf16 (the GPU: cuDNN per block) they go through an fp32 running
// output and a bf16 share added once it has arrived.
//
// Overlap: the transfers are the backend's B::OverlappedTransfers. Over NCCL they run on a stream of their own (K/V
// block j+1 while block j is computed; in the backward also the gradients of block j-1), ordered with the compute
// by events: the compute waits only where it reads what arrived. On the CPU (MPI), and over a GPU test's pair of
// ranks, each transfer runs when posted. Per ring step a rank sends and receives 2 x local T x Hkv x D values in
// the activations' type (the backward adds the same count in fp32).
#pragma once

#include <cstddef>
#include <type_traits>

#include "backend/backend.h"
#include "comm/comm.h"
#include "model/transformer_layer.h"
#include "parallel/context_parallel.h"

namespace hone {

template <typename B>
class RingAttention final : public LayerAttention<B> {
 public:
  using A = typename B::Act;
  using Exec = typename B::Exec;

  // cp (which must outlive this) holds the current split; exec is the engine's (its stream runs the compute, after
  // which the transfers are ordered).
  explicit RingAttention(ContextParallelGroup<B>& cp, Exec exec = {});
  ~RingAttention() override;
  RingAttention(const RingAttention&) = delete;
  RingAttention& operator=(const RingAttention&) = delete;

  void forward(int layer, const LayerShape& s, const LayerBatch& b, const LayerActivations<B>& a,
               const Exec& x) override;
  void backward(const LayerShape& s, const LayerBatch& b, const LayerActivations<B>& a, const A* dattn, A* dq_r,
                A* dk_r, A* dv, const Exec& x) override;

  // Bytes of the ring's buffers in the backend's memory for T local rows of shape s (the memory planners count
  // them).
  static size_t scratch_bytes(const LayerShape& s, int T);
  // Waits for every transfer still in flight; frees nothing.
  void drain();
  // Waits for the transfers and frees the buffers (generation takes the memory); the next call allocates them again.
  void release();

 private:
  template <typename T>
  using Array = typename B::template Array<T>;
  // fp32 activations: the running output and the traveling K/V gradients need no buffers of their own.
  static constexpr bool kF32Acts = std::is_same_v<A, float>;
  static constexpr CommType kActType = kF32Acts ? CommType::f32 : CommType::bf16;

  // Sends n values of `send` to the next rank and receives the previous rank's n into `recv`, after the compute
  // queued so far; returns the ticket for arrived().
  int pass(const void* send, void* recv, int64_t n, CommType type);
  void arrived(int ticket) { transfers_.arrived(ticket); }
  void ensure_buffers(const LayerShape& s, int T);
  // The segments of the block that arrives at ring step j (1 <= j < C).
  AttentionSegments segments_at(int step) const;

  ContextParallelGroup<B>& cp_;
  const Exec exec_;
  typename B::OverlappedTransfers transfers_;
  Array<A> kv_[2];             // K/V blocks [k (T x K) | v (T x K)]
  Array<float> out_acc_;       // [T, Q] fp32 running output (not with fp32 activations)
  Array<A> block_out_;         // [T, Q]
  Array<float> block_lse_;     // [Hq, T]
  Array<float> dkv_acc_[2];    // traveling K/V gradients, fp32 [2 T K]
  Array<A> dkv_block_;         // this step's share [2 T K] (not with fp32 activations)
};

}  // namespace hone
