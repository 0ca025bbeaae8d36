// GpuAdamW: clipping, AdamW and refit as a handful of fused passes over the flat device buffers.
#include "train/gpu_optimizer.h"

#if HONE_CUDA

#include <cmath>

#include "cuda/check.h"
#include "runtime/error.h"
#include "train/grad_clip.h"

namespace hone {

GpuAdamW::GpuAdamW(const ModelWeights& layout, AdamWConfig config, const cuda::GpuContext& ctx)
    : n_(layout.flat.numel()),
      segments_(weight_decay_segments(layout, config.decay_1d_params)),
      config_(config),
      ctx_(ctx),
      master_(n_),
      grads_(n_),
      m_(n_),
      v_(n_) {
  int64_t covered = 0;
  for (const ParamSegment& s : segments_) {
    HONE_CHECK(s.offset == covered && s.size > 0, "weight-decay segments must tile the flat buffer");
    covered += s.size;
  }
  HONE_CHECK(covered == n_, "weight-decay segments cover ", covered, " of ", n_, " parameters");
  CUDA_CHECK(cudaMemsetAsync(grads_.get(), 0, grads_.bytes(), ctx_.stream));
  CUDA_CHECK(cudaMemsetAsync(m_.get(), 0, m_.bytes(), ctx_.stream));
  CUDA_CHECK(cudaMemsetAsync(v_.get(), 0, v_.bytes(), ctx_.stream));
}

HostMoments::~HostMoments() {
  if (m_) cudaFreeHost(m_);
  if (v_) cudaFreeHost(v_);
}

void HostMoments::offload(DeviceArray<float>& m, DeviceArray<float>& v, cudaStream_t stream) {
  HONE_CHECK(!held_, "moments offloaded twice");
  if (!m_) CUDA_CHECK(cudaMallocHost(&m_, m.bytes()));
  if (!v_) CUDA_CHECK(cudaMallocHost(&v_, v.bytes()));
  CUDA_CHECK(cudaMemcpyAsync(m_, m.get(), m.bytes(), cudaMemcpyDeviceToHost, stream));
  CUDA_CHECK(cudaMemcpyAsync(v_, v.get(), v.bytes(), cudaMemcpyDeviceToHost, stream));
  CUDA_CHECK(cudaStreamSynchronize(stream));
  m = DeviceArray<float>();
  v = DeviceArray<float>();
  held_ = true;
}

void HostMoments::reload(DeviceArray<float>& m, DeviceArray<float>& v, int64_t n, cudaStream_t stream) {
  HONE_CHECK(held_, "moments reloaded without an offload");
  m = DeviceArray<float>(n);
  v = DeviceArray<float>(n);
  CUDA_CHECK(cudaMemcpyAsync(m.get(), m_, m.bytes(), cudaMemcpyHostToDevice, stream));
  CUDA_CHECK(cudaMemcpyAsync(v.get(), v_, v.bytes(), cudaMemcpyHostToDevice, stream));
  CUDA_CHECK(cudaStreamSynchronize(stream));
  held_ = false;
}

void GpuAdamW::offload_state() {
  if (!host_.held()) host_.offload(m_, v_, ctx_.stream);
}

void GpuAdamW::reload_state() {
  if (host_.held()) host_.reload(m_, v_, n_, ctx_.stream);
}

void GpuAdamW::load_master(const ModelWeights& w) {
  HONE_CHECK(w.flat.numel() == n_, "weights have ", w.flat.numel(), " parameters, the optimizer ", n_);
  CUDA_CHECK(cudaMemcpyAsync(master_.get(), w.flat.f32(), master_.bytes(), cudaMemcpyHostToDevice, ctx_.stream));
  CUDA_CHECK(cudaStreamSynchronize(ctx_.stream));
}

void GpuAdamW::download_master(ModelWeights& w) const {
  HONE_CHECK(w.flat.numel() == n_, "weights have ", w.flat.numel(), " parameters, the optimizer ", n_);
  CUDA_CHECK(cudaMemcpyAsync(w.flat.f32(), master_.get(), master_.bytes(), cudaMemcpyDeviceToHost, ctx_.stream));
  CUDA_CHECK(cudaStreamSynchronize(ctx_.stream));
}

void GpuAdamW::zero_grads() {
  if (!grads_.get()) grads_ = DeviceArray<float>(n_);
  CUDA_CHECK(cudaMemsetAsync(grads_.get(), 0, grads_.bytes(), ctx_.stream));
}

GpuStepResult GpuAdamW::clip(double max_norm, const ShardedNorm& norm) {
  HONE_CHECK(grads_.get(), "clipping with the gradient buffer released");
  GpuStepResult r;
  const double local = norm.weighted_sum_squares ? norm.weighted_sum_squares(grads_.get(), 0, n_)
                                                 : cuda::sum_squares(grads_.get(), n_, ctx_);
  r.grad_norm = std::sqrt(norm.sum_over_group(local));
  r.clip_coef = clip_coefficient(r.grad_norm, max_norm);
  if (r.clip_coef < 1.f) cuda::scale_inplace(grads_.get(), r.clip_coef, n_, ctx_);
  return r;
}

void GpuAdamW::adamw(float lr) {
  HONE_CHECK(!host_.held(), "AdamW step while the optimizer state is offloaded");
  ++step_;
  for (const ParamSegment& s : segments_)
    cuda::adamw_update(master_.get() + s.offset, grads_.get() + s.offset, m_.get() + s.offset, v_.get() + s.offset,
                       s.size, lr, config_.beta1, config_.beta2, config_.eps, s.decay ? config_.weight_decay : 0.f,
                       step_, ctx_);
}

void GpuAdamW::refit(bf16* compute_weights) { cuda::refit_cast(compute_weights, master_.get(), n_, ctx_); }

GpuStepResult GpuAdamW::step(float lr, double max_norm, bf16* compute_weights) {
  const GpuStepResult r = clip(max_norm);
  adamw(lr);
  refit(compute_weights);
  return r;
}

}  // namespace hone

#endif  // HONE_CUDA
