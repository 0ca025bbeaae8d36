// GradReducer: events from the compute stream gate each bucket's collective on a high-priority communication stream.
#include "train/grad_reducer.h"

#if HONE_CUDA

#include "cuda/check.h"
#include "runtime/error.h"

namespace hone {

GradReducer::GradReducer(GpuGradientBuckets& optimizer, const ParamLayout& layout, const cuda::GpuContext& ctx)
    : opt_(optimizer), ctx_(ctx) {
  const std::vector<int64_t> ready = backward_ready_offsets(layout);
  const size_t L = layout.layers.size();
  layer_start_.resize(L);
  for (size_t l = 0; l < L; ++l) layer_start_[l] = ready[L - 1 - l];
  int least = 0, greatest = 0;
  CUDA_CHECK(cudaDeviceGetStreamPriorityRange(&least, &greatest));
  CUDA_CHECK(cudaStreamCreateWithPriority(&comm_stream_, cudaStreamNonBlocking, greatest));
  events_.resize(L + 2, nullptr);
  for (cudaEvent_t& e : events_) CUDA_CHECK(cudaEventCreateWithFlags(&e, cudaEventDisableTiming));
  // Any bucket list is correct: a bucket launches only once the frontier has passed below its start.
}

GradReducer::~GradReducer() {
  detach();
  for (cudaEvent_t e : events_)
    if (e) cudaEventDestroy(e);
  if (comm_stream_) cudaStreamDestroy(comm_stream_);
}

void GradReducer::attach(GpuTransformer& model) {
  detach();
  model_ = &model;
  model.set_backward_layer_hook([this](int layer) { on_layer_done(layer); });
}

void GradReducer::detach() {
  if (model_) model_->set_backward_layer_hook(nullptr);
  model_ = nullptr;
}

void GradReducer::arm() {
  HONE_CHECK(works_.empty() && next_bucket_ == 0, "arm() while a reduction is in flight: call wait_all() first");
  armed_ = true;
  launched_in_backward_ = 0;
}

void GradReducer::on_layer_done(int layer) {
  if (!armed_) return;
  HONE_CHECK(layer >= -1 && layer < int(layer_start_.size()), "layer ", layer, " outside the model");
  const size_t before = next_bucket_;
  launch_until(layer >= 0 ? layer_start_[size_t(layer)] : 0);
  launched_in_backward_ += int(next_bucket_ - before);
}

void GradReducer::launch_until(int64_t frontier) {
  const std::vector<ZeroBucket>& buckets = opt_.zero_layout().buckets();
  if (next_bucket_ >= buckets.size() || buckets[next_bucket_].offset < frontier) return;
  HONE_CHECK(next_event_ < events_.size(), "more hook calls than layers in one backward");
  cudaEvent_t ev = events_[next_event_++];
  CUDA_CHECK(cudaEventRecord(ev, ctx_.stream));  // the gradients so far are final here
  CUDA_CHECK(cudaStreamWaitEvent(comm_stream_, ev, 0));
  while (next_bucket_ < buckets.size() && buckets[next_bucket_].offset >= frontier) {
    works_.push_back(opt_.reduce_bucket(int(next_bucket_), comm_stream_));
    ++next_bucket_;
  }
}

void GradReducer::wait_all() {
  launch_until(0);
  for (NcclWork& w : works_) w.wait();
  works_.clear();
  // The compute stream continues after the reductions (already complete on the host's watch; this orders them).
  cudaEvent_t ev = events_.back();
  CUDA_CHECK(cudaEventRecord(ev, comm_stream_));
  CUDA_CHECK(cudaStreamWaitEvent(ctx_.stream, ev, 0));
  opt_.mark_reduced();
  armed_ = false;
  next_bucket_ = 0;
  next_event_ = 0;
}

}  // namespace hone

#endif  // HONE_CUDA
