// The GPU engine's expert parallelism (what crosses ranks and when: gpu_expert_parallel.h, expert_parallel.h).
#include "parallel/gpu_expert_parallel.h"

#if HONE_CUDA

#include <cstring>
#include <type_traits>

#include "cuda/check.h"
#include "cuda/moe_ops.h"
#include "runtime/error.h"

namespace hone {

GpuExpertParallel::GpuExpertParallel(const ModelConfig& c, Comm& host, Comm& device, const cuda::GpuContext& ctx,
                                     int tp, int tp_rank)
    : host_(host),
      device_(device),
      ctx_(ctx),
      layout_(ShardLayout::of(c, tp, tp_rank, nullptr, 0, host.size(), host.rank())),
      full_(ShardLayout::of(c, tp, tp_rank)),
      El_(layout_.shape().experts) {
  HONE_CHECK(!host.on_device() && device.on_device(), "expert parallelism on the GPU needs a host and a device Comm");
  HONE_CHECK(host.size() == device.size() && host.rank() == device.rank(), "the host and device expert groups differ");
  plans_.resize(size_t(c.num_hidden_layers));
  const int first = layout_.shape().expert_begin;
  for (const ParamShard& f : full_.params()) {
    if (!f.expert() || f.spec.expert != 0) continue;
    for (const ParamShard& p : layout_.params())
      if (p.expert() && p.spec.layer == f.spec.layer && p.spec.param == f.spec.param && p.spec.expert == first) {
        blocks_.push_back({p.offset, f.offset, int64_t(El_) * p.local_numel()});
        break;
      }
  }
}

int64_t GpuExpertParallel::plan(int layer, const int64_t* counts, int64_t* expert_counts) {
  Plan& pl = plans_.at(size_t(layer));
  pl.rows = plan_expert_exchange(host_, El_, counts, expert_counts, pl.exchange);
  // Expert-side row p <- received row source[p], and the inverse for the combine, as device row gathers.
  const std::vector<int64_t>& src = pl.exchange.source;
  source_.resize(src.size());
  inverse_.resize(src.size());
  for (size_t p = 0; p < src.size(); ++p) {
    source_[p] = int32_t(src[p]);
    inverse_[size_t(src[p])] = int32_t(p);
  }
  if (pl.source.size() < pl.rows) {
    pl.source = DeviceArray<int32_t>(pl.rows, "expert rows' sources");
    pl.inverse = DeviceArray<int32_t>(pl.rows, "expert rows' places");
  }
  if (pl.rows > 0) {
    CUDA_CHECK(cudaMemcpyAsync(pl.source.get(), source_.data(), source_.size() * sizeof(int32_t),
                               cudaMemcpyHostToDevice, ctx_.stream));
    CUDA_CHECK(cudaMemcpyAsync(pl.inverse.get(), inverse_.data(), inverse_.size() * sizeof(int32_t),
                               cudaMemcpyHostToDevice, ctx_.stream));
    CUDA_CHECK(cudaStreamSynchronize(ctx_.stream));  // the next plan rewrites the host vectors
  }
  return pl.rows;
}

void GpuExpertParallel::dispatch(int layer, const cuda::bf16* token_rows, cuda::bf16* expert_rows, int64_t row) {
  const Plan& pl = plans_.at(size_t(layer));
  if (stage_.size() < pl.rows * row) stage_ = DeviceArray<cuda::bf16>(pl.rows * row, "expert rows in transit");
  rows_to_elements(pl.exchange.send_rows, row, a_);
  rows_to_elements(pl.exchange.send_offsets, row, b_);
  rows_to_elements(pl.exchange.recv_rows, row, c_);
  rows_to_elements(pl.exchange.recv_offsets, row, d_);
  device_.all_to_allv(reinterpret_cast<const uint16_t*>(token_rows), a_, b_, reinterpret_cast<uint16_t*>(stage_.get()),
                      c_, d_);
  cuda::moe_permute_forward(expert_rows, stage_.get(), pl.source.get(), int(pl.rows), int(row), ctx_);
}

void GpuExpertParallel::combine(int layer, const cuda::bf16* expert_rows, cuda::bf16* token_rows, int64_t row) {
  const Plan& pl = plans_.at(size_t(layer));
  if (stage_.size() < pl.rows * row) stage_ = DeviceArray<cuda::bf16>(pl.rows * row, "expert rows in transit");
  cuda::moe_permute_forward(stage_.get(), expert_rows, pl.inverse.get(), int(pl.rows), int(row), ctx_);
  rows_to_elements(pl.exchange.recv_rows, row, a_);
  rows_to_elements(pl.exchange.recv_offsets, row, b_);
  rows_to_elements(pl.exchange.send_rows, row, c_);
  rows_to_elements(pl.exchange.send_offsets, row, d_);
  device_.all_to_allv(reinterpret_cast<const uint16_t*>(stage_.get()), a_, b_, reinterpret_cast<uint16_t*>(token_rows),
                      c_, d_);
}

template <typename T>
void GpuExpertParallel::gather_experts(const T* local, T* full) const {
  using Wire = std::conditional_t<sizeof(T) == 2, uint16_t, float>;
  CUDA_CHECK(cudaMemcpyAsync(full, local, size_t(layout_.num_dense_params()) * sizeof(T), cudaMemcpyDeviceToDevice,
                             ctx_.stream));
  for (const ExpertBlock& b : blocks_)
    device_.all_gather(reinterpret_cast<const Wire*>(local + b.local), reinterpret_cast<Wire*>(full + b.full), b.n);
}
template void GpuExpertParallel::gather_experts<cuda::bf16>(const cuda::bf16*, cuda::bf16*) const;
template void GpuExpertParallel::gather_experts<float>(const float*, float*) const;

void GpuExpertParallel::gather_experts_host(const float* local, float* full) const {
  std::memcpy(full, local, size_t(layout_.num_dense_params()) * sizeof(float));
  for (const ExpertBlock& b : blocks_) host_.all_gather(local + b.local, full + b.full, b.n);
}

}  // namespace hone

#endif  // HONE_CUDA
