// The CPU backend: fp32 activations and weights in host memory, the reference ops of src/ops/cpu run as they are
// called. The model above (model/, parallel/, generation/) is written once as templates over a backend B and reads
// from it: B::Act (the activations' and compute weights' element type), B::Exec (what an op needs to run besides
// its tensors), B::Scope (per-op timing) and the op table, one static function per op with the signature of
// src/ops/ops.h and the Exec first. Fused ops the GPU needs (add + RMSNorm) are composed here from the reference
// ops, in the order the fused kernel computes them. Memory is the backend's too: B::Array<T> (an owned buffer),
// B::arena_allocator() (where a pass's arena lives) and the copies between the host and the backend's memory.
#pragma once

#include <cstddef>
#include <cstdint>
#include <cstring>
#include <memory>

#include "backend/overlapped_transfers.h"
#include "backend/sequence_overlap.h"
#include "ops/ops.h"
#include "tensor/arena.h"

namespace hone {

// An owned host buffer of n elements (the CPU's B::Array; the GPU's is DeviceArray). Uninitialized.
template <typename T>
class HostArray {
 public:
  HostArray() = default;
  explicit HostArray(int64_t n, const char* /*what*/ = "host buffer")
      : p_(std::make_unique<T[]>(size_t(n > 0 ? n : 1))), n_(n) {}
  T* get() const { return p_.get(); }
  int64_t size() const { return n_; }
  size_t bytes() const { return size_t(n_) * sizeof(T); }

 private:
  std::unique_ptr<T[]> p_;
  int64_t n_ = 0;
};

class HostGenerationRegion;
class EagerDecodeSteps;

struct CpuBackend {
  using Act = float;
  static constexpr const char* kName = "cpu";
  static constexpr size_t kAlignment = 64;  // carved regions (backend/carver.h)

  struct Exec {};  // the CPU runs each op when it is called: nothing to carry
  struct Scope {   // no per-op timing on the CPU
    Scope(const Exec&, const char*) {}
  };

  template <typename T>
  using Array = HostArray<T>;
  // Host memory the backend's copies write without the host waiting for them (pinned on the GPU): plain here.
  template <typename T>
  using HostStaging = HostArray<T>;
  static constexpr bool kDeviceMemory = false;  // buffers are host memory (a Comm over them is a host one)
  // A pass's arena lives in host memory.
  static std::shared_ptr<ArenaAllocator> arena_allocator() { return host_arena_allocator(); }
  // Whether a training forward keeps the LM head's logits for its backward by default: not on the CPU, where they
  // are fp32 [T, V] and recomputing them gives bitwise the same values.
  static constexpr bool kKeepLogits = false;

