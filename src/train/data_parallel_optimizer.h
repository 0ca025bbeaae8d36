// What a policy engine needs of its optimizer over backend B, whichever data-parallel form it takes:
//
//   AllReduceAdamW<B>  (train/all_reduce_adamw.h)  plain: gradients all-reduced, every rank holds the whole fp32
//                      master weights and Adam moments; with no communicator it is one rank's AdamW.
//   ShardedAdamW<B>    (train/sharded_adamw.h)     ZeRO-1 (train.distributed_optimizer): gradients
//                      reduce-scattered, master weights and moments sharded over the data-parallel ranks, compute
//                      weights all-gathered.
//
// Weights: B::Act compute weights (what the model reads) and fp32 master weights (what AdamW updates). On the CPU
// the compute weights are fp32: the plain form updates them in place as their own masters, and refit is then
// nothing; on the GPU they are bf16 and refit casts the masters into them. The gradient buffer is the optimizer's:
// fp32 in B's memory, [padded_size] (padding zero), where backward accumulates.
//
// One optimizer step is update() (reduce unless a GradReducer already did, clip by the global norm, AdamW)
// followed by refit() (compute weights from master weights: a cast, plus the all-gather for ZeRO-1). The two are
// apart so that the colocated GPU engine casts once per GRPO step, in its refit phase, unless more optimizer steps
// follow in the same GRPO step. Gradients are summed over the ranks (each rank's loss is already divided by the
// global denominator); with grad_reduce_in_fp32 = false they travel as bf16 (converted, reduced with fp32 sums
// rounded once, converted back). A step whose global norm is not finite (NaN or Inf on any rank) is skipped, as
// Megatron does: weights, moments and the step count stay; every rank sees the same norm, so every rank skips.
//
// Clipping norm under tensor, pipeline or expert parallelism (ShardedNorm, train/grad_clip.h): each rank's
// weighted sum of squares over what it holds, summed over dp and then over the model's group.
//
// Checkpoints hold the dp-independent state (the whole fp32 master weights and moments of this rank's model
// shard), so a checkpoint restores under any number of data-parallel ranks.
#pragma once

#include <cstdint>
#include <vector>

#include "backend/backend.h"
#include "backend/optimizer_ops.h"
#include "comm/comm.h"
#include "model/param_table.h"
#include "model/weights.h"
#include "train/adamw.h"
#include "train/grad_clip.h"
#include "train/zero_layout.h"

namespace hone {

struct OptimizerStepResult {
  double grad_norm = 0;  // global, before clipping
  float clip_coef = 1.f;
  bool skipped = false;  // the norm was not finite: nothing was updated
};

// One rank's shard of a ZeRO-1 optimizer (in-memory saves: same dp size and rank).
struct ShardOptimizerState {
  int dp_size = 1, dp_rank = 0, step = 0;
  int64_t num_params = 0;
  std::vector<float> master, exp_avg, exp_avg_sq;  // [shard_size]
};

struct DataParallelOptions {
  bool grad_reduce_in_fp32 = true;  // train.grad_reduce_in_fp32
  // The buckets gradients reduce in: with a layout, about bucket_bytes of fp32 gradients each, starting at layers in
  // backward's order (so a GradReducer launches them while backward runs); without, one bucket (the experts apart).
  const ParamLayout* layout = nullptr;
  int64_t bucket_bytes = int64_t(25) << 20;
  // Tensor, pipeline or expert parallelism: the model's parameters are this rank's shard; the norm spans the group.
  ShardedNorm norm;
  // Expert parallelism (the plain form): the flat buffer's [expert_begin, num_params) are this rank's experts,
  // whose gradients are summed over the expert-data-parallel group edp (null: a group of one) instead of dp.
  // -1: no experts there.
  int64_t expert_begin = -1;
  Comm* edp = nullptr;
};

template <typename B>
class DataParallelOptimizer {
 public:
  using Act = typename B::Act;
  using Exec = typename B::Exec;
  using Work = CollectiveWork<B>;

  virtual ~DataParallelOptimizer() = default;
  DataParallelOptimizer(const DataParallelOptimizer&) = delete;
  DataParallelOptimizer& operator=(const DataParallelOptimizer&) = delete;

  // Whether gradients travel between ranks at all.
  virtual bool reduces() const = 0;
  int64_t num_params() const { return zl_.num_params(); }
  const ZeroLayout& zero_layout() const { return zl_; }
  const Exec& exec() const { return x_; }

