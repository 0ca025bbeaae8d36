// GpuDataParallelAdamW: bucketed NCCL all-reduce of the gradients, then GpuAdamW on the whole buffer.
#include "train/gpu_data_parallel_adamw.h"

#if HONE_CUDA

#include <algorithm>
#include <cmath>

#include "cuda/check.h"
#include "runtime/error.h"

namespace hone {

GpuDataParallelAdamW::GpuDataParallelAdamW(const ModelWeights& weights, const ParamLayout& layout,
                                           AdamWConfig config, const cuda::GpuContext& ctx, NcclComm* dp,
                                           GpuDataParallelOptions options)
    : ctx_(ctx),
      dp_(dp),
      options_(options),
      adamw_(weights, config, ctx),
      zl_(weights.flat.numel(), 1, 0, model_bucket_starts(layout, 1, options.bucket_bytes)) {
  adamw_.load_master(weights);
  if (reduces() && !options_.grad_reduce_in_fp32) {
    int64_t max_bucket = 0;
    for (const ZeroBucket& b : zl_.buckets()) max_bucket = std::max(max_bucket, b.size);
    send_bf_ = DeviceArray<bf16>(max_bucket);
  }
}

NcclWork GpuDataParallelAdamW::reduce_bucket(int bi, cudaStream_t stream) {
  HONE_CHECK(adamw_.grads(), "gradient reduction with the gradient buffer released");
  if (!reduces()) return {};  // the sum over one rank is its own gradient
  const ZeroBucket& b = zl_.buckets()[size_t(bi)];
  // The experts' buckets go over their expert-data-parallel group (model_bucket_starts never mixes the two).
  NcclComm* group = options_.expert_begin >= 0 && b.offset >= options_.expert_begin ? options_.edp : dp_;
  if (!group || group->size() == 1) return {};
  float* g = adamw_.grads() + b.offset;
  if (options_.grad_reduce_in_fp32) return group->all_reduce_sum_async(g, g, b.size, CommType::f32, stream);
  const cuda::GpuContext c = on_stream(ctx_, stream);
  cuda::f32_to_bf16(send_bf_.get(), g, b.size, c);
  NcclWork w = group->all_reduce_sum_async(send_bf_.get(), send_bf_.get(), b.size, CommType::bf16, stream);
  cuda::bf16_to_f32(g, send_bf_.get(), b.size, c);
  if (w.pending()) CUDA_CHECK(cudaEventRecord(w.event(), stream));
  return w;
}

GpuStepResult GpuDataParallelAdamW::update(float lr, double max_norm) {
  if (reduces() && !reduced_) {
    std::vector<NcclWork> works;
    for (size_t b = 0; b < zl_.buckets().size(); ++b) works.push_back(reduce_bucket(int(b), ctx_.stream));
    wait_works(works);
  }
  reduced_ = false;
  GpuStepResult r = adamw_.clip(max_norm, options_.norm);
  r.skipped = !std::isfinite(r.grad_norm);
  if (!r.skipped) adamw_.adamw(lr);
  return r;
}

void GpuDataParallelAdamW::read_state(ModelWeights* master, float* exp_avg, float* exp_avg_sq, int root) {
  if ((dp_ ? dp_->rank() : 0) != root) return;
  HONE_CHECK(master && exp_avg && exp_avg_sq, "read_state needs host buffers on the root");
  adamw_.download_master(*master);
  const bool off = adamw_.state_offloaded();
  if (off) adamw_.reload_state();
  const size_t bytes = size_t(adamw_.num_params()) * sizeof(float);
  CUDA_CHECK(cudaMemcpyAsync(exp_avg, adamw_.exp_avg(), bytes, cudaMemcpyDeviceToHost, ctx_.stream));
  CUDA_CHECK(cudaMemcpyAsync(exp_avg_sq, adamw_.exp_avg_sq(), bytes, cudaMemcpyDeviceToHost, ctx_.stream));
  CUDA_CHECK(cudaStreamSynchronize(ctx_.stream));
  if (off) adamw_.offload_state();
}

void GpuDataParallelAdamW::write_state(const ModelWeights& master, const float* exp_avg, const float* exp_avg_sq,
                                       int step_count) {
  if (adamw_.state_offloaded()) adamw_.reload_state();
  adamw_.load_master(master);
  const size_t bytes = size_t(adamw_.num_params()) * sizeof(float);
  CUDA_CHECK(cudaMemcpyAsync(adamw_.exp_avg(), exp_avg, bytes, cudaMemcpyHostToDevice, ctx_.stream));
  CUDA_CHECK(cudaMemcpyAsync(adamw_.exp_avg_sq(), exp_avg_sq, bytes, cudaMemcpyHostToDevice, ctx_.stream));
  CUDA_CHECK(cudaStreamSynchronize(ctx_.stream));
  adamw_.set_step_count(step_count);
}

}  // namespace hone

#endif  // HONE_CUDA