  static void zero(const Exec&, void* p, size_t bytes) { std::memset(p, 0, bytes); }
  // Copies within the backend's memory, from and to the host, and waiting for them: all immediate here.
  static void copy(const Exec&, void* dst, const void* src, size_t bytes) { std::memcpy(dst, src, bytes); }
  static void upload(const Exec&, void* dst, const void* host, size_t bytes) { std::memcpy(dst, host, bytes); }
  static void download(const Exec&, void* host, const void* src, size_t bytes) { std::memcpy(host, src, bytes); }
  static void sync(const Exec&) {}
  // n fp32 master weights from the host into compute weights.
  static void upload_weights(const Exec&, float* dst, const float* host, int64_t n) {
    std::memcpy(dst, host, size_t(n) * sizeof(float));
  }
  // Transfers beside the compute (backend/overlapped_transfers.h): on the CPU they run when posted.
  using OverlappedTransfers = InlineTransfers;
  static OverlappedTransfers overlapped_transfers(Comm& comm, const Exec&) { return OverlappedTransfers(comm); }
  // Tensor parallelism (parallel/tensor_parallel.h): sequence parallelism's collectives beside the GEMMs
  // (backend/sequence_overlap.h: here they run when posted), and the vocabulary-parallel pieces of the embedding and
  // the LM head over this rank's slice [vocab_begin, vocab_begin + V) (vocab_valid of its rows exist), the logits
  // of generation, and a sum of squares (the gradient norm over the shards).
  using SequenceOverlap = CpuSequenceOverlap;
  static SequenceOverlap sequence_overlap(Comm& comm, const Exec&, bool /*overlap*/, int /*marks*/) {
    return SequenceOverlap(comm);
  }
  static void embedding_slice_forward(const Exec&, float* out, const int32_t* ids, const float* wte, int T, int C,
                                      int vocab_begin, int V) {
    cpu::embedding_slice_forward(out, ids, wte, T, C, vocab_begin, V);
  }
  static void embedding_slice_backward(const Exec&, float* dwte, const float* dout, const int32_t* ids, int T, int C,
                                       int vocab_begin, int V) {
    cpu::embedding_slice_backward(dwte, dout, ids, T, C, vocab_begin, V);
  }
  static void lm_head_vocab_slice_forward(const Exec&, float* stats, const float* h, const float* w,
                                          const int32_t* targets, int T, int C, int V, int vocab_begin,
                                          int vocab_valid, float temperature, int chunk_v) {
    cpu::lm_head_vocab_slice_forward(stats, h, w, targets, T, C, V, vocab_begin, vocab_valid, temperature, chunk_v);
  }
  static void lm_head_stats_rescale(const Exec&, float* stats, const float* max, int T) {
    cpu::lm_head_stats_rescale(stats, max, T);
  }
  static void lm_head_stats_finish(const Exec&, float* logprob, float* entropy, float* lse, const float* stats,
                                   const int32_t* targets, int T) {
    cpu::lm_head_stats_finish(logprob, entropy, lse, stats, targets, T);
  }
  static void lm_head_vocab_slice_backward(const Exec&, float* dh, float* dw, const float* dlogprob,
                                           const float* dentropy, const float* h, const float* w,
                                           const int32_t* targets, const float* lse, const float* entropy, int T,
                                           int C, int V, int vocab_begin, int vocab_valid, float temperature,
                                           int chunk_v) {
    cpu::lm_head_vocab_slice_backward(dh, dw, dlogprob, dentropy, h, w, targets, lse, entropy, T, C, V, vocab_begin,
                                      vocab_valid, temperature, chunk_v);
  }
  static void lm_head_logits(const Exec&, float* logits, const float* h, const float* w, int T, int C, int V) {
    cpu::lm_head_logits(logits, h, w, T, C, V);
  }
  static double sum_squares(const Exec&, const float* x, int64_t n) { return cpu::sum_squares(x, n); }

  // fp32 and the activations' type (the same here: copies), and fp32 accumulations of activation values.
  static void act_to_f32(const Exec&, float* out, const float* in, int64_t n) {
    std::memcpy(out, in, size_t(n) * sizeof(float));
  }
  static void f32_to_act(const Exec&, float* out, const float* in, int64_t n) {
    std::memcpy(out, in, size_t(n) * sizeof(float));
  }
  // dst += src.
  static void accumulate_act_into_f32(const Exec&, float* dst, const float* src, int64_t n) {
    cpu::add_forward(dst, dst, src, n);
  }
  static void accumulate_f32_into_act(const Exec&, float* dst, const float* src, int64_t n) {
    cpu::add_forward(dst, dst, src, n);
  }

