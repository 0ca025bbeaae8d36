// The GPU engine's tensor-parallel collectives (what crosses ranks and why: gpu_tensor_parallel.h).
#include "parallel/gpu_tensor_parallel.h"

#if HONE_CUDA

#include <algorithm>

#include "comm/nccl_comm.h"
#include "cuda/check.h"
#include "runtime/error.h"

namespace hone {

GpuTensorParallel::GpuTensorParallel(const ModelConfig& c, DeviceComm& tp, const cuda::GpuContext& ctx,
                                     SequenceParallelism sp, const ShardLayout* stage)
    : tp_(tp), ctx_(ctx), layout_(stage ? *stage : ShardLayout::of(c, tp.size(), tp.rank())), whole_rows_(*this) {
  HONE_CHECK(tp.on_device(), "the GPU tensor-parallel group needs a device Comm (NCCL)");
  if (sp.on && tp.size() > 1)
    sequence_ = std::make_unique<GpuSequenceParallel>(tp, ctx, c.hidden_size, sp.overlap, sp.chunks);
}

LayerCollectives<bf16>* GpuTensorParallel::layers() {
  if (sequence_) return sequence_.get();
  return &whole_rows_;
}

void GpuTensorParallel::sum_partial_gradients(float* grads) {
  for (const ParamShard& p : layout_.params()) {
    float* g = grads + p.offset;
    // Under sequence parallelism every rank normed its own tokens: the norm weights' gradients are partial too.
    const bool token_norm = sequence_ && p.spec.split == Split::replicated;
    if (!p.partial_grad && !token_norm) continue;
    if (p.slice.dim < 0) {
      tp_.all_reduce_sum(g, p.local_numel());
    } else {
      // The ranks sharing a KV head hold partial gradients of it: summed in the whole tensor, own rows taken back.
      if (kv_whole_.size() < p.spec.numel()) kv_whole_ = DeviceArray<float>(p.spec.numel(), "replicated KV gradient");
      float* whole = kv_whole_.get();
      CUDA_CHECK(cudaMemsetAsync(whole, 0, size_t(p.spec.numel()) * sizeof(float), ctx_.stream));
      const std::vector<ShardRun> runs = ShardLayout::runs(p);
      for (const ShardRun& r : runs)
        if (r.valid)
          CUDA_CHECK(cudaMemcpyAsync(whole + r.whole, g + r.local, size_t(r.n) * sizeof(float),
                                     cudaMemcpyDeviceToDevice, ctx_.stream));
      tp_.all_reduce_sum(whole, p.spec.numel());
      for (const ShardRun& r : runs)
        if (r.valid)
          CUDA_CHECK(cudaMemcpyAsync(g + r.local, whole + r.whole, size_t(r.n) * sizeof(float),
                                     cudaMemcpyDeviceToDevice, ctx_.stream));
    }
  }
}

double GpuTensorParallel::weighted_sum_squares(const float* g, int64_t begin, int64_t n) const {
  return layout_.weighted_sum_squares(begin, n, [&](int64_t off, int64_t count) {
    return cuda::sum_squares(g + off, count, ctx_);
  });
}

template <typename T>
T GpuTensorParallel::scalar_all_reduce(T x, bool min) {
  static_assert(sizeof(T) == sizeof(double), "the device scalar holds 8 bytes");
  if (size() == 1) return x;
  if (scalar_.size() < 1) scalar_ = DeviceArray<double>(1, "tensor-parallel scalar");
  T* d = reinterpret_cast<T*>(scalar_.get());
  CUDA_CHECK(cudaMemcpyAsync(d, &x, sizeof(T), cudaMemcpyHostToDevice, ctx_.stream));
  if (min) tp_.all_reduce_min(d, d, 1);
  else tp_.all_reduce_sum(d, 1);
  CUDA_CHECK(cudaMemcpyAsync(&x, d, sizeof(T), cudaMemcpyDeviceToHost, ctx_.stream));
  CUDA_CHECK(cudaStreamSynchronize(ctx_.stream));
  return x;
}

double GpuTensorParallel::sum_over_group(double x) { return scalar_all_reduce(x, /*min=*/false); }
int64_t GpuTensorParallel::min_over_group(int64_t v) { return scalar_all_reduce(v, /*min=*/true); }

ShardedNorm GpuTensorParallel::sharded_norm() {
  ShardedNorm n;
  n.weighted_sum_squares = [this](const float* g, int64_t begin, int64_t count) {
    return weighted_sum_squares(g, begin, count);
  };
  n.sum = [this](double x) { return sum_over_group(x); };
  return n;
}

void GpuTensorParallel::synchronize(const std::string& what) {
  if (auto* nccl = dynamic_cast<NcclComm*>(&tp_)) nccl->watch_stream(what);
  else CUDA_CHECK(cudaStreamSynchronize(ctx_.stream));
}

void GpuTensorParallel::reserve_logits(int max_rows) {
  const int64_t n = int64_t(max_rows) * shape().vocab * size();
  if (logits_stage_.size() < n) {
    logits_stage_ = DeviceArray<float>();
    logits_stage_ = DeviceArray<float>(n, "vocabulary-parallel logits");
  }
}

void GpuTensorParallel::lm_head_logits(float* logits, const bf16* h, const bf16* w, int R) {
  const LayerShape& s = shape();
  if (R == 0) return;
  const int64_t block = int64_t(R) * s.vocab;
  HONE_CHECK(logits_stage_.size() >= block * size(), "lm_head_logits of ", R, " rows: reserve_logits() first");
  float* stage = logits_stage_.get();
  float* mine = stage + int64_t(rank()) * block;
  cuda::lm_head_logits(mine, h, w, R, s.hidden, s.vocab, ctx_);
  tp_.all_gather_in_place(stage, block);
  // Block r holds rows x [vocabulary r*vocab, (r+1)*vocab): the whole row is the blocks side by side, less padding.
  for (int r = 0; r < size(); ++r) {
    const int valid = std::clamp(s.vocab_total - r * s.vocab, 0, s.vocab);
    if (valid == 0) continue;
    CUDA_CHECK(cudaMemcpy2DAsync(logits + int64_t(r) * s.vocab, size_t(s.vocab_total) * sizeof(float),
                                 stage + int64_t(r) * block, size_t(s.vocab) * sizeof(float),
                                 size_t(valid) * sizeof(float), size_t(R), cudaMemcpyDeviceToDevice, ctx_.stream));
  }
}

void GpuTensorParallel::all_reduce_bf16(bf16* x, int64_t n) {
  tp_.all_reduce_sum(reinterpret_cast<uint16_t*>(x), n);
}

void GpuTensorParallel::WholeRows::gather_sequence(const bf16*, bf16*, int64_t) {
  HONE_CHECK(false, "whole token rows are never gathered");
}

void GpuTensorParallel::WholeRows::reduce_row_parallel_output(bf16* y, bf16* out, int64_t n) {
  tp_.all_reduce_bf16(y, n);
  if (out != y)
    CUDA_CHECK(cudaMemcpyAsync(out, y, size_t(n) * sizeof(bf16), cudaMemcpyDeviceToDevice, tp_.ctx_.stream));
}

bf16* GpuTensorParallel::rows_scratch(int64_t n) {
  if (rows_.size() < n) {
    rows_ = DeviceArray<bf16>();
    rows_ = DeviceArray<bf16>(n, "tensor-parallel rows");
  }
  return rows_.get();
}

void GpuTensorParallel::gather_rows(const bf16* local, bf16* full, int T) {
  HONE_CHECK(sequence_ && T % size() == 0, "gather_rows needs sequence parallelism and a multiple of ", size(),
             " tokens, got ", T);
  sequence_->gather_sequence(local, full, int64_t(T / size()) * shape().hidden);
}

int GpuTensorParallel::vocab_valid() const {
  const LayerShape& s = shape();
  return std::clamp(s.vocab_total - s.vocab_begin, 0, s.vocab);
}

void GpuTensorParallel::embedding_forward(bf16* out, const int32_t* ids, const bf16* wte, int T, bool local) {
  const LayerShape& s = shape();
  const int64_t n = int64_t(T) * s.hidden;
  if (!local) {
    cuda::embedding_slice_forward(out, ids, wte, T, s.hidden, s.vocab_begin, s.vocab, ctx_);
    all_reduce_bf16(out, n);
    return;
  }
  HONE_CHECK(sequence_ && T % size() == 0, "sequence parallelism needs a multiple of ", size(), " tokens, got ", T);
  bf16* full = rows_scratch(n);
  cuda::embedding_slice_forward(full, ids, wte, T, s.hidden, s.vocab_begin, s.vocab, ctx_);
  sequence_->scatter_sum(full, out, n);
}

void GpuTensorParallel::embedding_backward(float* dwte, const bf16* dout, const int32_t* ids, int T, bool local) {
  const LayerShape& s = shape();
  if (local) {
    bf16* full = rows_scratch(int64_t(T) * s.hidden);
    gather_rows(dout, full, T);
    dout = full;
  }
  cuda::embedding_slice_backward(dwte, dout, ids, T, s.hidden, s.vocab_begin, s.vocab, ctx_);
}

void GpuTensorParallel::lm_head_forward(float* logprob, float* entropy, float* lse, const bf16* h, const bf16* w,
                                        const int32_t* targets, int T, float temperature, int chunk_v) {
  const LayerShape& s = shape();
  if (stats_.size() < 4 * int64_t(T)) stats_ = DeviceArray<float>(4 * int64_t(T));
  if (max_.size() < int64_t(T)) max_ = DeviceArray<float>(int64_t(T));
  cuda::lm_head_vocab_slice_forward(stats_.get(), h, w, targets, T, s.hidden, s.vocab, s.vocab_begin, vocab_valid(),
                                    temperature, chunk_v, ctx_);
  tp_.all_reduce_max(stats_.get(), max_.get(), T);
  cuda::lm_head_stats_rescale(stats_.get(), max_.get(), T, ctx_);
  tp_.all_reduce_sum(stats_.get() + T, 3 * int64_t(T));
  cuda::lm_head_stats_finish(logprob, entropy, lse, stats_.get(), targets, T, ctx_);
}

void GpuTensorParallel::lm_head_backward(bf16* dh, float* dw, const float* dlogprob, const float* dentropy,
                                         const bf16* h, const bf16* w, const int32_t* targets, const float* lse,
                                         const float* entropy, int T, float temperature, int chunk_v, bool local) {
  const LayerShape& s = shape();
  // The slice's partial input gradient is summed over the group: dh must start without other ranks' partials, so
  // it is formed here from zero and added in.
  const int64_t n = int64_t(T) * s.hidden;
  bf16* partial = rows_scratch(n);
  CUDA_CHECK(cudaMemsetAsync(partial, 0, size_t(n) * sizeof(bf16), ctx_.stream));
  cuda::lm_head_vocab_slice_backward(partial, dw, dlogprob, dentropy, h, w, targets, lse, entropy, T, s.hidden,
                                     s.vocab, s.vocab_begin, vocab_valid(), temperature, chunk_v, ctx_);
  if (!local) {
    all_reduce_bf16(partial, n);
    cuda::add_forward(dh, dh, partial, n, ctx_);
    return;
  }
  HONE_CHECK(sequence_ && T % size() == 0, "sequence parallelism needs a multiple of ", size(), " tokens, got ", T);
  const int64_t m = n / size();
  if (dh_local_.size() < m) {
    dh_local_ = DeviceArray<bf16>();
    dh_local_ = DeviceArray<bf16>(m, "LM head input gradient rows");
  }
  sequence_->scatter_sum(partial, dh_local_.get(), n);
  cuda::add_forward(dh, dh, dh_local_.get(), m, ctx_);
}

}  // namespace hone

#endif  // HONE_CUDA
