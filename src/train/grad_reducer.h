// GradReducer<B>: data-parallel gradient reduction overlapped with backward. The optimizer's buckets (about 25 MB
// each, train/zero_layout.h) follow the reverse layer order; the model calls the reducer after each layer's
// parameter gradients are final (TransformerModel::set_backward_layer_hook); the reducer then orders its collective
// queue after the compute queued so far and launches the all-reduce (plain data parallelism) or reduce-scatter
// (ZeRO-1) of every bucket that became complete. wait_all() launches whatever is left, waits for every bucket and
// tells the optimizer its gradients are reduced. The queue is the backend's (backend/optimizer_ops.h): on the GPU a
// high-priority stream beside the compute stream, under the NCCL watchdog; on the CPU the compute itself (the
// buckets then reduce as backward reaches them, with nothing to overlap).
//
// ONLY ON THE LAST MICRO-BATCH of an optimizer step: arm() before that micro-batch's backward. Earlier
// micro-batches accumulate into the same gradient buffer locally; reducing them too would sum them more than once.
//
//   reducer.attach(model);
//   for (mb ...) { model.forward(mb); if (last) reducer.arm(); model.backward(d, nullptr, opt.grads()); }
//   reducer.wait_all();
//   opt.step(lr, max_norm, model.weights());
#pragma once

#include <cstdint>
#include <vector>

#include "backend/optimizer_ops.h"
#include "model/param_table.h"
#include "train/data_parallel_optimizer.h"

namespace hone {

template <typename B>
class TransformerModel;

template <typename B>
class GradReducer {
 public:
  // The optimizer's buckets should be made for this layout (DataParallelOptions::layout) so that they launch early;
  // any bucket list is correct (a bucket launches once backward has finished all of it). compute: the Exec the model
  // runs on.
  GradReducer(DataParallelOptimizer<B>& optimizer, const ParamLayout& layout, const typename B::Exec& compute);
  ~GradReducer();
  GradReducer(const GradReducer&) = delete;
  GradReducer& operator=(const GradReducer&) = delete;

  // Installs the layer hook on model (replacing any other hook); detach() removes it.
  void attach(TransformerModel<B>& model);
  void detach();

  // The next backward is the last micro-batch of the optimizer step: reduce while it runs.
  void arm();
  bool armed() const { return armed_; }
  // Launches the buckets not yet launched, waits for all, and marks the optimizer's gradients reduced. Call after
  // the armed backward (and before the optimizer step). Without arm() it reduces everything now.
  void wait_all();

  int buckets_launched_during_backward() const { return launched_in_backward_; }

 private:
  void on_layer_done(int layer);
  void launch_until(int64_t frontier);  // launches every bucket with offset >= frontier

  DataParallelOptimizer<B>& opt_;
  CollectiveQueue<B> queue_;
  std::vector<int64_t> layer_start_;  // per layer
  TransformerModel<B>* model_ = nullptr;
  size_t next_bucket_ = 0;
  std::vector<CollectiveWork<B>> works_;
  bool armed_ = false;
  int launched_in_backward_ = 0;
};

}  // namespace hone
