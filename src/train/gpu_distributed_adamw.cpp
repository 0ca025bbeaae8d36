// GpuDistributedAdamW (ZeRO-1): in-place bucketed reduce-scatter, sharded AdamW, in-place bf16 all-gather.
#include "train/gpu_distributed_adamw.h"

#if HONE_CUDA

#include <algorithm>
#include <cmath>

#include "cuda/check.h"
#include "runtime/error.h"
#include "train/grad_clip.h"

namespace hone {

GpuDistributedAdamW::GpuDistributedAdamW(const ModelWeights& weights, const ParamLayout& layout,
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
  master_ = DeviceArray<float>(shard);
  m_ = DeviceArray<float>(shard);
  v_ = DeviceArray<float>(shard);
  scalar_ = DeviceArray<char>(sizeof(double));
  if (!options_.grad_reduce_in_fp32) send_bf_ = DeviceArray<bf16>(max_bucket_);
  if (zl_.padded_size() > zl_.num_params()) {
    const ZeroBucket& last = zl_.buckets().front();  // the bucket at the end of the buffer holds the padding
    tail_bf_ = DeviceArray<bf16>(last.size);
  }
  zero_grads();
  CUDA_CHECK(cudaMemsetAsync(master_.get(), 0, master_.bytes(), ctx_.stream));
  CUDA_CHECK(cudaMemsetAsync(m_.get(), 0, m_.bytes(), ctx_.stream));
  CUDA_CHECK(cudaMemsetAsync(v_.get(), 0, v_.bytes(), ctx_.stream));
  scatter_from_host(weights.flat.f32(), master_.get());
}

void GpuDistributedAdamW::zero_grads() {
  if (!grads_.get()) grads_ = DeviceArray<float>(zl_.padded_size());
  CUDA_CHECK(cudaMemsetAsync(grads_.get(), 0, grads_.bytes(), ctx_.stream));
}

size_t GpuDistributedAdamW::device_bytes() const {
  return grads_.bytes() + master_.bytes() + m_.bytes() + v_.bytes() + send_bf_.bytes() + tail_bf_.bytes() +
         scalar_.bytes();
}

// In place: rank r's reduced chunk of the bucket lands where it lies in the gradient buffer (NCCL's in-place form,
// recv == send + rank * chunk); the other chunks keep this rank's unreduced partial sums, which nothing reads.
NcclWork GpuDistributedAdamW::reduce_bucket(int bi, cudaStream_t stream) {
  HONE_CHECK(grads_.get(), "gradient reduction with the gradient buffer released");
  const ZeroBucket& b = zl_.buckets()[size_t(bi)];
  const int64_t chunk = zl_.chunk_size(b);
  float* in = grads_.get() + b.offset;
  float* mine = grads_.get() + zl_.chunk_flat_offset(b);
  if (zl_.dp() == 1) return {};  // one rank: its chunk is the whole bucket, already in place, in any precision
  if (options_.grad_reduce_in_fp32) return dp_.reduce_scatter_sum_async(in, mine, chunk, CommType::f32, stream);
  // bf16: convert, reduce in place in the staging buffer, convert back, all in stream order (the staging buffer
  // serves one bucket at a time).
  const cuda::GpuContext c = on_stream(ctx_, stream);
  bf16* staged = send_bf_.get();
  bf16* staged_mine = staged + int64_t(zl_.rank()) * chunk;
  cuda::f32_to_bf16(staged, in, b.size, c);
  NcclWork w = dp_.reduce_scatter_sum_async(staged, staged_mine, chunk, CommType::bf16, stream);
  cuda::bf16_to_f32(mine, staged_mine, chunk, c);
  if (w.pending()) CUDA_CHECK(cudaEventRecord(w.event(), stream));  // the work completes with the conversion back
  return w;
}

void GpuDistributedAdamW::reduce_all() {
  std::vector<NcclWork> works;
  for (size_t b = 0; b < zl_.buckets().size(); ++b) works.push_back(reduce_bucket(int(b), ctx_.stream));
  wait_works(works);
}

GpuStepResult GpuDistributedAdamW::update(float lr, double max_norm) {
  HONE_CHECK(!host_.held(), "AdamW step while the optimizer state is offloaded");
  if (!reduced_) reduce_all();
  reduced_ = false;

  // Global norm: the sums of squares of every rank's reduced chunks, summed over dp (the padding is zero).
  // Under tensor parallelism each value is weighted by the tp ranks that hold it, and the sum spans tp too.
  const ShardedNorm& norm = options_.norm;
  double local = 0;
  for (const ZeroBucket& b : zl_.buckets())
    local += norm.weighted_sum_squares
                 ? norm.weighted_sum_squares(grads_.get(), zl_.chunk_flat_offset(b), zl_.chunk_size(b))
                 : cuda::sum_squares(grads_.get() + zl_.chunk_flat_offset(b), zl_.chunk_size(b), ctx_);
  double* d_sum = reinterpret_cast<double*>(scalar_.get());
  CUDA_CHECK(cudaMemcpyAsync(d_sum, &local, sizeof(double), cudaMemcpyHostToDevice, ctx_.stream));
  dp_.all_reduce_sum_async(d_sum, d_sum, 1, CommType::f64, ctx_.stream).wait();
  double total = 0;
  CUDA_CHECK(cudaMemcpyAsync(&total, d_sum, sizeof(double), cudaMemcpyDeviceToHost, ctx_.stream));
  CUDA_CHECK(cudaStreamSynchronize(ctx_.stream));
  GpuStepResult r;
  r.grad_norm = std::sqrt(norm.sum_over_group(total));
  r.skipped = !std::isfinite(r.grad_norm);
  if (r.skipped) return r;  // the master weights and moments stay; refit casts the same weights
  r.clip_coef = clip_coefficient(r.grad_norm, max_norm);
  if (r.clip_coef < 1.f)
    for (const ZeroBucket& b : zl_.buckets())
      cuda::scale_inplace(grads_.get() + zl_.chunk_flat_offset(b), r.clip_coef, zl_.chunk_size(b), ctx_);

  ++step_;
  for (const ShardSegment& s : segments_)
    cuda::adamw_update(master_.get() + s.shard_offset, grads_.get() + s.flat_offset, m_.get() + s.shard_offset,
                       v_.get() + s.shard_offset, s.size, lr, config_.beta1, config_.beta2, config_.eps,
                       s.decay ? config_.weight_decay : 0.f, step_, ctx_);
  return r;
}

// Each rank casts its chunk of every bucket into its own place in the compute weights, then the bucket is
// all-gathered in place (send == recv + rank * chunk). The bucket that holds the padding goes through tail_bf_.
void GpuDistributedAdamW::refit(bf16* compute_weights) {
  const int64_t n = zl_.num_params();
  std::vector<NcclWork> works;
  for (const ZeroBucket& b : zl_.buckets()) {
    const int64_t chunk = zl_.chunk_size(b);
    const bool padded = b.offset + b.size > n;
    bf16* base = padded ? tail_bf_.get() : compute_weights + b.offset;
    bf16* mine = base + int64_t(zl_.rank()) * chunk;
    cuda::refit_cast(mine, master_.get() + b.shard_offset, chunk, ctx_);
    works.push_back(dp_.all_gather_async(mine, base, chunk, CommType::bf16, ctx_.stream));
    if (padded)
      CUDA_CHECK(cudaMemcpyAsync(compute_weights + b.offset, tail_bf_.get(), size_t(n - b.offset) * sizeof(bf16),
                                 cudaMemcpyDeviceToDevice, ctx_.stream));
  }
  wait_works(works);
  CUDA_CHECK(cudaStreamSynchronize(ctx_.stream));
}

// Piece by piece (at most 16 M elements of each rank's chunk at a time), so the staging stays small whatever the
// bucket size: piece p of every rank's chunk is gathered, then each rank's piece copied to its flat place.
void GpuDistributedAdamW::gather_to_host(const float* shard, float* full, int root) {
  const int P = zl_.dp();
  const bool copy = root < 0 || zl_.rank() == root;
  HONE_CHECK(!copy || full, "no host buffer for the gathered state");
  const int64_t n = zl_.num_params(), piece_max = int64_t(16) << 20;
  DeviceArray<float> staging(std::min(piece_max, max_bucket_ / P) * P);
  for (const ZeroBucket& b : zl_.buckets()) {
    const int64_t chunk = zl_.chunk_size(b);
    for (int64_t p0 = 0; p0 < chunk; p0 += piece_max) {
      const int64_t len = std::min(piece_max, chunk - p0);
      dp_.all_gather_async(shard + b.shard_offset + p0, staging.get(), len, CommType::f32, ctx_.stream).wait();
      if (!copy) continue;
      for (int r = 0; r < P; ++r) {
        const int64_t flat = b.offset + int64_t(r) * chunk + p0;
        const int64_t real = std::min(len, n - flat);  // the padding is not copied
        if (real > 0)
          CUDA_CHECK(cudaMemcpyAsync(full + flat, staging.get() + int64_t(r) * len, size_t(real) * sizeof(float),
                                     cudaMemcpyDeviceToHost, ctx_.stream));
      }
      CUDA_CHECK(cudaStreamSynchronize(ctx_.stream));
    }
  }
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
  gather_to_host(master_.get(), w.flat.f32(), -1);
}

void GpuDistributedAdamW::read_state(ModelWeights* master, float* exp_avg, float* exp_avg_sq, int root) {
  const bool here = zl_.rank() == root;
  HONE_CHECK(!here || (master && master->flat.numel() == zl_.num_params() && exp_avg && exp_avg_sq),
             "read_state needs host buffers of ", zl_.num_params(), " values on the root");
  const bool off = host_.held();
  if (off) reload_state();
  gather_to_host(master_.get(), here ? master->flat.f32() : nullptr, root);
  gather_to_host(m_.get(), exp_avg, root);
  gather_to_host(v_.get(), exp_avg_sq, root);
  if (off) offload_state();
}

void GpuDistributedAdamW::write_state(const ModelWeights& master, const float* exp_avg, const float* exp_avg_sq,
                                      int step_count) {
  HONE_CHECK(master.flat.numel() == zl_.num_params(), "the optimizer state must cover ", zl_.num_params(),
             " parameters");
  if (host_.held()) reload_state();
  scatter_from_host(master.flat.f32(), master_.get());
  scatter_from_host(exp_avg, m_.get());
  scatter_from_host(exp_avg_sq, v_.get());
  step_ = step_count;
}

void GpuDistributedAdamW::offload_state() {
  if (!host_.held()) host_.offload(m_, v_, ctx_.stream);
}

void GpuDistributedAdamW::reload_state() {
  if (host_.held()) host_.reload(m_, v_, zl_.shard_size(), ctx_.stream);
}

ShardOptimizerState GpuDistributedAdamW::shard_state() const {
  HONE_CHECK(!host_.held(), "shard_state while the optimizer state is offloaded");
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
  if (host_.held()) reload_state();
  for (auto [src, dst] : {std::pair{&s.master, master_.get()}, {&s.exp_avg, m_.get()}, {&s.exp_avg_sq, v_.get()}})
    CUDA_CHECK(cudaMemcpyAsync(dst, src->data(), shard * sizeof(float), cudaMemcpyHostToDevice, ctx_.stream));
  CUDA_CHECK(cudaStreamSynchronize(ctx_.stream));
  step_ = s.step;
}

}  // namespace hone

#endif  // HONE_CUDA
