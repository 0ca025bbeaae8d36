// The CUDA backend: bf16 activations and compute weights on the device (fp32 statistics, fp32 parameter gradients),
// the ops of cuda/ops_cuda.h asynchronous on one stream, per-op timing when a profiler is given. The same op table
// as backend/cpu_backend.h, op for op; each CUDA op is the fused kernel the CPU composes from its reference ops.
#pragma once

#if HONE_CUDA

#include <cstddef>
#include <cstdint>

#include <memory>

#include "backend/op_profiler.h"
#include "backend/overlapped_transfers.h"
#include "backend/sequence_overlap.h"
#include "cuda/check.h"
#include "cuda/context_parallel_kernels.h"
#include "cuda/device_memory.h"
#include "cuda/generation_ops.h"
#include "cuda/lm_head_kernels.h"
#include "cuda/moe_ops.h"
#include "cuda/ops_cuda.h"

namespace hone {

using bf16 = cuda::bf16;

// n elements of pinned host memory (the GPU's B::HostStaging: device copies into it run without the host waiting),
// freed by its destructor; moves, never copies. Uninitialized.
template <typename T>
class PinnedHostArray {
 public:
  PinnedHostArray() = default;
  explicit PinnedHostArray(int64_t n, const char* /*what*/ = "pinned host buffer") : n_(n) {
    CUDA_CHECK(cudaMallocHost(reinterpret_cast<void**>(&p_), size_t(n > 0 ? n : 1) * sizeof(T)));
  }
  ~PinnedHostArray() {
    if (p_) cudaFreeHost(p_);
  }
  PinnedHostArray(PinnedHostArray&& o) noexcept : p_(o.p_), n_(o.n_) { o.p_ = nullptr, o.n_ = 0; }
  PinnedHostArray& operator=(PinnedHostArray&& o) {
    if (this != &o) {
      if (p_) CUDA_CHECK(cudaFreeHost(p_));
      p_ = o.p_;
      n_ = o.n_;
      o.p_ = nullptr;
      o.n_ = 0;
    }
    return *this;
  }
  PinnedHostArray(const PinnedHostArray&) = delete;
  PinnedHostArray& operator=(const PinnedHostArray&) = delete;
  T* get() const { return p_; }
  int64_t size() const { return n_; }
  size_t bytes() const { return size_t(n_) * sizeof(T); }

 private:
  T* p_ = nullptr;
  int64_t n_ = 0;
};

class CudaGenerationRegion;
class CudaDecodeGraphs;
bool cuda_generation_keeps_addresses(bool tensor_parallel);

struct CudaBackend {
  using Act = cuda::bf16;
  static constexpr const char* kName = "cuda";
  static constexpr size_t kAlignment = 256;  // carved regions (backend/carver.h)

  // The stream, library handles and workspace (the GpuContext, which outlives every Exec made from it) and the
  // per-op profiler (null: no timing).
  struct Exec {
    Exec() = default;
    Exec(const cuda::GpuContext* g, GpuOpProfiler* p = nullptr) : gpu(g), prof(p) {}
    Exec(const cuda::GpuContext& g) : gpu(&g) {}  // NOLINT: a context is where its ops run
    const cuda::GpuContext* gpu = nullptr;
    GpuOpProfiler* prof = nullptr;
    const cuda::GpuContext& ctx() const { return *gpu; }
  };
  struct Scope {
    Scope(const Exec& x, const char* family) : scope(x.prof, family) {}
    ProfileScope scope;
  };

  template <typename T>
  using Array = DeviceArray<T>;
  template <typename T>
  using HostStaging = PinnedHostArray<T>;
  static constexpr bool kDeviceMemory = true;  // buffers are device memory (a Comm over them is a device one)
  // A pass's arena lives in device memory (an allocator of its own: its counters are the arena's).
  static std::shared_ptr<ArenaAllocator> arena_allocator() { return cuda::device_arena_allocator(); }
  // Whether a training forward keeps the LM head's logits for its backward by default (fp16 tiles: cheaper than
  // forming them again).
  static constexpr bool kKeepLogits = true;

