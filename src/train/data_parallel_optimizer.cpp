// The data-parallel optimizers' shared pieces: the gradient buffer, the bf16 staging, the (weighted) sums of
// squares, and the bucket layout of a model (reverse layer order).
#include "train/data_parallel_optimizer.h"

#include <algorithm>

#include "runtime/error.h"

namespace hone {

template <typename B>
DataParallelOptimizer<B>::DataParallelOptimizer(ZeroLayout zl, std::vector<ShardSegment> segments,
                                                int64_t state_size, AdamWConfig config, DataParallelOptions options,
                                                Exec x)
    : x_(x),
      options_(std::move(options)),
      zl_(std::move(zl)),
      adamw_(std::move(segments), state_size, config, x),
      scalar_(1, "optimizer scalar") {
  zero_grads();
}

template <typename B>
void DataParallelOptimizer<B>::zero_grads() {
  if (!grads_.get()) grads_ = typename B::template Array<float>(zl_.padded_size(), "gradients");
  B::zero(x_, grads_.get(), grads_.bytes());
}

template <typename B>
void DataParallelOptimizer<B>::reduce_all() {
  std::vector<Work> works;
  for (size_t b = 0; b < zl_.buckets().size(); ++b) works.push_back(reduce_bucket(int(b), x_));
  wait_works(works);
}

template <typename B>
Bf16<B>* DataParallelOptimizer<B>::bf16_staging() {
  if (!bf16_.get()) {
    int64_t largest = 0;
    for (const ZeroBucket& b : zl_.buckets()) largest = std::max(largest, b.size);
    bf16_ = typename B::template Array<Bf16<B>>(largest, "bf16 gradient staging");
  }
  return bf16_.get();
}

template <typename B>
double DataParallelOptimizer<B>::sum_squares_at(int64_t flat_begin, int64_t n) const {
  const float* g = grads_.get() + flat_begin;
  if (n <= 0) return 0;
  return options_.norm.weighted_sum_squares ? options_.norm.weighted_sum_squares(g, flat_begin, n)
                                            : sum_squares(x_, g, n);
}

#define HONE_INSTANTIATE_DP_OPTIMIZER(B) template class DataParallelOptimizer<B>;
HONE_FOR_EACH_BACKEND(HONE_INSTANTIATE_DP_OPTIMIZER)
#undef HONE_INSTANTIATE_DP_OPTIMIZER

std::vector<int64_t> backward_ready_offsets(const ParamLayout& layout) {
  // The experts are stored after every dense parameter and are final only once layer 0's are: until then no
  // suffix of the buffer is.
  const bool experts = layout.num_dense_params < layout.num_params;
  std::vector<int64_t> r;
  // A pipeline stage's layout lacks the other stages' layers: their backward never runs here, so the frontier
  // stays where it was (the end of the buffer above the stage's last layer).
  int64_t frontier = layout.num_params;
  for (int l = int(layout.layers.size()) - 1; l >= 0; --l) {
    const int64_t b = layout.layer_begin(l);
    if (!(experts && l > 0) && b < frontier) frontier = b;
    r.push_back(frontier);
  }
  r.push_back(0);
  return r;
}

namespace {

// The experts' gradients are reduced over another group than the dense ones: no bucket holds both. starts run
// from the buffer's end down.
void split_at_experts(std::vector<int64_t>& starts, int64_t dense, int64_t num_params, int dp) {
  const int64_t padded = (num_params + dp - 1) / dp * dp;
  const int64_t experts = (dense + dp - 1) / dp * dp;
  if (dense < num_params && experts > 0 && experts < padded &&
      std::find(starts.begin(), starts.end(), experts) == starts.end()) {
    auto at = std::find_if(starts.begin(), starts.end(), [&](int64_t s) { return s < experts; });
    starts.insert(at, experts);
  }
}

}  // namespace

std::vector<int64_t> model_bucket_starts(const ParamLayout& layout, int dp, int64_t bucket_bytes) {
  const int64_t padded = (layout.num_params + dp - 1) / dp * dp;
  std::vector<int64_t> starts = zero_bucket_starts(backward_ready_offsets(layout), padded, dp,
                                                   std::max<int64_t>(1, bucket_bytes / int64_t(sizeof(float))));
  split_at_experts(starts, layout.num_dense_params, layout.num_params, dp);
  return starts;
}

ZeroLayout optimizer_zero_layout(int64_t num_params, int dp, int rank, const DataParallelOptions& options) {
  if (options.layout) {
    HONE_CHECK(options.layout->num_params == num_params, "a layout of ", options.layout->num_params,
               " parameters for an optimizer of ", num_params);
    return ZeroLayout(num_params, dp, rank, model_bucket_starts(*options.layout, dp, options.bucket_bytes));
  }
  std::vector<int64_t> starts;
  if (options.expert_begin >= 0) split_at_experts(starts, options.expert_begin, num_params, dp);
  return ZeroLayout(num_params, dp, rank, starts);
}

}  // namespace hone
