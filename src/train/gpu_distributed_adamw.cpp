// GpuDistributedAdamW (ZeRO-1) and GpuDataParallelAdamW: bucketed NCCL reduction, sharded AdamW, bf16 all-gather.
#include "train/gpu_distributed_adamw.h"

#if HONE_CUDA

#include <algorithm>
#include <cmath>

#include "cuda/check.h"
#include "runtime/error.h"
#include "train/grad_clip.h"

namespace hone {
namespace {

int64_t layer_start(const GpuLayerOffsets& o) {
  int64_t s = INT64_MAX;
  for (int64_t off : {o.input_layernorm, o.q_proj, o.k_proj, o.v_proj, o.q_bias, o.k_bias, o.v_bias, o.q_norm,
                      o.k_norm, o.o_proj, o.post_attention_layernorm, o.gate_proj, o.up_proj, o.down_proj})
    if (off >= 0) s = std::min(s, off);
  return s;
}

cuda::GpuContext on_stream(const cuda::GpuContext& ctx, cudaStream_t s) {
  cuda::GpuContext c = ctx;
  c.stream = s;
  return c;
}

void wait_all(std::vector<NcclWork>& works) {
  for (NcclWork& w : works) w.wait();
  works.clear();
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

// ---- GpuDistributedAdamW ----------------------------------------------------------------------------------------

GpuDistributedAdamW::GpuDistributedAdamW(const ModelWeights& weights, const GpuParamLayout& layout,
                                         AdamWConfig config, const cuda::GpuContext& ctx, NcclComm& dp,
                                         GpuDataParallelOptions options)
    : ctx_(ctx),
      dp_(dp),
      config_(config),
      options_(options),
      zl_(weights.flat.numel(), dp.size(), dp.rank(), model_bucket_starts(layout, dp.size(), options.bucket_bytes)),
      segments_(zl_.shard_segments(weight_decay_segments(weights, config.decay_1d_params))) {
  HONE_CHECK(layout.num_params == weights.flat.numel(), "layout and weights differ in size");
  for (const ZeroBucket& b : zl_.buckets()) max_bucket_ = std::max(max_bucket_, b.size);
  const int64_t shard = zl_.shard_size();
  grads_ = DeviceArray<float>(zl_.padded_size());
  master_ = DeviceArray<float>(shard);
  m_ = DeviceArray<float>(shard);
  v_ = DeviceArray<float>(shard);
  gshard_ = DeviceArray<float>(shard);
  wshard_bf_ = DeviceArray<bf16>(shard);
  scalar_ = DeviceArray<char>(sizeof(double));
  if (!options_.grad_reduce_in_fp32) {
    send_bf_ = DeviceArray<bf16>(max_bucket_);
    recv_bf_ = DeviceArray<bf16>(max_bucket_ / dp.size());
  }
  if (zl_.padded_size() > zl_.num_params()) {
    const ZeroBucket& last = zl_.buckets().front();  // the bucket at the end of the buffer holds the padding
    tail_bf_ = DeviceArray<bf16>(last.size);
  }
  CUDA_CHECK(cudaMemsetAsync(grads_.get(), 0, grads_.bytes(), ctx_.stream));
  CUDA_CHECK(cudaMemsetAsync(master_.get(), 0, master_.bytes(), ctx_.stream));
  CUDA_CHECK(cudaMemsetAsync(m_.get(), 0, m_.bytes(), ctx_.stream));
  CUDA_CHECK(cudaMemsetAsync(v_.get(), 0, v_.bytes(), ctx_.stream));
  CUDA_CHECK(cudaMemsetAsync(gshard_.get(), 0, gshard_.bytes(), ctx_.stream));
  scatter_from_host(weights.flat.f32(), master_.get());
}

void GpuDistributedAdamW::zero_grads() {
  CUDA_CHECK(cudaMemsetAsync(grads_.get(), 0, grads_.bytes(), ctx_.stream));
}

NcclWork GpuDistributedAdamW::reduce_bucket(int bi, cudaStream_t stream) {
  const ZeroBucket& b = zl_.buckets()[size_t(bi)];
  const int64_t chunk = zl_.chunk_size(b);
  float* out = gshard_.get() + b.shard_offset;
  if (options_.grad_reduce_in_fp32) return dp_.reduce_scatter_sum_async(grads_.get() + b.offset, out, chunk, CommType::f32, stream);
  // bf16: convert, reduce, convert back, all in stream order (the staging buffers serve one bucket at a time).
  const cuda::GpuContext c = on_stream(ctx_, stream);
  cuda::f32_to_bf16(send_bf_.get(), grads_.get() + b.offset, b.size, c);
  NcclWork w = dp_.reduce_scatter_sum_async(send_bf_.get(), recv_bf_.get(), chunk, CommType::bf16, stream);
  cuda::bf16_to_f32(out, recv_bf_.get(), chunk, c);
  if (w.pending()) CUDA_CHECK(cudaEventRecord(w.event(), stream));  // the work completes with the conversion back
  return w;
}

void GpuDistributedAdamW::reduce_all() {
  std::vector<NcclWork> works;
  for (size_t b = 0; b < zl_.buckets().size(); ++b) works.push_back(reduce_bucket(int(b), ctx_.stream));
  wait_all(works);
}

GpuStepResult GpuDistributedAdamW::step(float lr, double max_norm, bf16* compute_weights) {
  if (!reduced_) reduce_all();
  reduced_ = false;
  const int64_t shard = zl_.shard_size(), n = zl_.num_params();

  // Global norm: the shards' sums of squares summed over dp (the padding is zero).
  const double local = cuda::sum_squares(gshard_.get(), shard, ctx_);
  double* d_sum = reinterpret_cast<double*>(scalar_.get());
  CUDA_CHECK(cudaMemcpyAsync(d_sum, &local, sizeof(double), cudaMemcpyHostToDevice, ctx_.stream));
  dp_.all_reduce_sum_async(d_sum, d_sum, 1, CommType::f64, ctx_.stream).wait();
  double total = 0;
  CUDA_CHECK(cudaMemcpyAsync(&total, d_sum, sizeof(double), cudaMemcpyDeviceToHost, ctx_.stream));
  CUDA_CHECK(cudaStreamSynchronize(ctx_.stream));
  GpuStepResult r;
  r.grad_norm = std::sqrt(total);
  r.clip_coef = clip_coefficient(r.grad_norm, max_norm);
  if (r.clip_coef < 1.f) cuda::scale_inplace(gshard_.get(), r.clip_coef, shard, ctx_);

  ++step_;
  for (const ShardSegment& s : segments_)
    cuda::adamw_update(master_.get() + s.shard_offset, gshard_.get() + s.shard_offset, m_.get() + s.shard_offset,
                       v_.get() + s.shard_offset, s.size, lr, config_.beta1, config_.beta2, config_.eps,
                       s.decay ? config_.weight_decay : 0.f, step_, ctx_);

  // bf16 weights of the shard, all-gathered bucket by bucket straight into the compute weights; the bucket that
  // holds the padding gathers into staging and copies the real part.
  cuda::refit_cast(wshard_bf_.get(), master_.get(), shard, ctx_);
  std::vector<NcclWork> works;
  for (const ZeroBucket& b : zl_.buckets()) {
    const bool padded = b.offset + b.size > n;
    bf16* dst = padded ? tail_bf_.get() : compute_weights + b.offset;
    works.push_back(dp_.all_gather_async(wshard_bf_.get() + b.shard_offset, dst, zl_.chunk_size(b), CommType::bf16,
                                         ctx_.stream));
    if (padded)
      CUDA_CHECK(cudaMemcpyAsync(compute_weights + b.offset, tail_bf_.get(), size_t(n - b.offset) * sizeof(bf16),
                                 cudaMemcpyDeviceToDevice, ctx_.stream));
  }
  wait_all(works);
  CUDA_CHECK(cudaStreamSynchronize(ctx_.stream));
  return r;
}

std::vector<float> GpuDistributedAdamW::gather_to_host(const float* shard) {
  std::vector<float> full(size_t(zl_.padded_size()), 0.f);
  DeviceArray<float> staging(max_bucket_);
  for (const ZeroBucket& b : zl_.buckets()) {
    dp_.all_gather_async(shard + b.shard_offset, staging.get(), zl_.chunk_size(b), CommType::f32, ctx_.stream).wait();
    CUDA_CHECK(cudaMemcpyAsync(full.data() + b.offset, staging.get(), size_t(b.size) * sizeof(float),
                               cudaMemcpyDeviceToHost, ctx_.stream));
    CUDA_CHECK(cudaStreamSynchronize(ctx_.stream));
  }
  full.resize(size_t(zl_.num_params()));
  return full;
}

void GpuDistributedAdamW::scatter_from_host(const float* full, float* shard) {
  for (const ShardSegment& s : segments_)
    CUDA_CHECK(cudaMemcpyAsync(shard + s.shard_offset, full + s.flat_offset, size_t(s.size) * sizeof(float),
                               cudaMemcpyHostToDevice, ctx_.stream));
  CUDA_CHECK(cudaStreamSynchronize(ctx_.stream));
}

void GpuDistributedAdamW::download_master(ModelWeights& w) {
  HONE_CHECK(w.flat.numel() == zl_.num_params(), "weights of ", w.flat.numel(), " parameters, optimizer ",
             zl_.num_params());
  const std::vector<float> full = gather_to_host(master_.get());
  std::copy(full.begin(), full.end(), w.flat.f32());
}

FullOptimizerState GpuDistributedAdamW::full_state() {
  FullOptimizerState s;
  s.step = step_;
  s.exp_avg = gather_to_host(m_.get());
  s.exp_avg_sq = gather_to_host(v_.get());
  return s;
}

void GpuDistributedAdamW::load_full_state(const FullOptimizerState& s, const ModelWeights& weights) {
  const int64_t n = zl_.num_params();
  HONE_CHECK(int64_t(s.exp_avg.size()) == n && int64_t(s.exp_avg_sq.size()) == n && weights.flat.numel() == n,
             "the optimizer state must cover ", n, " parameters");
  scatter_from_host(weights.flat.f32(), master_.get());
  scatter_from_host(s.exp_avg.data(), m_.get());
  scatter_from_host(s.exp_avg_sq.data(), v_.get());
  step_ = s.step;
}

ShardOptimizerState GpuDistributedAdamW::shard_state() const {
  ShardOptimizerState s{zl_.dp(), zl_.rank(), step_, zl_.num_params(), {}, {}, {}};
  const size_t shard = size_t(zl_.shard_size());
  for (auto [dst, src] : {std::pair{&s.master, master_.get()}, {&s.exp_avg, m_.get()}, {&s.exp_avg_sq, v_.get()}}) {
    dst->resize(shard);
    CUDA_CHECK(cudaMemcpyAsync(dst->data(), src, shard * sizeof(float), cudaMemcpyDeviceToHost, ctx_.stream));
  }
  CUDA_CHECK(cudaStreamSynchronize(ctx_.stream));
  return s;
}

void GpuDistributedAdamW::load_shard_state(const ShardOptimizerState& s) {
  HONE_CHECK(s.dp_size == zl_.dp() && s.dp_rank == zl_.rank() && s.num_params == zl_.num_params(),
             "a shard of rank ", s.dp_rank, " of ", s.dp_size, " does not fit rank ", zl_.rank(), " of ", zl_.dp());
  const size_t shard = size_t(zl_.shard_size());
  HONE_CHECK(s.master.size() == shard && s.exp_avg.size() == shard && s.exp_avg_sq.size() == shard,
             "shard buffers must hold ", shard, " values");
  for (auto [src, dst] : {std::pair{&s.master, master_.get()}, {&s.exp_avg, m_.get()}, {&s.exp_avg_sq, v_.get()}})
    CUDA_CHECK(cudaMemcpyAsync(dst, src->data(), shard * sizeof(float), cudaMemcpyHostToDevice, ctx_.stream));
  CUDA_CHECK(cudaStreamSynchronize(ctx_.stream));
  step_ = s.step;
}

// ---- GpuDataParallelAdamW ---------------------------------------------------------------------------------------

GpuDataParallelAdamW::GpuDataParallelAdamW(const ModelWeights& weights, const GpuParamLayout& layout,
                                           AdamWConfig config, const cuda::GpuContext& ctx, NcclComm& dp,
                                           GpuDataParallelOptions options)
    : ctx_(ctx),
      dp_(dp),
      options_(options),
      adamw_(weights, config, ctx),
      zl_(weights.flat.numel(), 1, 0, model_bucket_starts(layout, 1, options.bucket_bytes)) {
  adamw_.load_master(weights);
  if (!options_.grad_reduce_in_fp32) {
    int64_t max_bucket = 0;
    for (const ZeroBucket& b : zl_.buckets()) max_bucket = std::max(max_bucket, b.size);
    send_bf_ = DeviceArray<bf16>(max_bucket);
  }
}

NcclWork GpuDataParallelAdamW::reduce_bucket(int bi, cudaStream_t stream) {
  const ZeroBucket& b = zl_.buckets()[size_t(bi)];
  float* g = adamw_.grads() + b.offset;
  if (options_.grad_reduce_in_fp32) return dp_.all_reduce_sum_async(g, g, b.size, CommType::f32, stream);
  const cuda::GpuContext c = on_stream(ctx_, stream);
  cuda::f32_to_bf16(send_bf_.get(), g, b.size, c);
  NcclWork w = dp_.all_reduce_sum_async(send_bf_.get(), send_bf_.get(), b.size, CommType::bf16, stream);
  cuda::bf16_to_f32(g, send_bf_.get(), b.size, c);
  if (w.pending()) CUDA_CHECK(cudaEventRecord(w.event(), stream));
  return w;
}

GpuStepResult GpuDataParallelAdamW::step(float lr, double max_norm, bf16* compute_weights) {
  if (!reduced_) {
    std::vector<NcclWork> works;
    for (size_t b = 0; b < zl_.buckets().size(); ++b) works.push_back(reduce_bucket(int(b), ctx_.stream));
    wait_all(works);
  }
  reduced_ = false;
  return adamw_.step(lr, max_norm, compute_weights);
}

}  // namespace hone

#endif  // HONE_CUDA