  static void scatter_rows_f32(const Exec&, float* full, const float* all, const int32_t* rows, int64_t n) {
    cpu::scatter_rows_f32(full, all, rows, n);
  }
  static void take_rows_f32(const Exec&, float* local, const float* full, const int32_t* rows, int64_t n) {
    cpu::take_rows_f32(local, full, rows, n);
  }
  static void embedding_forward(const Exec&, float* out, const int32_t* ids, const float* wte, int T, int C) {
    cpu::embedding_forward(out, ids, wte, T, C);
  }
  static void embedding_backward(const Exec&, float* dwte, const float* dout, const int32_t* ids, int T, int C) {
    cpu::embedding_backward(dwte, dout, ids, T, C);
  }
  static void lm_head_logprob_forward(const Exec&, float* logprob, float* entropy, float* lse, const float* h,
                                      const float* w, const int32_t* targets, int T, int C, int V, float temperature,
                                      int chunk_v) {
    cpu::lm_head_logprob_forward(logprob, entropy, lse, h, w, targets, T, C, V, temperature, chunk_v);
  }
  static void lm_head_logprob_backward(const Exec&, float* dh, float* dw, const float* dlogprob,
                                       const float* dentropy, const float* h, const float* w, const int32_t* targets,
                                       const float* lse, const float* entropy, int T, int C, int V,
                                       float temperature, int chunk_v) {
    cpu::lm_head_logprob_backward(dh, dw, dlogprob, dentropy, h, w, targets, lse, entropy, T, C, V, temperature,
                                  chunk_v);
  }
  static size_t lm_head_saved_bytes(int T, int V, int chunk_v) { return cpu::lm_head_saved_bytes(T, V, chunk_v); }
  static void lm_head_saved_forward(const Exec&, float* logprob, float* entropy, float* lse, void* saved,
                                    const float* h, const float* w, const int32_t* targets, int T, int C, int V,
                                    float temperature, int chunk_v) {
    cpu::lm_head_saved_forward(logprob, entropy, lse, saved, h, w, targets, T, C, V, temperature, chunk_v);
  }
  static void lm_head_saved_backward(const Exec&, float* dh, float* dw, const float* dlogprob, const float* dentropy,
                                     const float* h, const float* w, const int32_t* targets, const float* lse,
                                     const float* entropy, void* saved, int T, int C, int V, float temperature,
                                     int chunk_v) {
    cpu::lm_head_saved_backward(dh, dw, dlogprob, dentropy, h, w, targets, lse, entropy, saved, T, C, V, temperature,
                                chunk_v);
  }

