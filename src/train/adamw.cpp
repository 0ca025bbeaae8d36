// AdamW on flat buffers, segment by segment (decayed and undecayed runs of parameters).
#include "train/adamw.h"

#include <algorithm>

#include "ops/ops.h"
#include "runtime/error.h"

namespace hone {

std::vector<ParamSegment> weight_decay_segments(const ModelWeights& params, bool decay_1d_params) {
  const float* base = params.flat.f32();
  std::vector<ParamSegment> segs;
  for (const auto& [name, t] : params.named_parameters()) {
    ParamSegment s{int64_t(t.f32() - base), t.numel(), decay_1d_params || t.ndim() >= 2};
    segs.push_back(s);
  }
  std::sort(segs.begin(), segs.end(), [](const ParamSegment& a, const ParamSegment& b) { return a.offset < b.offset; });
  std::vector<ParamSegment> merged;
  for (const auto& s : segs) {
    if (!merged.empty() && merged.back().decay == s.decay && merged.back().offset + merged.back().size == s.offset)
      merged.back().size += s.size;
    else
      merged.push_back(s);
  }
  return merged;
}

AdamW::AdamW(std::vector<ParamSegment> segments, int64_t num_params, AdamWConfig config)
    : segments_(std::move(segments)), config_(config), m_(Tensor::zeros({num_params})),
      v_(Tensor::zeros({num_params})) {
  int64_t covered = 0;
  for (const auto& s : segments_) {
    HONE_CHECK(s.offset >= 0 && s.size >= 0 && s.offset + s.size <= num_params, "segment outside the buffer");
    covered += s.size;
  }
  HONE_CHECK(covered == num_params, "segments cover ", covered, " of ", num_params, " parameters");
}

AdamW::AdamW(const ModelWeights& params, AdamWConfig config)
    : AdamW(weight_decay_segments(params, config.decay_1d_params), params.flat.numel(), config) {}

void AdamW::step(float* params, const float* grads, float lr) {
  ++step_;
  float* m = m_.f32();
  float* v = v_.f32();
  for (const auto& s : segments_) {
    cpu::adamw_update(params + s.offset, grads + s.offset, m + s.offset, v + s.offset, s.size, lr, config_.beta1,
                      config_.beta2, config_.eps, s.decay ? config_.weight_decay : 0.f, step_);
  }
}

}  // namespace hone
