// This rank's stage of a pipelined model on the CPU engine: its chunks (parallel/pipeline_layout.h) as spans of the
// same Transformer (model/model_span.h) over the stage's weights, a pool of Transformers per chunk (each holds one
// micro-batch's activations: 1F1B keeps up to pp - rank of them alive), and the stage's side of the executor
// (parallel/pipeline_executor.h): buffers for the hidden states and gradients that arrive, and what to send.
// Training runs 1F1B (interleaved with vpp > 1); the loss is computed on the last stage, right after each
// micro-batch's last forward; the logprob pass runs forward-only. Tied embeddings split over the first and last
// stage have their gradients summed over the two here.
//
//   PipelineModel m(config, stage_layout, stage_weights, tp, ps.pp());
//   m.train(batches, temperature, loss, grads);     // collective over pp (and tp)
//   m.sum_tied_gradients(grads);                     // before the optimizer
#pragma once

#include <functional>
#include <map>
#include <memory>
#include <utility>
#include <vector>

#include "comm/comm.h"
#include "model/model_config.h"
#include "model/packed_batch.h"
#include "model/transformer.h"
#include "model/weights.h"
#include "parallel/pipeline_executor.h"
#include "parallel/pipeline_schedule.h"
#include "parallel/shard_layout.h"

namespace hone {

class TensorParallel;

class PipelineModel {
 public:
  // stage: this rank's layout (ShardLayout::of with the pipeline); weights: this stage's weights in its order (they
  // may change between passes); tp (null at tp = 1) and pp (the pipeline group's host Comm) must outlive this.
  PipelineModel(const ModelConfig& c, const ShardLayout& stage, const ModelWeights& weights, TensorParallel* tp,
                Comm& pp);

  void set_recompute(Recompute r);
  void set_recompute(bool on) { set_recompute(on ? Recompute::full : Recompute::none); }
  const PipelineLayout& pipeline() const { return stage_.pipeline(); }
  int pp_rank() const { return pp_.rank(); }
  bool last_stage() const { return stage_.holds_head(); }

  // The loss of micro-batch mb on the last stage, after its forward: reads head.logprobs() and head.entropy(), and
  // fills dlogprob [T] and dentropy ([T], or left empty: no entropy gradient).
  using Loss = std::function<void(int mb, const Transformer& head, std::vector<float>& dlogprob,
                                  std::vector<float>& dentropy)>;
  // One optimizer step's micro-batches forward and backward (1F1B, interleaved with vpp > 1); the gradients
  // accumulate into grads (this stage's layout). Collective over pp and tp.
  PipelineRunStats train(const std::vector<const PackedBatch*>& batches, float temperature, const Loss& loss,
                         ModelWeights& grads);
  // The forward-only pass: on the last stage out[mb] gets batch mb's logprobs [T]; out is left alone elsewhere.
  PipelineRunStats logprobs(const std::vector<const PackedBatch*>& batches, float temperature,
                            std::vector<std::vector<float>>& out);
  // The schedule of the last pass.
  const PipelineSchedule& last_schedule() const { return schedule_; }

  // A tied embedding's two stage copies (first and last stage): their gradients summed, the same on both.
  // Collective over pp (a no-op on the other stages and without a tied split).
  void sum_tied_gradients(ModelWeights& grads);

  // Activation and backward scratch bytes of every Transformer this stage keeps.
  size_t allocated_bytes() const;

 private:
  class Work;
  using Key = std::pair<int, int>;  // (micro-batch, chunk)
  struct Chunk {
    ModelSpan span;
    std::vector<std::unique_ptr<Transformer>> pool;
    std::vector<int> free;
  };
  PipelineRunStats run(const std::vector<const PackedBatch*>& batches, bool forward_only, Work& work);

  ModelConfig c_;
  ShardLayout stage_;
  const ModelWeights& w_;
  TensorParallel* tp_;
  Comm& pp_;
  Recompute recompute_ = Recompute::none;
  std::vector<Chunk> chunks_;  // this rank's virtual chunks
  PipelineSchedule schedule_;
  std::vector<float> tied_peer_;  // the other stage's tied-embedding gradient
};

}  // namespace hone