  static void zero(const Exec& x, void* p, size_t bytes) { CUDA_CHECK(cudaMemsetAsync(p, 0, bytes, x.gpu->stream)); }
  // Copies on the stream, within the device, from and to (pinned or pageable) host memory; sync waits for them.
  static void copy(const Exec& x, void* dst, const void* src, size_t bytes) {
    CUDA_CHECK(cudaMemcpyAsync(dst, src, bytes, cudaMemcpyDeviceToDevice, x.gpu->stream));
  }
  static void upload(const Exec& x, void* dst, const void* host, size_t bytes) {
    CUDA_CHECK(cudaMemcpyAsync(dst, host, bytes, cudaMemcpyHostToDevice, x.gpu->stream));
  }
  static void download(const Exec& x, void* host, const void* src, size_t bytes) {
    CUDA_CHECK(cudaMemcpyAsync(host, src, bytes, cudaMemcpyDeviceToHost, x.gpu->stream));
  }
  static void sync(const Exec& x) { CUDA_CHECK(cudaStreamSynchronize(x.gpu->stream)); }
  // n fp32 master weights from the host into bf16 compute weights, through a bounded fp32 staging buffer; returns
  // when done.
  static void upload_weights(const Exec& x, Act* dst, const float* host, int64_t n) {
    const int64_t chunk = n < (int64_t(1) << 26) ? (n > 0 ? n : 1) : int64_t(1) << 26;  // 256 MiB of fp32
    DeviceArray<float> staging(chunk, "weight upload staging");
    for (int64_t off = 0; off < n; off += chunk) {
      const int64_t k = n - off < chunk ? n - off : chunk;
      upload(x, staging.get(), host + off, size_t(k) * sizeof(float));
      cuda::f32_to_bf16(dst + off, staging.get(), k, *x.gpu);
    }
    sync(x);  // the staging buffer is freed on return
  }
  // Transfers beside the compute (backend/overlapped_transfers.h): over NCCL on a stream of their own.
  using OverlappedTransfers = CudaOverlappedTransfers;
  static OverlappedTransfers overlapped_transfers(Comm& comm, const Exec& x) {
    return OverlappedTransfers(comm, *x.gpu);
  }
  // Tensor parallelism (parallel/tensor_parallel.h): sequence parallelism's collectives beside the GEMMs, on a
  // communication stream with overlap (backend/sequence_overlap.h), and the vocabulary-parallel pieces as the CPU's.
  using SequenceOverlap = CudaSequenceOverlap;
  static SequenceOverlap sequence_overlap(Comm& comm, const Exec& x, bool overlap, int marks) {
    return SequenceOverlap(comm, *x.gpu, overlap, marks);
  }
  static void embedding_slice_forward(const Exec& x, Act* out, const int32_t* ids, const Act* wte, int T, int C,
                                      int vocab_begin, int V) {
    cuda::embedding_slice_forward(out, ids, wte, T, C, vocab_begin, V, *x.gpu);
  }
  static void embedding_slice_backward(const Exec& x, float* dwte, const Act* dout, const int32_t* ids, int T, int C,
                                       int vocab_begin, int V) {
    cuda::embedding_slice_backward(dwte, dout, ids, T, C, vocab_begin, V, *x.gpu);
  }
  static void lm_head_vocab_slice_forward(const Exec& x, float* stats, const Act* h, const Act* w,
                                          const int32_t* targets, int T, int C, int V, int vocab_begin,
                                          int vocab_valid, float temperature, int chunk_v) {
    cuda::lm_head_vocab_slice_forward(stats, h, w, targets, T, C, V, vocab_begin, vocab_valid, temperature, chunk_v,
                                      *x.gpu);
  }
  static void lm_head_stats_rescale(const Exec& x, float* stats, const float* max, int T) {
    cuda::lm_head_stats_rescale(stats, max, T, *x.gpu);
  }
  static void lm_head_stats_finish(const Exec& x, float* logprob, float* entropy, float* lse, const float* stats,
                                   const int32_t* targets, int T) {
    cuda::lm_head_stats_finish(logprob, entropy, lse, stats, targets, T, *x.gpu);
  }
  static void lm_head_vocab_slice_backward(const Exec& x, Act* dh, float* dw, const float* dlogprob,
                                           const float* dentropy, const Act* h, const Act* w,
                                           const int32_t* targets, const float* lse, const float* entropy, int T,
                                           int C, int V, int vocab_begin, int vocab_valid, float temperature,
                                           int chunk_v) {
    cuda::lm_head_vocab_slice_backward(dh, dw, dlogprob, dentropy, h, w, targets, lse, entropy, T, C, V, vocab_begin,
                                       vocab_valid, temperature, chunk_v, *x.gpu);
  }
  static void lm_head_logits(const Exec& x, float* logits, const Act* h, const Act* w, int T, int C, int V) {
    cuda::lm_head_logits(logits, h, w, T, C, V, *x.gpu);
  }
  // Waits for the stream (the value is the host's).
  static double sum_squares(const Exec& x, const float* in, int64_t n) { return cuda::sum_squares(in, n, *x.gpu); }

