// Ring attention on the CPU: the attention seam of the layer body (model/transformer_layer.h) under context
// parallelism. This rank holds q, k, v of its rows of the current split (parallel/context_parallel.h); the K/V
// blocks travel around the group (rank i sends to i+1 and receives from i-1, MPI send_recv over the cp Comm), and
// each block's partial attention is merged into the running result by its log-sum-exp:
//
//   forward   step 0: the diagonal block, causal (attention_forward on the local rows);
//             step j = 1..C-1: the block of rank r = i - j (mod C), earlier() when r < i, later() when r > i
//             (attention_block_forward), merged into out and lse (attention_merge_forward)
//   backward  the same steps from the merged out and lse (attention_backward, attention_block_backward): dq stays
//             here; the gradients of a visiting block's k and v travel with it, each rank adding its share, and
//             come home after the last step
//
// Per ring step each rank sends and receives one K/V block: 2 x local T x Hkv x D values (the backward also the
// block's gradients, the same size again). The arithmetic is that of the causal attention over the whole sequence,
// regrouped by key block; the GPU twin (parallel/gpu_ring_attention.h) runs the same steps with cuDNN per block and
// the transfers overlapped with the block's compute.
#pragma once

#include <vector>

#include "backend/cpu_backend.h"
#include "model/transformer_layer.h"
#include "parallel/context_parallel.h"

namespace hone {

class RingAttention final : public LayerAttention<CpuBackend> {
 public:
  // cp (which must outlive this) holds the current split; the layer batch is its local batch.
  explicit RingAttention(ContextParallel& cp) : cp_(cp) {}
  RingAttention(ContextParallel& cp, const CpuBackend::Exec&) : cp_(cp) {}

  // Host bytes of the ring's buffers for T local rows of shape s (as the GPU's twin counts its own).
  static size_t scratch_bytes(const LayerShape& s, int T) {
    const size_t TK = size_t(T) * size_t(s.kv_dim()), TQ = size_t(T) * size_t(s.q_dim());
    return (4 * 2 * TK + TQ + size_t(s.heads) * size_t(T)) * sizeof(float);
  }
  // Frees the ring's buffers (they grow again on the next pass).
  void release() {
    kv_ = {}, kv_next_ = {}, dkv_ = {}, dkv_next_ = {}, block_out_ = {}, block_lse_ = {};
  }

  void forward(int layer, const LayerShape& s, const LayerBatch& b, const LayerActivations<CpuBackend>& a,
               const CpuBackend::Exec& x) override;
  void backward(const LayerShape& s, const LayerBatch& b, const LayerActivations<CpuBackend>& a, const float* dattn,
                float* dq_r, float* dk_r, float* dv, const CpuBackend::Exec& x) override;

 private:
  // The segments of the block that arrives at ring step j (1 <= j < C).
  AttentionSegments segments_at(int step) const;
  // Passes `from` ([n] floats) to the next rank and receives the previous rank's into `to`.
  void pass(const std::vector<float>& from, std::vector<float>& to);

  ContextParallel& cp_;
  std::vector<float> kv_, kv_next_;    // a K/V block: [k (T x K) | v (T x K)]
  std::vector<float> dkv_, dkv_next_;  // the gradients of a visiting block, the same layout
  std::vector<float> block_out_, block_lse_;
};

}  // namespace hone
