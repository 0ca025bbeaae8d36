// DistributedAdamW (ZeRO-1) and DataParallelAdamW on the CPU.
#include "train/distributed_adamw.h"

#include <algorithm>
#include <cmath>
#include <cstring>

#include "ops/ops.h"
#include "runtime/error.h"
#include "tensor/dtype.h"
#include "train/grad_clip.h"

namespace hone {
namespace {

std::vector<uint16_t> to_bf16(const float* x, int64_t n) {
  std::vector<uint16_t> h(static_cast<size_t>(n));
  for (int64_t i = 0; i < n; ++i) h[size_t(i)] = f32_to_bf16(x[i]);
  return h;
}

void from_bf16(const std::vector<uint16_t>& h, float* x) {
  for (size_t i = 0; i < h.size(); ++i) x[i] = bf16_to_f32(h[i]);
}

}  // namespace

void all_reduce_gradients(Comm& comm, float* x, int64_t n, bool in_fp32) {
  if (comm.size() == 1) return;  // nothing to sum (and no bf16 rounding on one rank)
  if (in_fp32) {
    comm.all_reduce_sum(x, n);
    return;
  }
  std::vector<uint16_t> h = to_bf16(x, n);
  comm.all_reduce_sum(h.data(), n);
  from_bf16(h, x);
}

// ---- DistributedAdamW -------------------------------------------------------------------------------------------

DistributedAdamW::DistributedAdamW(const ModelWeights& weights, AdamWConfig config, Comm& dp, bool grad_reduce_in_fp32,
                                   ShardedNorm norm)
    : dp_(dp),
      config_(config),
      fp32_(grad_reduce_in_fp32),
      norm_(std::move(norm)),
      layout_(weights.flat.numel(), dp.size(), dp.rank()),
      segments_(layout_.shard_segments(weight_decay_segments(weights, config.decay_1d_params))),
      master_(size_t(layout_.shard_size()), 0.f),
      m_(size_t(layout_.shard_size()), 0.f),
      v_(size_t(layout_.shard_size()), 0.f),
      reduced_(size_t(layout_.shard_size()), 0.f),
      padded_(size_t(layout_.padded_size()), 0.f) {
  HONE_CHECK(!dp.on_device(), "the CPU DistributedAdamW needs a host Comm");
  for (const ShardSegment& s : segments_)
    std::memcpy(master_.data() + s.shard_offset, weights.flat.f32() + s.flat_offset, size_t(s.size) * sizeof(float));
}

OptimizerStepResult DistributedAdamW::step(ModelWeights& weights, const ModelWeights& grads, float lr,
                                           double max_grad_norm) {
  const int64_t n = layout_.num_params(), shard = layout_.shard_size();
  HONE_CHECK(grads.flat.numel() == n && weights.flat.numel() == n, "weights and gradients must have ", n,
             " parameters");
  // Reduce-scatter: the padded copy keeps the padding zero.
  std::memcpy(padded_.data(), grads.flat.f32(), size_t(n) * sizeof(float));
  std::fill(padded_.begin() + n, padded_.end(), 0.f);
  for (const ZeroBucket& b : layout_.buckets()) {
    const int64_t chunk = layout_.chunk_size(b);
    float* out = reduced_.data() + b.shard_offset;
    if (fp32_) {
      dp_.reduce_scatter_sum(padded_.data() + b.offset, out, chunk);
    } else {
      const std::vector<uint16_t> h = to_bf16(padded_.data() + b.offset, b.size);
      std::vector<uint16_t> r(static_cast<size_t>(chunk));
      dp_.reduce_scatter_sum(h.data(), r.data(), chunk);
      from_bf16(r, out);
    }
  }
  // Global norm over the shards (the padding is zero) and, for a sharded model, over its group; then clip.
  double sumsq = 0;
  if (norm_.weighted_sum_squares)
    for (const ShardSegment& s : segments_) sumsq += norm_.local(reduced_.data() + s.shard_offset, s.flat_offset, s.size);
  else
    sumsq = cpu::sum_squares(reduced_.data(), shard);
  dp_.all_reduce_sum(&sumsq, 1);
  sumsq = norm_.sum_over_group(sumsq);
  OptimizerStepResult r;
  r.grad_norm = std::sqrt(sumsq);
  r.skipped = !std::isfinite(r.grad_norm);
  if (r.skipped) return r;  // the weights still hold the last all-gathered master weights
  r.clip_coef = clip_coefficient(r.grad_norm, max_grad_norm);
  std::vector<float> g = reduced_;
  if (r.clip_coef < 1.f) cpu::scale_inplace(g.data(), r.clip_coef, shard);

  ++step_;
  for (const ShardSegment& s : segments_)
    cpu::adamw_update(master_.data() + s.shard_offset, g.data() + s.shard_offset, m_.data() + s.shard_offset,
                      v_.data() + s.shard_offset, s.size, lr, config_.beta1, config_.beta2, config_.eps,
                      s.decay ? config_.weight_decay : 0.f, step_);

  const std::vector<float> full = gather(master_);
  std::memcpy(weights.flat.f32(), full.data(), size_t(n) * sizeof(float));
  return r;
}

std::vector<float> DistributedAdamW::gather(const std::vector<float>& shard) const {
  std::vector<float> full(size_t(layout_.padded_size()), 0.f);
  for (const ZeroBucket& b : layout_.buckets())
    dp_.all_gather(shard.data() + b.shard_offset, full.data() + b.offset, layout_.chunk_size(b));
  full.resize(size_t(layout_.num_params()));
  return full;
}

FullOptimizerState DistributedAdamW::full_state() const {
  FullOptimizerState s;
  s.step = step_;
  s.exp_avg = gather(m_);
  s.exp_avg_sq = gather(v_);
  return s;
}

void DistributedAdamW::load_full_state(const FullOptimizerState& s, const ModelWeights& weights) {
  const int64_t n = layout_.num_params();
  HONE_CHECK(int64_t(s.exp_avg.size()) == n && int64_t(s.exp_avg_sq.size()) == n && weights.flat.numel() == n,
             "the optimizer state must cover ", n, " parameters");
  std::fill(master_.begin(), master_.end(), 0.f);
  std::fill(m_.begin(), m_.end(), 0.f);
  std::fill(v_.begin(), v_.end(), 0.f);
  for (const ShardSegment& seg : segments_) {
    const size_t bytes = size_t(seg.size) * sizeof(float);
    std::memcpy(master_.data() + seg.shard_offset, weights.flat.f32() + seg.flat_offset, bytes);
    std::memcpy(m_.data() + seg.shard_offset, s.exp_avg.data() + seg.flat_offset, bytes);
    std::memcpy(v_.data() + seg.shard_offset, s.exp_avg_sq.data() + seg.flat_offset, bytes);
  }
  step_ = s.step;
}

ShardOptimizerState DistributedAdamW::shard_state() const {
  return {layout_.dp(), layout_.rank(), step_, layout_.num_params(), master_, m_, v_};
}

void DistributedAdamW::load_shard_state(const ShardOptimizerState& s) {
  HONE_CHECK(s.dp_size == layout_.dp() && s.dp_rank == layout_.rank() && s.num_params == layout_.num_params(),
             "a shard of rank ", s.dp_rank, " of ", s.dp_size, " over ", s.num_params,
             " parameters does not fit rank ", layout_.rank(), " of ", layout_.dp(), " over ", layout_.num_params());
  const size_t shard = size_t(layout_.shard_size());
  HONE_CHECK(s.master.size() == shard && s.exp_avg.size() == shard && s.exp_avg_sq.size() == shard,
             "shard buffers must hold ", shard, " values");
  master_ = s.master, m_ = s.exp_avg, v_ = s.exp_avg_sq, step_ = s.step;
}

// ---- DataParallelAdamW ------------------------------------------------------------------------------------------

DataParallelAdamW::DataParallelAdamW(const ModelWeights& weights, AdamWConfig config, Comm& dp,
                                     bool grad_reduce_in_fp32, ShardedNorm norm, ExpertRegion experts)
    : dp_(dp), fp32_(grad_reduce_in_fp32), norm_(std::move(norm)), experts_(experts), adamw_(weights, config) {
  HONE_CHECK(!dp.on_device(), "the CPU DataParallelAdamW needs a host Comm");
  HONE_CHECK(!experts.edp || (experts.begin >= 0 && experts.begin <= weights.flat.numel() && norm_.group),
             "an expert region needs its place in the flat buffer and a norm over the expert-parallel group");
}

OptimizerStepResult DataParallelAdamW::step(ModelWeights& weights, ModelWeights& grads, float lr,
                                            double max_grad_norm) {
  const int64_t n = grads.flat.numel();
  const int64_t dense = experts_.edp ? experts_.begin : n;
  all_reduce_gradients(dp_, grads.flat.f32(), dense, fp32_);
  if (experts_.edp) all_reduce_gradients(*experts_.edp, grads.flat.f32() + dense, n - dense, fp32_);
  OptimizerStepResult r;
  if (norm_.group) {  // a sharded model: the norm spans the group
    r.grad_norm = std::sqrt(norm_.sum_over_group(norm_.local(grads.flat.f32(), 0, n)));
    r.clip_coef = clip_coefficient(r.grad_norm, max_grad_norm);
    if (r.clip_coef < 1.f) cpu::scale_inplace(grads.flat.f32(), r.clip_coef, n);
  } else {
    r.grad_norm = clip_grad_norm(grads.flat.f32(), n, max_grad_norm);
    r.clip_coef = clip_coefficient(r.grad_norm, max_grad_norm);
  }
  r.skipped = !std::isfinite(r.grad_norm);
  if (!r.skipped) adamw_.step(weights, grads, lr);
  return r;
}

}  // namespace hone