  // fp32 and bf16, and fp32 accumulations of bf16 values: dst += src (fp32 dst), dst = bf16(dst + src) (bf16 dst:
  // one rounding for a gradient accumulated in fp32).
  static void act_to_f32(const Exec& x, float* out, const Act* in, int64_t n) { cuda::bf16_to_f32(out, in, n, *x.gpu); }
  static void f32_to_act(const Exec& x, Act* out, const float* in, int64_t n) { cuda::f32_to_bf16(out, in, n, *x.gpu); }
  static void accumulate_act_into_f32(const Exec& x, float* dst, const Act* src, int64_t n) {
    cuda::accumulate_bf16_into_f32(dst, src, n, *x.gpu);
  }
  static void accumulate_f32_into_act(const Exec& x, Act* dst, const float* src, int64_t n) {
    cuda::accumulate_f32_into_bf16(dst, src, n, *x.gpu);
  }

  static void scatter_rows_f32(const Exec& x, float* full, const float* all, const int32_t* rows, int64_t n) {
    cuda::scatter_rows_f32(full, all, rows, n, *x.gpu);
  }
  static void take_rows_f32(const Exec& x, float* local, const float* full, const int32_t* rows, int64_t n) {
    cuda::take_rows_f32(local, full, rows, n, *x.gpu);
  }
  static void embedding_forward(const Exec& x, Act* out, const int32_t* ids, const Act* wte, int T, int C) {
    cuda::embedding_forward(out, ids, wte, T, C, *x.gpu);
  }
  static void embedding_backward(const Exec& x, float* dwte, const Act* dout, const int32_t* ids, int T, int C) {
    cuda::embedding_backward(dwte, dout, ids, T, C, *x.gpu);
  }
  static void lm_head_logprob_forward(const Exec& x, float* logprob, float* entropy, float* lse, const Act* h,
                                      const Act* w, const int32_t* targets, int T, int C, int V, float temperature,
                                      int chunk_v) {
    cuda::lm_head_logprob_forward(logprob, entropy, lse, h, w, targets, T, C, V, temperature, chunk_v, *x.gpu);
  }
  static void lm_head_logprob_backward(const Exec& x, Act* dh, float* dw, const float* dlogprob,
                                       const float* dentropy, const Act* h, const Act* w, const int32_t* targets,
                                       const float* lse, const float* entropy, int T, int C, int V,
                                       float temperature, int chunk_v) {
    cuda::lm_head_logprob_backward(dh, dw, dlogprob, dentropy, h, w, targets, lse, entropy, T, C, V, temperature,
                                   chunk_v, *x.gpu);
  }
  static size_t lm_head_saved_bytes(int T, int V, int chunk_v) { return cuda::lm_head_saved_bytes(T, V, chunk_v); }
  static void lm_head_saved_forward(const Exec& x, float* logprob, float* entropy, float* lse, void* saved,
                                    const Act* h, const Act* w, const int32_t* targets, int T, int C, int V,
                                    float temperature, int chunk_v) {
    cuda::lm_head_saved_forward(logprob, entropy, lse, saved, h, w, targets, T, C, V, temperature, chunk_v, *x.gpu);
  }
  static void lm_head_saved_backward(const Exec& x, Act* dh, float* dw, const float* dlogprob, const float* dentropy,
                                     const Act* h, const Act* w, const int32_t* targets, const float* lse,
                                     const float* entropy, void* saved, int T, int C, int V, float temperature,
                                     int chunk_v) {
    cuda::lm_head_saved_backward(dh, dw, dlogprob, dentropy, h, w, targets, lse, entropy, saved, T, C, V,
                                 temperature, chunk_v, *x.gpu);
  }

