// The CUDA ops of the generation engine: the paged KV cache (append, block copy), decode attention over paged KV
// (grouped-query aware, split along the sequence, with a shared-prefix path for the G samples of a GRPO group) and
// the fused sampler. Conventions as cuda/ops_cuda.h (bf16 activations, fp32 statistics, asynchronous on ctx.stream).
// Plain header: CUDA headers only.
//
// Paged KV layout (one pool per layer for K, one for V):
//   pool[num_blocks, Hkv, block_size, D] bf16: block b, head h, in-block offset o is at ((b * Hkv + h) * block_size
//   + o) * D, so the block_size x D tile a head reads from one block is contiguous.
// A sequence's tokens live in the blocks its block table lists: token p is in block table[p / block_size] at offset
// p % block_size. A slot is block * block_size + offset.
#pragma once

#include <cstdint>

#include "cuda/ops_cuda.h"

namespace hone::cuda {

// ---- paged KV cache ------------------------------------------------------------------------------------------------
// Writes k[t], v[t] ([T, Hkv, D] bf16, K after q/k norm and RoPE) to slot slot_mapping[t]; slots < 0 are skipped.
// v's rows lie ldv values apart (0: Hkv * D): v as one fused QKV projection left it.
void kv_append(bf16* k_pool, bf16* v_pool, const bf16* k, const bf16* v, const int32_t* slot_mapping, int T, int Hkv,
               int D, int block_size, const GpuContext& ctx, int64_t ldv = 0);
// Copies whole blocks src[i] -> dst[i] (n pairs, device arrays) in both pools: copy-on-write of a shared partial
// block. Layers are handled by the caller (one call per layer's pools).
void kv_copy_blocks(bf16* k_pool, bf16* v_pool, const int32_t* src, const int32_t* dst, int n, int Hkv, int D,
                    int block_size, const GpuContext& ctx);

// ---- decode attention: one new query token per sequence against its paged KV ----------------------------------------
// q[B, Hq, D] bf16 (after q norm and RoPE), out[B, Hq, D] bf16. Row b attends to the seq_lens[b] tokens of its block
// table (block_tables[b * max_blocks ...]; the new token's K/V already appended). Hq is a multiple of Hkv; each KV
// head is read once for its Hq / Hkv query heads.
// Shared prefix (num_groups > 0): see hone::PagedDecodeArgs (ops/ops.h); the kernel reads a group's shared blocks
// once for the whole group, and rows outside every group take the plain path. The result equals the plain path up
// to rounding.
using ::hone::PagedDecodeArgs;
void paged_attention_decode_forward(bf16* out, const bf16* q, const bf16* k_pool, const bf16* v_pool,
                                    const PagedDecodeArgs& a, int Hq, int Hkv, int D, float scale,
                                    const GpuContext& ctx);
// Bytes of device workspace paged_attention_decode_forward needs for these sizes (split-sequence partials); the
// op takes it from the context's kernel scratch, so CUDA graph capture sees a fixed pointer once it was sized.
size_t paged_attention_decode_workspace(const PagedDecodeArgs& a, int Hq, int D, const GpuContext& ctx);

// ---- fused sampler --------------------------------------------------------------------------------------------------
// The rules of src/generation/sampler.h (temperature, top-k, top-p, min-p, greedy; inverse CDF over the kept tokens
// in ascending id order), with the uniform philox_uniform(seed, step, sample_index[b], position[b], kStreamToken) of
// src/ops/philox.h. logits[B, V] fp32 (row stride ld >= V). tokens[b] the sampled id; logprobs[b] =
// log_softmax(logits[b] / temperature)[token] over the full vocabulary. No full-vocabulary sort.
struct GpuSamplingParams {
  float temperature = 1.f;
  int top_k = 0;       // 0: off
  float top_p = 1.f;   // 1: off
  float min_p = 0.f;   // 0: off
  bool greedy = false;
};
void sample_tokens(int32_t* tokens, float* logprobs, const float* logits, int64_t ld, int B, int V,
                   const GpuSamplingParams& p, uint64_t seed, uint32_t step, const int32_t* sample_index,
                   const int32_t* position, const GpuContext& ctx);

// ---- stop conditions ------------------------------------------------------------------------------------------------
// After sampling: done[b] = 1 (finish reason stop) when tokens[b] is one of stop_ids[0..n_stop); else 2 (finish
// reason length) when gen_len[b] + 1 >= max_new[b] or seq_len[b] + 1 >= max_total; otherwise 0. gen_len and seq_len
// count the tokens before this one (completion only, and prompt + completion).
void check_stops(int32_t* done, const int32_t* tokens, const int32_t* gen_len, const int32_t* seq_len,
                 const int32_t* max_new, int max_total, const int32_t* stop_ids, int n_stop, int B,
                 const GpuContext& ctx);

}  // namespace hone::cuda
