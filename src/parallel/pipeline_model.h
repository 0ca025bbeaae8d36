// This rank's stage of a pipelined model, written once over a backend B: its chunks (parallel/pipeline_layout.h) as
// spans of the one TransformerModel<B> (model/model_span.h) over the stage's shared weights, a pool of models per
// chunk (each holds one micro-batch's activations: 1F1B keeps up to pp - rank of them alive), and the stage's side of
// the executor (parallel/pipeline_executor.h): buffers in the backend's memory for the hidden states and gradients
// that arrive ([T, C] of B::Act), what to send, and the loss's gradients of each micro-batch kept on the last stage
// until its backward. Training runs 1F1B (interleaved with vpp > 1); the loss is computed on the last stage, right
// after each micro-batch's last forward; the logprob pass runs forward-only. The pipeline group's Comm is a host one
// on the CPU and a device one ordered on the engine's stream on a GPU.
//
//   PipelineModel m(config, stage_layout, stage_weights, tp, ps.pp());   // the CPU over host weights
//   m.train(batches, temperature, loss, grads);     // collective over pp (and tp)
//   m.sum_tied_gradients(grads);                     // before the optimizer
#pragma once

#include <functional>
#include <map>
#include <memory>
#include <type_traits>
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

template <typename B>
class PipelineStage {
 public:
  using A = typename B::Act;
  using Model = TransformerModel<B>;
  using TensorParallel = typename Model::TensorParallel;

  // stage: this rank's layout (ShardLayout::of with the pipeline); weights: the stage's compute weights in its
  // layout (shared by every chunk's models; set_weights when they move; they may change between passes); exec:
  // where the ops run; max_tokens: the largest micro-batch (buffers grow for a larger one); tp (null at tp = 1) and
  // pp (the pipeline group's Comm: a device one on a GPU) must outlive this.
  PipelineStage(const ModelConfig& c, const ShardLayout& stage, A* weights, typename B::Exec exec, int max_tokens,
                TensorParallel* tp, Comm& pp);
  // The CPU over host weights of the stage's layout.
  PipelineStage(const ModelConfig& c, const ShardLayout& stage, const ModelWeights& weights, TensorParallel* tp,
                Comm& pp)
    requires std::is_same_v<B, CpuBackend>;
  ~PipelineStage();

  void set_recompute(Recompute r);
  void set_recompute(bool on) { set_recompute(on ? Recompute::full : Recompute::none); }
  void set_weights(A* weights);
  const PipelineLayout& pipeline() const { return stage_.pipeline(); }
  int pp_rank() const { return pp_.rank(); }
  bool last_stage() const { return stage_.holds_head(); }

  // The loss of micro-batch mb on the last stage after its forward: reads head.logprobs() / head.entropy() and
  // returns the gradients in the backend's memory (dentropy may be null), valid until the next call (they are
  // copied).
  struct LossGrads {
    const float* dlogprob = nullptr;
    const float* dentropy = nullptr;
  };
  using Loss = std::function<LossGrads(int mb, const Model& head)>;
  // Called with the model that runs this rank's last backward of the pass, just before it (a GradReducer arms on
  // it: the data-parallel reduction overlaps that backward). May be empty.
  using BeforeLastBackward = std::function<void(Model&)>;
  // One optimizer step's micro-batches forward and backward; gradients accumulate into grads (fp32, this stage's
  // layout). Collective over pp (and tp).
  PipelineRunStats train(const std::vector<const PackedBatch*>& batches, float temperature, const Loss& loss,
                         float* grads, const BeforeLastBackward& before_last_backward = {});
  // The forward-only pass: on the last stage out[mb] gets batch mb's logprobs [T] (host); out is left alone elsewhere.
  PipelineRunStats logprobs(const std::vector<const PackedBatch*>& batches, float temperature,
                            std::vector<std::vector<float>>& out);
  const PipelineSchedule& last_schedule() const { return schedule_; }

  // A tied embedding's two stage copies (first and last stage) on the host: their gradients summed, the same on
  // both. Collective over pp (a no-op on the other stages and without a tied split).
  void sum_tied_gradients(ModelWeights& grads)
    requires std::is_same_v<B, CpuBackend>;

  // Frees every model's arenas and the message buffers (generation takes the memory).
  void release();
  // Bytes held by the models' arenas and the buffers.
  size_t allocated_bytes() const;
  // The activations of the most micro-batches this stage keeps alive under its schedule, each of T tokens.
  size_t activation_bytes_bound(int T) const;

 private:
  class Work;
  using Key = std::pair<int, int>;  // (micro-batch, chunk)
  struct Chunk {
    ModelSpan span;
    std::vector<std::unique_ptr<Model>> pool;
    std::vector<int> free;
  };
  PipelineRunStats run(const std::vector<const PackedBatch*>& batches, bool forward_only, Work& work);

  ModelConfig c_;
  ShardLayout stage_;
  A* weights_;
  typename B::Exec exec_;
  int max_tokens_;
  TensorParallel* tp_;
  Comm& pp_;
  Recompute recompute_ = Recompute::none;
  std::vector<Chunk> chunks_;  // this rank's virtual chunks
  PipelineSchedule schedule_;
  std::vector<typename B::template Array<A>> spare_;      // message buffers of max_tokens x C, reused
  std::vector<typename B::template Array<float>> spare_f_;  // loss gradient buffers of 2 x max_tokens, reused
};

// The engines' names for the two instantiations.
using PipelineModel = PipelineStage<CpuBackend>;
using GpuPipelineModel = PipelineStage<CudaBackend>;

}  // namespace hone