  static void rmsnorm_forward(const Exec& x, Act* out, float* rstd, const Act* in, const Act* w, int rows, int C,
                              float eps) {
    cuda::rmsnorm_forward(out, rstd, in, w, rows, C, eps, *x.gpu);
  }
  static void rmsnorm_backward(const Exec& x, Act* dx, float* dw, const Act* dout, const Act* in, const Act* w,
                               const float* rstd, int rows, int C, bool accumulate) {
    cuda::rmsnorm_backward(dx, dw, dout, in, w, rstd, rows, C, accumulate, *x.gpu);
  }
  static void add_rmsnorm_forward(const Exec& x, Act* sum, Act* out, float* rstd, const Act* a, const Act* b,
                                  const Act* w, int rows, int C, float eps) {
    cuda::add_rmsnorm_forward(sum, out, rstd, a, b, w, rows, C, eps, *x.gpu);
  }
  static void add_forward(const Exec& x, Act* out, const Act* a, const Act* b, int64_t N) {
    cuda::add_forward(out, a, b, N, *x.gpu);
  }
  static void linear_forward(const Exec& x, Act* out, const Act* in, const Act* w, const Act* bias, int T, int IC,
                             int OC) {
    cuda::linear_forward(out, in, w, bias, T, IC, OC, *x.gpu);
  }
  static void linear_forward_pair(const Exec& x, Act* out0, Act* out1, const Act* in, const Act* w0, const Act* w1,
                                  int T, int IC, int OC) {
    cuda::linear_forward_pair(out0, out1, in, w0, w1, T, IC, OC, *x.gpu);
  }
  static void linear_backward(const Exec& x, Act* dx, float* dw, float* dbias, const Act* dout, const Act* in,
                              const Act* w, int T, int IC, int OC, bool accumulate_dx) {
    cuda::linear_backward(dx, dw, dbias, dout, in, w, T, IC, OC, accumulate_dx, *x.gpu);
  }
  static void rope_forward(const Exec& x, Act* out, const Act* in, const int32_t* pos, const float* inv_freq, int T,
                           int H, int D, int64_t ldx) {
    cuda::rope_forward(out, in, pos, inv_freq, T, H, D, *x.gpu, ldx);
  }
  static void rope_backward(const Exec& x, Act* dx, const Act* dout, const int32_t* pos, const float* inv_freq, int T,
                            int H, int D, bool accumulate) {
    cuda::rope_backward(dx, dout, pos, inv_freq, T, H, D, accumulate, *x.gpu);
  }
  static void qk_norm_rope_forward(const Exec& x, Act* out, float* rstd, const Act* in, const Act* w,
                                   const int32_t* pos, const float* inv_freq, int T, int H, int D, float eps,
                                   int64_t ldx) {
    cuda::qk_norm_rope_forward(out, rstd, in, w, pos, inv_freq, T, H, D, eps, *x.gpu, ldx);
  }
  static void qk_norm_rope_backward(const Exec& x, Act* dx, float* dw, const Act* dout, const Act* in, const Act* w,
                                    const float* rstd, const int32_t* pos, const float* inv_freq, int T, int H,
                                    int D) {
    cuda::qk_norm_rope_backward(dx, dw, dout, in, w, rstd, pos, inv_freq, T, H, D, *x.gpu);
  }
  static void attention_forward(const Exec& x, Act* out, float* lse, const Act* q, const Act* k, const Act* v,
                                const int32_t* cu_seqlens, int num_seqs, int max_seqlen, int T, int Hq, int Hkv,
                                int D, float scale) {
    cuda::attention_forward(out, lse, q, k, v, cu_seqlens, num_seqs, max_seqlen, T, Hq, Hkv, D, scale, *x.gpu);
  }
  static void attention_backward(const Exec& x, Act* dq, Act* dk, Act* dv, const Act* dout, const Act* out,
                                 const float* lse, const Act* q, const Act* k, const Act* v,
                                 const int32_t* cu_seqlens, int num_seqs, int max_seqlen, int T, int Hq, int Hkv,
                                 int D, float scale) {
    cuda::attention_backward(dq, dk, dv, dout, out, lse, q, k, v, cu_seqlens, num_seqs, max_seqlen, T, Hq, Hkv, D,
                             scale, *x.gpu);
  }
  // The running output of the merge is fp32 (rounded to bf16 once, after the last block), a block's is bf16.
  static void attention_block_forward(const Exec& x, Act* out, float* lse, const Act* q, const Act* k, const Act* v,
                                      const AttentionSegments& seg, int Tq, int Tkv, int Hq, int Hkv, int D,
                                      float scale) {
    cuda::attention_block_forward(out, lse, q, k, v, seg, Tq, Tkv, Hq, Hkv, D, scale, *x.gpu);
  }
  static void attention_block_backward(const Exec& x, Act* dq, Act* dk, Act* dv, const Act* dout, const Act* out,
                                       const float* lse, const Act* q, const Act* k, const Act* v,
                                       const AttentionSegments& seg, int Tq, int Tkv, int Hq, int Hkv, int D,
                                       float scale) {
    cuda::attention_block_backward(dq, dk, dv, dout, out, lse, q, k, v, seg, Tq, Tkv, Hq, Hkv, D, scale, *x.gpu);
  }
  static void attention_merge_forward(const Exec& x, float* out, float* lse, const Act* block_out,
                                      const float* block_lse, const AttentionSegments& seg, int T, int H, int D) {
    cuda::attention_merge_forward(out, lse, block_out, block_lse, seg, T, H, D, *x.gpu);
  }
  static void policy_loss_forward(const Exec& x, double* stats, const float* new_lp, const float* old_lp,
                                  const float* gen_lp, const float* ref_lp, const float* entropy, const uint8_t* mask,
                                  const int64_t* seq_offsets, const float* advantages, int T, int num_seqs,
                                  const PolicyLossConfig& config, double denominator) {
    cuda::policy_loss_forward(stats, new_lp, old_lp, gen_lp, ref_lp, entropy, mask, seq_offsets, advantages, T,
                              num_seqs, config, denominator, *x.gpu);
  }
  static void policy_loss_backward(const Exec& x, float* dnew_lp, float* dentropy, const float* new_lp,
                                   const float* old_lp, const float* gen_lp, const float* ref_lp, const uint8_t* mask,
                                   const int64_t* seq_offsets, const float* advantages, int T, int num_seqs,
                                   const PolicyLossConfig& config, double denominator) {
    cuda::policy_loss_backward(dnew_lp, dentropy, new_lp, old_lp, gen_lp, ref_lp, mask, seq_offsets, advantages, T,
                               num_seqs, config, denominator, *x.gpu);
  }
  static void moe_permute_forward(const Exec& x, Act* xp, const Act* in, const int32_t* token_of, int N, int C) {
    cuda::moe_permute_forward(xp, in, token_of, N, C, *x.gpu);
  }
  static void swiglu_forward(const Exec& x, Act* out, const Act* gate, const Act* up, int64_t N) {
    cuda::swiglu_forward(out, gate, up, N, *x.gpu);
  }