  static void rmsnorm_forward(const Exec&, float* out, float* rstd, const float* x, const float* w, int rows, int C,
                              float eps) {
    cpu::rmsnorm_forward(out, rstd, x, w, rows, C, eps);
  }
  static void rmsnorm_backward(const Exec&, float* dx, float* dw, const float* dout, const float* x, const float* w,
                               const float* rstd, int rows, int C, bool accumulate) {
    cpu::rmsnorm_backward(dx, dw, dout, x, w, rstd, rows, C, accumulate);
  }
  // sum = a + b, then out = rmsnorm(sum): the GPU's fused op, normalizing the sum as stored.
  static void add_rmsnorm_forward(const Exec&, float* sum, float* out, float* rstd, const float* a, const float* b,
                                  const float* w, int rows, int C, float eps) {
    cpu::add_forward(sum, a, b, int64_t(rows) * C);
    cpu::rmsnorm_forward(out, rstd, sum, w, rows, C, eps);
  }
  static void add_forward(const Exec&, float* out, const float* a, const float* b, int64_t N) {
    cpu::add_forward(out, a, b, N);
  }
  static void linear_forward(const Exec&, float* out, const float* x, const float* w, const float* bias, int T,
                             int IC, int OC) {
    cpu::linear_forward(out, x, w, bias, T, IC, OC);
  }
  static void linear_forward_pair(const Exec&, float* out0, float* out1, const float* x, const float* w0,
                                  const float* w1, int T, int IC, int OC) {
    cpu::linear_forward_pair(out0, out1, x, w0, w1, T, IC, OC);
  }
  static void linear_backward(const Exec&, float* dx, float* dw, float* dbias, const float* dout, const float* x,
                              const float* w, int T, int IC, int OC, bool accumulate_dx) {
    cpu::linear_backward(dx, dw, dbias, dout, x, w, T, IC, OC, accumulate_dx);
  }
  static void rope_forward(const Exec&, float* out, const float* x, const int32_t* pos, const float* inv_freq, int T,
                           int H, int D, int64_t ldx) {
    cpu::rope_forward(out, x, pos, inv_freq, T, H, D, ldx);
  }
  static void rope_backward(const Exec&, float* dx, const float* dout, const int32_t* pos, const float* inv_freq,
                            int T, int H, int D, bool accumulate) {
    cpu::rope_backward(dx, dout, pos, inv_freq, T, H, D, accumulate);
  }
  static void qk_norm_rope_forward(const Exec&, float* out, float* rstd, const float* x, const float* w,
                                   const int32_t* pos, const float* inv_freq, int T, int H, int D, float eps,
                                   int64_t ldx) {
    cpu::qk_norm_rope_forward(out, rstd, x, w, pos, inv_freq, T, H, D, eps, ldx);
  }
  static void qk_norm_rope_backward(const Exec&, float* dx, float* dw, const float* dout, const float* x,
                                    const float* w, const float* rstd, const int32_t* pos, const float* inv_freq,
                                    int T, int H, int D) {
    cpu::qk_norm_rope_backward(dx, dw, dout, x, w, rstd, pos, inv_freq, T, H, D);
  }
  // max_seqlen is the GPU's (it sizes cuDNN's plans); the CPU reads the sequences from cu_seqlens alone.
  static void attention_forward(const Exec&, float* out, float* lse, const float* q, const float* k, const float* v,
                                const int32_t* cu_seqlens, int num_seqs, int /*max_seqlen*/, int T, int Hq, int Hkv,
                                int D, float scale) {
    cpu::attention_forward(out, lse, q, k, v, cu_seqlens, num_seqs, T, Hq, Hkv, D, scale);
  }
  static void attention_backward(const Exec&, float* dq, float* dk, float* dv, const float* dout, const float* out,
                                 const float* lse, const float* q, const float* k, const float* v,
                                 const int32_t* cu_seqlens, int num_seqs, int /*max_seqlen*/, int T, int Hq, int Hkv,
                                 int D, float scale) {
    cpu::attention_backward(dq, dk, dv, dout, out, lse, q, k, v, cu_seqlens, num_seqs, T, Hq, Hkv, D, scale);
  }
  // Ring attention's blocks (context parallelism): a block of query segments against key segments, its backward
  // from the merged output, and the merge of a block's partial result into the running fp32 one.
  static void attention_block_forward(const Exec&, float* out, float* lse, const float* q, const float* k,
                                      const float* v, const AttentionSegments& seg, int Tq, int Tkv, int Hq, int Hkv,
                                      int D, float scale) {
    cpu::attention_block_forward(out, lse, q, k, v, seg, Tq, Tkv, Hq, Hkv, D, scale);
  }
  static void attention_block_backward(const Exec&, float* dq, float* dk, float* dv, const float* dout,
                                       const float* out, const float* lse, const float* q, const float* k,
                                       const float* v, const AttentionSegments& seg, int Tq, int Tkv, int Hq, int Hkv,
                                       int D, float scale) {
    cpu::attention_block_backward(dq, dk, dv, dout, out, lse, q, k, v, seg, Tq, Tkv, Hq, Hkv, D, scale);
  }
  static void attention_merge_forward(const Exec&, float* out, float* lse, const float* block_out,
                                      const float* block_lse, const AttentionSegments& seg, int T, int H, int D) {
    cpu::attention_merge_forward(out, lse, block_out, block_lse, seg, T, H, D);
  }
  // The GRPO policy loss of one micro-batch: its partial sums, and its gradients accumulated.
  static void policy_loss_forward(const Exec&, double* stats, const float* new_lp, const float* old_lp,
                                  const float* gen_lp, const float* ref_lp, const float* entropy, const uint8_t* mask,
                                  const int64_t* seq_offsets, const float* advantages, int T, int num_seqs,
                                  const PolicyLossConfig& config, double denominator) {
    cpu::policy_loss_forward(stats, new_lp, old_lp, gen_lp, ref_lp, entropy, mask, seq_offsets, advantages, T,
                             num_seqs, config, denominator);
  }
  static void policy_loss_backward(const Exec&, float* dnew_lp, float* dentropy, const float* new_lp,
                                   const float* old_lp, const float* gen_lp, const float* ref_lp, const uint8_t* mask,
                                   const int64_t* seq_offsets, const float* advantages, int T, int num_seqs,
                                   const PolicyLossConfig& config, double denominator) {
    cpu::policy_loss_backward(dnew_lp, dentropy, new_lp, old_lp, gen_lp, ref_lp, mask, seq_offsets, advantages, T,
                              num_seqs, config, denominator);
  }
  // Rows gathered by index: xp[r] = x[token_of[r]] (expert parallelism regroups the rows it receives with it).
  static void moe_permute_forward(const Exec&, float* xp, const float* x, const int32_t* token_of, int N, int C) {
    cpu::moe_permute_forward(xp, x, token_of, N, C);
  }
  static void swiglu_forward(const Exec&, float* out, const float* gate, const float* up, int64_t N) {
    cpu::swiglu_forward(out, gate, up, N);
  }

