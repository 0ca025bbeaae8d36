// The transformer forward of generation on the CPU: the training forward's layer body (model/transformer_layer.h)
// with the KV cache as its attention seam, writing each token's keys and values to a KvCache so that later tokens
// attend to them without recomputing them.
//   prefill: the prompts of several sequences packed into one forward (causal attention per prompt through
//            attention_forward with cu_seqlens); K and V of every prompt token go to the sequence's cache slot.
//   decode:  one new token per sequence at its position; its K and V are appended to the slot and it attends to
//            the slot's cached tokens through attention_decode_forward.
// Both return the logits (no temperature) of one row per sequence: the last prompt token, or the new token.
// Buffers grow to the largest call and are reused: the decode loop does no heap allocation once warm.
// Under expert parallelism with the experts split (parallel/expert_lockstep.h) every pass votes first, and finish()
// runs idle passes until the group's other ranks are done too.
#pragma once

#include <cstdint>
#include <memory>
#include <vector>

#include "generation/kv_cache.h"
#include "backend/cpu_backend.h"
#include "model/layer_shape.h"
#include "model/model_config.h"
#include "model/transformer_layer.h"
#include "model/weights.h"

namespace hone {

class ExpertLockstep;
struct CpuBackend;
template <typename B>
class ExpertParallelGroup;
using ExpertParallel = ExpertParallelGroup<CpuBackend>;
template <typename B>
class TensorParallelGroup;
using TensorParallel = TensorParallelGroup<CpuBackend>;

class CachedForward {
 public:
  // With tp (which must outlive this object) the weights are this rank's shard: the KV cache holds this rank's KV
  // heads (shape().kv_heads), every call is collective over tp, and every rank gets the whole vocabulary's logits
  // (the slices all-gathered), so that every rank samples the same token.
  // With ep (and its lockstep; both outlive this object) the weights hold this rank's experts (ep->layout()) and the
  // sparse layers exchange rows over the expert-parallel group.
  explicit CachedForward(const ModelConfig& config, TensorParallel* tp = nullptr, ExpertParallel* ep = nullptr,
                         ExpertLockstep* lockstep = nullptr);

  // Prompts packed: tokens[cu_seqlens[num_seqs]], prompt s is tokens[cu_seqlens[s], cu_seqlens[s+1]) at positions
  // 0, 1, ... and is cached in slot slots[s]. logits[num_seqs, V] gets the last prompt token's logits.
  void prefill(const ModelWeights& w, KvCache& cache, const int32_t* tokens, const int32_t* cu_seqlens,
               const int32_t* slots, int num_seqs, float* logits);

  // One token per sequence: tokens[b] at position positions[b] of slot slots[b] (positions [0, positions[b]) are
  // already cached). logits[B, V] gets each new token's logits.
  void decode(const ModelWeights& w, KvCache& cache, const int32_t* tokens, const int32_t* positions,
              const int32_t* slots, int B, float* logits);

  // After this rank's last pass of a generation call: with the experts split, idle passes (no rows of its own, its
  // experts computing the others' rows) until every rank of the group is done. Collective over the group. Returns
  // the idle passes it ran (-1 without a lockstep).
  int64_t finish(const ModelWeights& w);

  // Mixture of experts: the experts each row of the last prefill or decode was routed to, [rows, sparse layers, k]
  // in the call's row order (empty for a dense model).
  const std::vector<int32_t>& routing() const { return routing_; }
  int routing_width() const;  // sparse layers x k

  const ModelConfig& config() const { return c_; }
  const LayerShape& shape() const { return shape_; }  // this rank's heads and slices

 private:
  enum class Mode { prefill, decode };
  // Embedding and every layer over R rows; K and V of row r go to (row_slot[r], pos[r]).
  void layers(const ModelWeights& w, KvCache& cache, Mode mode, const int32_t* tokens, int R,
              const int32_t* cu_seqlens, int num_seqs, const int32_t* decode_slots);
  // Final norm and LM head over the rows listed in `rows` (n of them) of the residual stream.
  void head(const ModelWeights& w, const int32_t* rows, int n, float* logits);
  void reserve(int R);
  void idle_pass(const ModelWeights& w);

  ModelConfig c_;
  TensorParallel* tp_ = nullptr;
  ExpertLockstep* lockstep_ = nullptr;
  LayerShape shape_;
  std::unique_ptr<LayerFeedForward<CpuBackend>> feed_forward_;
  std::vector<float> inv_freq_;
  int capacity_ = 0;  // rows the buffers hold
  // Per-row work buffers: the layer's activations (one layer at a time), the residual stream ping-pong, the head.
  std::vector<int32_t> pos_, row_slot_, lens_, rows_;
  std::vector<float> act_buf_, x_[2], head_x_, head_h_, head_rstd_;
  std::vector<int32_t> routing_;
  LayerActivations<CpuBackend> act_;
  LayerScratch<CpuBackend> scratch_;
};

}  // namespace hone
