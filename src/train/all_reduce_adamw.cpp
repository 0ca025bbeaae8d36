// AllReduceAdamW<B>: bucketed all-reduce of the gradients, then AdamW on the whole buffer.
#include "train/all_reduce_adamw.h"

#include <algorithm>
#include <cmath>

#include "runtime/error.h"

namespace hone {

template <typename B>
AllReduceAdamW<B>::AllReduceAdamW(const ModelWeights& initial, AdamWConfig config, Comm* dp,
                                  DataParallelOptions options, Exec x, Act* weights)
    : DataParallelOptimizer<B>(optimizer_zero_layout(initial.flat.numel(), 1, 0, options),
                               whole_buffer_segments(weight_decay_segments(initial, config.decay_1d_params)),
                               initial.flat.numel(), config, options, x),
      dp_(dp) {
  const int64_t n = initial.flat.numel();
  for (Comm* c : {dp, options.edp})
    HONE_CHECK(!c || c->on_device() == B::kDeviceMemory, "the ", B::kName, " optimizer needs a ",
               B::kDeviceMemory ? "device" : "host", " Comm of its data-parallel group");
  HONE_CHECK(options.expert_begin < 0 || options.expert_begin <= n, "experts at ", options.expert_begin,
             " outside the ", n, " parameters");
  if constexpr (kWeightsAreMasters) {
    master_ = weights;
  } else {
    HONE_CHECK(!weights, "compute weights of ", B::kName, " are not fp32: the masters are a copy of their own");
  }
  if (!master_) {
    own_master_ = typename B::template Array<float>(n, "master weights");
    master_ = own_master_.get();
  }
  if (static_cast<const void*>(master_) != static_cast<const void*>(initial.flat.f32())) {
    B::upload(x, master_, initial.flat.f32(), size_t(n) * sizeof(float));
    B::sync(x);
  }
  if (reduces() && !options.grad_reduce_in_fp32) this->bf16_staging();  // now, not while backward runs
}

template <typename B>
bool AllReduceAdamW<B>::reduces() const {
  return (dp_ && dp_->size() > 1) || (this->options_.edp && this->options_.edp->size() > 1);
}

template <typename B>
typename AllReduceAdamW<B>::Work AllReduceAdamW<B>::reduce_bucket(int bi, const Exec& on) {
  HONE_CHECK(this->grads(), "gradient reduction with the gradient buffer released");
  const ZeroBucket& b = this->zl_.buckets()[size_t(bi)];
  // The experts' buckets go over their expert-data-parallel group (the layout never mixes the two).
  const DataParallelOptions& o = this->options_;
  Comm* group = o.expert_begin >= 0 && b.offset >= o.expert_begin ? o.edp : dp_;
  const int64_t n = std::min(b.size, this->num_params() - b.offset);  // dp = 1 arithmetic: no padding
  if (!group || group->size() == 1 || n <= 0) return {};
  float* g = this->grads() + b.offset;
  if (o.grad_reduce_in_fp32) return all_reduce_sum_async(on, *group, g, g, n, CommType::f32);
  Bf16<B>* h = this->bf16_staging();
  f32_to_bf16(on, h, g, n);
  Work w = all_reduce_sum_async(on, *group, h, h, n, CommType::bf16);
  bf16_to_f32(on, g, h, n);
  completes_here(on, w);
  return w;
}

template <typename B>
OptimizerStepResult AllReduceAdamW<B>::update(float lr, double max_norm) {
  if (reduces() && !this->reduced_) this->reduce_all();
  this->reduced_ = false;
  const int64_t n = this->num_params();
  OptimizerStepResult r;
  r.grad_norm = std::sqrt(this->options_.norm.sum_over_group(this->sum_squares_at(0, n)));
  r.skipped = !std::isfinite(r.grad_norm);
  if (r.skipped) return r;
  r.clip_coef = clip_coefficient(r.grad_norm, max_norm);
  if (r.clip_coef < 1.f) scale_inplace(this->x_, this->grads(), r.clip_coef, n);
  this->adamw_.step(master_, this->grads(), lr);
  return r;
}

template <typename B>
void AllReduceAdamW<B>::refit(Act* compute_weights) {
  refit_cast(this->x_, compute_weights, master_, this->num_params());
}

template <typename B>
void AllReduceAdamW<B>::download_master(ModelWeights& w) const {
  HONE_CHECK(w.flat.numel() == this->num_params(), "weights have ", w.flat.numel(), " parameters, the optimizer ",
             this->num_params());
  if (static_cast<const void*>(w.flat.f32()) == static_cast<const void*>(master_)) return;
  B::download(this->x_, w.flat.f32(), master_, size_t(this->num_params()) * sizeof(float));
  B::sync(this->x_);
}

template <typename B>
void AllReduceAdamW<B>::read_state(ModelWeights* master, float* exp_avg, float* exp_avg_sq, int root) {
  if (root >= 0 && (dp_ ? dp_->rank() : 0) != root) return;
  HONE_CHECK(exp_avg && exp_avg_sq, "read_state needs host buffers for the moments");
  if (master) download_master(*master);
  const bool off = this->state_offloaded();
  if (off) this->reload_state();
  const size_t bytes = size_t(this->num_params()) * sizeof(float);
  B::download(this->x_, exp_avg, this->adamw_.exp_avg(), bytes);
  B::download(this->x_, exp_avg_sq, this->adamw_.exp_avg_sq(), bytes);
  B::sync(this->x_);
  if (off) this->offload_state();
}

template <typename B>
void AllReduceAdamW<B>::write_state(const ModelWeights& master, const float* exp_avg, const float* exp_avg_sq,
                                    int step_count) {
  const int64_t n = this->num_params();
  HONE_CHECK(master.flat.numel() == n, "the optimizer state must cover ", n, " parameters");
  this->reload_state();
  const size_t bytes = size_t(n) * sizeof(float);
  if (static_cast<const void*>(master.flat.f32()) != static_cast<const void*>(master_))
    B::upload(this->x_, master_, master.flat.f32(), bytes);
  B::upload(this->x_, this->adamw_.exp_avg(), exp_avg, bytes);
  B::upload(this->x_, this->adamw_.exp_avg_sq(), exp_avg_sq, bytes);
  B::sync(this->x_);
  this->set_step_count(step_count);
}

#define HONE_INSTANTIATE_ALL_REDUCE_ADAMW(B) template class AllReduceAdamW<B>;
HONE_FOR_EACH_BACKEND(HONE_INSTANTIATE_ALL_REDUCE_ADAMW)
#undef HONE_INSTANTIATE_ALL_REDUCE_ADAMW

}  // namespace hone
