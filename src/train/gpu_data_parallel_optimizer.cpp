// The data-parallel optimizers' shared pieces: bucket layout of a model (reverse layer order) and waiting on works.
#include "train/gpu_data_parallel_optimizer.h"

#if HONE_CUDA

#include <algorithm>
#include <cstdint>

namespace hone {
namespace {

int64_t layer_start(const GpuLayerOffsets& o) {
  int64_t s = INT64_MAX;
  for (int64_t off : {o.input_layernorm, o.q_proj, o.k_proj, o.v_proj, o.q_bias, o.k_bias, o.v_bias, o.q_norm,
                      o.k_norm, o.o_proj, o.post_attention_layernorm, o.gate_proj, o.up_proj, o.down_proj})
    if (off >= 0) s = std::min(s, off);
  return s;
}

}  // namespace

std::vector<int64_t> backward_ready_offsets(const GpuParamLayout& layout) {
  std::vector<int64_t> r;
  for (auto it = layout.layers.rbegin(); it != layout.layers.rend(); ++it) r.push_back(layer_start(*it));
  r.push_back(0);
  return r;
}

std::vector<int64_t> model_bucket_starts(const GpuParamLayout& layout, int dp, int64_t bucket_bytes) {
  const int64_t padded = (layout.num_params + dp - 1) / dp * dp;
  return zero_bucket_starts(backward_ready_offsets(layout), padded, dp,
                            std::max<int64_t>(1, bucket_bytes / int64_t(sizeof(float))));
}

void wait_works(std::vector<NcclWork>& works) {
  for (NcclWork& w : works) w.wait();
  works.clear();
}

}  // namespace hone

#endif  // HONE_CUDA