  // The fp32 gradient buffer ([padded_size] in B's memory; padding stays zero). release_grads() frees it between
  // steps (gradients are zero then: generation's KV cache takes the memory); zero_grads() allocates it again when
  // released. grads() is valid only while allocated.
  float* grads() const { return grads_.get(); }
  void zero_grads();  // asynchronous on the Exec's stream
  void release_grads() { grads_ = typename B::template Array<float>(); }

  // What a GradReducer drives: enqueues the reduction of bucket b (index into zero_layout().buckets()) on `on`
  // (an Exec of B: the compute's or a collective queue's); and marks the step's gradients reduced, so that the next
  // update() does not reduce them again.
  virtual Work reduce_bucket(int b, const Exec& on) = 0;
  void mark_reduced() { reduced_ = true; }

  // Collective over dp: reduce (unless done), clip to max_norm (0: off), AdamW with learning rate lr on the master
  // weights this rank keeps. The compute weights are unchanged until refit() (unless they are the masters).
  virtual OptimizerStepResult update(float lr, double max_norm) = 0;
  // Collective over dp: compute weights ([num_params] in B's memory) from the master weights.
  virtual void refit(Act* compute_weights) = 0;
  OptimizerStepResult step(float lr, double max_norm, Act* compute_weights) {
    const OptimizerStepResult r = update(lr, max_norm);
    refit(compute_weights);
    return r;
  }

  int step_count() const { return adamw_.step_count(); }
  void set_step_count(int s) { adamw_.set_step_count(s); }
  // train.optimizer_offload: this rank's Adam moments wait outside B's memory until reload_state() (the policy of
  // backend/optimizer_ops.h). Synchronous.
  void offload_state() { adamw_.offload_state(); }
  void reload_state() { adamw_.reload_state(); }
  bool state_offloaded() const { return adamw_.state_offloaded(); }
  // Bytes of B's memory held now: master weights, gradients (unless released), moments (unless offloaded), staging.
  virtual size_t device_bytes() const = 0;

  // Collective over dp: the whole fp32 master weights and moments ([num_params] host) on rank `root` of dp (every
  // rank with root = -1); elsewhere the pointers may be null and nothing is copied. master may be null (not wanted).
  virtual void read_state(ModelWeights* master, float* exp_avg, float* exp_avg_sq, int root) = 0;
  // Every rank passes the whole state (each keeps its part); the compute weights need a refit() after it.
  virtual void write_state(const ModelWeights& master, const float* exp_avg, const float* exp_avg_sq,
                           int step_count) = 0;

 protected:
  // The AdamW state: segments (of this rank's state and the gradient buffer) over state_size values.
  DataParallelOptimizer(ZeroLayout zl, std::vector<ShardSegment> segments, int64_t state_size, AdamWConfig config,
                        DataParallelOptions options, Exec x);
  // Reduces every bucket now, on the Exec's stream, and waits.
  void reduce_all();
  // The bf16 staging of one bucket (grad_reduce_in_fp32 = false), made on first use (the forms make it when built).
  Bf16<B>* bf16_staging();
  // Sum of squares of g = the gradient buffer at [flat_begin, flat_begin + n): weighted by the model's sharding
  // when it is sharded (g points at flat_begin: what ShardedNorm::weighted_sum_squares takes).
  double sum_squares_at(int64_t flat_begin, int64_t n) const;
  size_t common_bytes() const { return grads_.bytes() + adamw_.bytes() + bf16_.bytes() + scalar_.bytes(); }

  Exec x_;
  DataParallelOptions options_;
  ZeroLayout zl_;
  AdamW<B> adamw_;
  typename B::template Array<float> grads_;
  typename B::template Array<Bf16<B>> bf16_;
  typename B::template Array<double> scalar_;  // a device Comm's sums of one value
  bool reduced_ = false;
};

// Where backward's gradients are final: element k (k = 0 .. L-1) is the start of layer L-1-k, whose hook call
// (TransformerModel::set_backward_layer_hook) means every element at or above it is final (the later layers, the
// final norm and an untied LM head); the last element, 0, goes with the final call (layer -1: the embeddings).
std::vector<int64_t> backward_ready_offsets(const ParamLayout& layout);
// Bucket starts for a model: buckets follow the reverse layer order of backward (see GradReducer).
std::vector<int64_t> model_bucket_starts(const ParamLayout& layout, int dp, int64_t bucket_bytes);
// The ZeRO layout of options over dp ranks (one bucket without a layout; the experts in buckets of their own).
ZeroLayout optimizer_zero_layout(int64_t num_params, int dp, int rank, const DataParallelOptions& options);

// Waits for every work and clears the list.
template <typename W>
void wait_works(std::vector<W>& works) {
  for (W& w : works) w.wait();
  works.clear();
}

}  // namespace hone