  // Generation (generation/generation_forward.h): the paged KV cache's movers, decode attention over it (every row
  // through the plain path), the sampler and the stop checks; its memory regions and decode steps
  // (backend/host_generation_memory.h: plain buffers, eager steps), the most rows a pass decodes together (the
  // host memory plan's wave, rl/host_memory_plan.cpp), and the KV cache sized for each call (no free memory to
  // take a fraction of).
  using GenerationRegion = HostGenerationRegion;
  using DecodeSteps = EagerDecodeSteps;
  static constexpr int kMaxDecodeRows = 256;
  static bool generation_keeps_addresses(bool /*tensor_parallel*/) { return false; }
  static void kv_append(const Exec&, float* k_pool, float* v_pool, const float* k, const float* v,
                        const int32_t* slots, int T, int Hkv, int D, int block_size, int64_t ldv) {
    cpu::kv_append(k_pool, v_pool, k, v, slots, T, Hkv, D, block_size, ldv);
  }
  static void kv_copy_blocks(const Exec&, float* k_pool, float* v_pool, const int32_t* src, const int32_t* dst, int n,
                             int Hkv, int D, int block_size) {
    cpu::kv_copy_blocks(k_pool, v_pool, src, dst, n, Hkv, D, block_size);
  }
  static void paged_attention_decode_forward(const Exec&, float* out, const float* q, const float* k_pool,
                                             const float* v_pool, const PagedDecodeArgs& a, int Hq, int Hkv, int D,
                                             float scale) {
    cpu::paged_attention_decode_forward(out, q, k_pool, v_pool, a.block_tables, a.seq_lens, a.B, a.max_blocks,
                                        a.block_size, Hq, Hkv, D, scale);
  }
  static size_t paged_attention_decode_workspace(const Exec&, const PagedDecodeArgs&, int /*Hq*/, int /*D*/) {
    return 0;
  }
  static void sample_tokens(const Exec&, int32_t* tokens, float* logprobs, const float* logits, int64_t ld, int B,
                            int V, const SamplingParams& p, uint64_t seed, uint32_t step, const int32_t* sample_index,
                            const int32_t* position) {
    cpu::sample_tokens(tokens, logprobs, logits, ld, B, V, p, seed, step, sample_index, position);
  }
  static void check_stops(const Exec&, int32_t* done, const int32_t* tokens, const int32_t* gen_len,
                          const int32_t* seq_len, const int32_t* max_new, int max_total, const int32_t* stop_ids,
                          int n_stop, int B) {
    cpu::check_stops(done, tokens, gen_len, seq_len, max_new, max_total, stop_ids, n_stop, B);
  }
  static void swiglu_backward(const Exec&, float* dgate, float* dup, const float* dout, const float* gate,
                              const float* up, int64_t N, bool accumulate) {
    cpu::swiglu_backward(dgate, dup, dout, gate, up, N, accumulate);
  }
};

}  // namespace hone
