// The data-parallel optimizers' shared pieces: bucket layout of a model (reverse layer order) and waiting on works.
#include "train/gpu_data_parallel_optimizer.h"

#if HONE_CUDA

#include <algorithm>
#include <cstdint>

namespace hone {

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

std::vector<int64_t> model_bucket_starts(const ParamLayout& layout, int dp, int64_t bucket_bytes) {
  const int64_t padded = (layout.num_params + dp - 1) / dp * dp;
  std::vector<int64_t> starts = zero_bucket_starts(backward_ready_offsets(layout), padded, dp,
                                                   std::max<int64_t>(1, bucket_bytes / int64_t(sizeof(float))));
  // The experts' gradients are reduced over another group than the dense ones: no bucket holds both.
  const int64_t experts = (layout.num_dense_params + dp - 1) / dp * dp;
  if (layout.num_dense_params < layout.num_params && experts > 0 && experts < padded &&
      std::find(starts.begin(), starts.end(), experts) == starts.end()) {
    auto at = std::find_if(starts.begin(), starts.end(), [&](int64_t s) { return s < experts; });
    starts.insert(at, experts);  // the starts run from the buffer's end down
  }
  return starts;
}

void wait_works(std::vector<NcclWork>& works) {
  for (NcclWork& w : works) w.wait();
  works.clear();
}

}  // namespace hone

#endif  // HONE_CUDA
