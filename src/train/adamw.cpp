// AdamW over the backend's flat buffers, segment by segment (decayed and undecayed runs of parameters).
#include "train/adamw.h"

#include <algorithm>

#include "backend/optimizer_ops.h"
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

std::vector<ShardSegment> whole_buffer_segments(const std::vector<ParamSegment>& segments) {
  std::vector<ShardSegment> out;
  for (const ParamSegment& s : segments) out.push_back({s.offset, s.offset, s.size, s.decay});
  return out;
}

template <typename B>
AdamW<B>::AdamW(std::vector<ShardSegment> segments, int64_t n, AdamWConfig config, Exec x)
    : segments_(std::move(segments)), config_(config), x_(x), n_(n), m_(n, "Adam first moment"),
      v_(n, "Adam second moment") {
  for (const ShardSegment& s : segments_)
    HONE_CHECK(s.shard_offset >= 0 && s.size >= 0 && s.shard_offset + s.size <= n && s.flat_offset >= 0,
               "segment outside the optimizer state of ", n, " values");
  B::zero(x_, m_.get(), m_.bytes());
  B::zero(x_, v_.get(), v_.bytes());
}

template <typename B>
AdamW<B>::AdamW(const std::vector<ParamSegment>& segments, int64_t n, AdamWConfig config, Exec x)
    : AdamW(whole_buffer_segments(segments), n, config, x) {
  int64_t covered = 0;
  for (const ParamSegment& s : segments) covered += s.size;
  HONE_CHECK(covered == n, "segments cover ", covered, " of ", n, " parameters");
}

template <typename B>
AdamW<B>::AdamW(const ModelWeights& params, AdamWConfig config, Exec x)
    : AdamW(weight_decay_segments(params, config.decay_1d_params), params.flat.numel(), config, x) {}

template <typename B>
void AdamW<B>::step(float* master, const float* grads, float lr) {
  HONE_CHECK(!held_, "AdamW step while the optimizer state is offloaded");
  ++step_;
  for (const ShardSegment& s : segments_)
    adamw_update(x_, master + s.shard_offset, grads + s.flat_offset, m_.get() + s.shard_offset,
                 v_.get() + s.shard_offset, s.size, lr, config_.beta1, config_.beta2, config_.eps,
                 s.decay ? config_.weight_decay : 0.f, step_);
}

template <typename B>
void AdamW<B>::offload_state() {
  if constexpr (kOffloadsOptimizerState<B>) {
    if (held_) return;
    using Host = typename B::template HostStaging<float>;
    if (!host_m_.get()) host_m_ = Host(n_, "offloaded Adam first moment");
    if (!host_v_.get()) host_v_ = Host(n_, "offloaded Adam second moment");
    B::download(x_, host_m_.get(), m_.get(), m_.bytes());
    B::download(x_, host_v_.get(), v_.get(), v_.bytes());
    B::sync(x_);
    m_ = typename B::template Array<float>();
    v_ = typename B::template Array<float>();
    held_ = true;
  }
}

template <typename B>
void AdamW<B>::reload_state() {
  if constexpr (kOffloadsOptimizerState<B>) {
    if (!held_) return;
    m_ = typename B::template Array<float>(n_, "Adam first moment");
    v_ = typename B::template Array<float>(n_, "Adam second moment");
    B::upload(x_, m_.get(), host_m_.get(), m_.bytes());
    B::upload(x_, v_.get(), host_v_.get(), v_.bytes());
    B::sync(x_);
    held_ = false;
  }
}

#define HONE_INSTANTIATE_ADAMW(B) template class AdamW<B>;
HONE_FOR_EACH_BACKEND(HONE_INSTANTIATE_ADAMW)
#undef HONE_INSTANTIATE_ADAMW

}  // namespace hone
