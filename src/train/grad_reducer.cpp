// GradReducer<B>: the model's layer hook gates each bucket's collective on the backend's collective queue.
#include "train/grad_reducer.h"

#include "model/transformer.h"
#include "runtime/error.h"

namespace hone {

template <typename B>
GradReducer<B>::GradReducer(DataParallelOptimizer<B>& optimizer, const ParamLayout& layout,
                            const typename B::Exec& compute)
    : opt_(optimizer), queue_(compute) {
  const std::vector<int64_t> ready = backward_ready_offsets(layout);
  const size_t L = layout.layers.size();
  layer_start_.resize(L);
  for (size_t l = 0; l < L; ++l) layer_start_[l] = ready[L - 1 - l];
  // Any bucket list is correct: a bucket launches only once the frontier has passed below its start.
}

template <typename B>
GradReducer<B>::~GradReducer() {
  detach();
}

template <typename B>
void GradReducer<B>::attach(TransformerModel<B>& model) {
  detach();
  model_ = &model;
  model.set_backward_layer_hook([this](int layer) { on_layer_done(layer); });
}

template <typename B>
void GradReducer<B>::detach() {
  if (model_) model_->set_backward_layer_hook(nullptr);
  model_ = nullptr;
}

template <typename B>
void GradReducer<B>::arm() {
  HONE_CHECK(works_.empty() && next_bucket_ == 0, "arm() while a reduction is in flight: call wait_all() first");
  armed_ = true;
  launched_in_backward_ = 0;
}

template <typename B>
void GradReducer<B>::on_layer_done(int layer) {
  if (!armed_) return;
  HONE_CHECK(layer >= -1 && layer < int(layer_start_.size()), "layer ", layer, " outside the model");
  const size_t before = next_bucket_;
  launch_until(layer >= 0 ? layer_start_[size_t(layer)] : 0);
  launched_in_backward_ += int(next_bucket_ - before);
}

template <typename B>
void GradReducer<B>::launch_until(int64_t frontier) {
  const std::vector<ZeroBucket>& buckets = opt_.zero_layout().buckets();
  if (next_bucket_ >= buckets.size() || buckets[next_bucket_].offset < frontier) return;
  queue_.after_compute();  // the gradients so far are final here
  while (next_bucket_ < buckets.size() && buckets[next_bucket_].offset >= frontier) {
    works_.push_back(opt_.reduce_bucket(int(next_bucket_), queue_.exec()));
    ++next_bucket_;
  }
}

template <typename B>
void GradReducer<B>::wait_all() {
  launch_until(0);
  wait_works(works_);
  // The compute continues after the reductions (already complete on the host's watch; this orders them).
  queue_.compute_after();
  opt_.mark_reduced();
  armed_ = false;
  next_bucket_ = 0;
}

#define HONE_INSTANTIATE_GRAD_REDUCER(B) template class GradReducer<B>;
HONE_FOR_EACH_BACKEND(HONE_INSTANTIATE_GRAD_REDUCER)
#undef HONE_INSTANTIATE_GRAD_REDUCER

}  // namespace hone
