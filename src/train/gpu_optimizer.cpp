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

GpuAdamW::~GpuAdamW() {
  if (host_m_) cudaFreeHost(host_m_);
  if (host_v_) cudaFreeHost(host_v_);
}

void GpuAdamW::offload_state() {
  if (offloaded_) return;
  if (!host_m_) CUDA_CHECK(cudaMallocHost(&host_m_, size_t(n_) * sizeof(float)));
  if (!host_v_) CUDA_CHECK(cudaMallocHost(&host_v_, size_t(n_) * sizeof(float)));
  CUDA_CHECK(cudaMemcpyAsync(host_m_, m_.get(), m_.bytes(), cudaMemcpyDeviceToHost, ctx_.stream));
  CUDA_CHECK(cudaMemcpyAsync(host_v_, v_.get(), v_.bytes(), cudaMemcpyDeviceToHost, ctx_.stream));
  CUDA_CHECK(cudaStreamSynchronize(ctx_.stream));
  m_ = DeviceArray<float>();
  v_ = DeviceArray<float>();
  offloaded_ = true;
}

void GpuAdamW::reload_state() {
  if (!offloaded_) return;
  m_ = DeviceArray<float>(n_);
  v_ = DeviceArray<float>(n_);
  CUDA_CHECK(cudaMemcpyAsync(m_.get(), host_m_, m_.bytes(), cudaMemcpyHostToDevice, ctx_.stream));
  CUDA_CHECK(cudaMemcpyAsync(v_.get(), host_v_, v_.bytes(), cudaMemcpyHostToDevice, ctx_.stream));
  CUDA_CHECK(cudaStreamSynchronize(ctx_.stream));
  offloaded_ = false;
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

GpuStepResult GpuAdamW::clip(double max_norm) {
  HONE_CHECK(grads_.get(), "clipping with the gradient buffer released");
  GpuStepResult r;
  r.grad_norm = std::sqrt(cuda::sum_squares(grads_.get(), n_, ctx_));
  r.clip_coef = clip_coefficient(r.grad_norm, max_norm);
  if (r.clip_coef < 1.f) cuda::scale_inplace(grads_.get(), r.clip_coef, n_, ctx_);
  return r;
}

void GpuAdamW::adamw(float lr) {
  HONE_CHECK(!offloaded_, "AdamW step while the optimizer state is offloaded");
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