  // Generation (generation/generation_forward.h): the paged KV cache's kernels, paged decode attention, the fused
  // sampler and the stop checks; its memory regions and decode steps (backend/cuda_generation_memory.h: virtual
  // memory, CUDA graphs), the most rows a pass decodes together, and the device's free memory (the KV cache takes
  // a fraction of it).
  using GenerationRegion = CudaGenerationRegion;
  using DecodeSteps = CudaDecodeGraphs;
  static constexpr int kMaxDecodeRows = 1024;
  static bool generation_keeps_addresses(bool tensor_parallel) {
    return cuda_generation_keeps_addresses(tensor_parallel);
  }
  static size_t free_memory_bytes(const Exec&) {
    size_t free_b = 0, total_b = 0;
    CUDA_CHECK(cudaMemGetInfo(&free_b, &total_b));
    return free_b;
  }
  static void kv_append(const Exec& x, Act* k_pool, Act* v_pool, const Act* k, const Act* v, const int32_t* slots,
                        int T, int Hkv, int D, int block_size, int64_t ldv) {
    cuda::kv_append(k_pool, v_pool, k, v, slots, T, Hkv, D, block_size, *x.gpu, ldv);
  }
  static void kv_copy_blocks(const Exec& x, Act* k_pool, Act* v_pool, const int32_t* src, const int32_t* dst, int n,
                             int Hkv, int D, int block_size) {
    cuda::kv_copy_blocks(k_pool, v_pool, src, dst, n, Hkv, D, block_size, *x.gpu);
  }
  static void paged_attention_decode_forward(const Exec& x, Act* out, const Act* q, const Act* k_pool,
                                             const Act* v_pool, const PagedDecodeArgs& a, int Hq, int Hkv, int D,
                                             float scale) {
    cuda::paged_attention_decode_forward(out, q, k_pool, v_pool, a, Hq, Hkv, D, scale, *x.gpu);
  }
  static size_t paged_attention_decode_workspace(const Exec& x, const PagedDecodeArgs& a, int Hq, int D) {
    return cuda::paged_attention_decode_workspace(a, Hq, D, *x.gpu);
  }
  // top_k at or above the vocabulary is off (0) for the kernel.
  static void sample_tokens(const Exec& x, int32_t* tokens, float* logprobs, const float* logits, int64_t ld, int B,
                            int V, const SamplingParams& p, uint64_t seed, uint32_t step, const int32_t* sample_index,
                            const int32_t* position) {
    cuda::GpuSamplingParams g;
    g.temperature = p.temperature;
    g.top_k = p.top_k >= V ? 0 : int(p.top_k);
    g.top_p = p.top_p;
    g.min_p = p.min_p;
    g.greedy = p.greedy;
    cuda::sample_tokens(tokens, logprobs, logits, ld, B, V, g, seed, step, sample_index, position, *x.gpu);
  }
  static void check_stops(const Exec& x, int32_t* done, const int32_t* tokens, const int32_t* gen_len,
                          const int32_t* seq_len, const int32_t* max_new, int max_total, const int32_t* stop_ids,
                          int n_stop, int B) {
    cuda::check_stops(done, tokens, gen_len, seq_len, max_new, max_total, stop_ids, n_stop, B, *x.gpu);
  }
  static void swiglu_backward(const Exec& x, Act* dgate, Act* dup, const Act* dout, const Act* gate, const Act* up,
                              int64_t N, bool accumulate) {
    cuda::swiglu_backward(dgate, dup, dout, gate, up, N, accumulate, *x.gpu);
  }
};

}  // namespace hone

#endif  // HONE_CUDA
