// The op API, declared once. Every op has a plain fp32 CPU reference (hone::cpu, src/ops/cpu/) and a CUDA twin
// (hone::cuda, cuda/) with the same signature shape. The model (src/model/) is written against these.
//
// Conventions, for every op:
//   * Raw row-major pointers; sizes as ints: T tokens (rows), C channels, V vocabulary, H heads, D head dim.
//   * Forward writes (overwrites) its outputs, and saves what backward needs in the buffers it is given.
//   * Backward ACCUMULATES (+=) into every gradient it produces (dx, dw, ...), so gradients of a parameter used
//     twice, of micro-batches, and of the residual stream add up without extra copies. Callers zero them first.
//     Exceptions, so that the first op to produce an activation gradient need not find it zeroed: the input
//     gradients of linear_backward, rmsnorm_backward, rope_backward and swiglu_backward take a flag (false:
//     written, true: accumulated), and attention_backward writes dq/dk/dv. Parameter gradients always accumulate.
//   * A gradient pointer that may be null says so; backward then skips that gradient.
//   * Linear weights are stored as Hugging Face stores them: W[out_features, in_features], y = x W^T + b.
#pragma once

#include <cstddef>
#include <cstdint>

#include "ops/policy_loss_config.h"
#include "ops/sampling_params.h"

namespace hone {

// RoPE frequencies: default (theta^(-2i/D)) or Llama 3 `rope_scaling` (rope_type "llama3").
struct RopeParams {
  int head_dim = 0;           // D; rotation pairs (i, i + D/2), as Hugging Face's rotate_half
  float theta = 10000.f;      // rope_theta
  bool llama3 = false;        // apply Llama 3 frequency scaling
  float factor = 8.f;         // rope_scaling.factor
  float low_freq_factor = 1.f;
  float high_freq_factor = 4.f;
  int original_max_position_embeddings = 8192;
};

// The segments of one attention block (ring attention, parallel/ring_attention.h): segment s lets query rows
// [q_start[s], q_start[s] + q_len[s]) attend to key rows [kv_start[s], kv_start[s] + kv_len[s]). Segments are in
// ascending order of q_start; neither their query rows nor their key rows overlap; kv_len[s] >= 1. max_q and max_kv
// bound q_len and kv_len (the GPU sizes its attention graphs by them). The arrays are host memory for the CPU ops
// and device memory for the CUDA ones.
struct AttentionSegments {
  const int32_t* q_start = nullptr;
  const int32_t* q_len = nullptr;
  const int32_t* kv_start = nullptr;
  const int32_t* kv_len = nullptr;
  int count = 0;
  int max_q = 0, max_kv = 0;
};

// The arguments of paged decode attention on every backend (cuda::paged_attention_decode_forward reads them all;
// the CPU reference reads the block tables and lengths and runs every row through the plain path, which the
// shared-prefix path equals up to rounding).
// Shared prefix (num_groups > 0): rows group_offsets[g] .. group_offsets[g+1]-1 are consecutive rows of one group
// whose block tables begin with the same prefix_lens[g] / block_size blocks (prefix_lens[g] a multiple of
// block_size, <= every member's seq_len); the GPU kernel reads those blocks once for the whole group. Rows outside
// every group (or num_groups == 0) take the plain path.
struct PagedDecodeArgs {
  const int32_t* block_tables = nullptr;  // [B, max_blocks]
  const int32_t* seq_lens = nullptr;      // [B], >= 1
  int B = 0;
  int max_blocks = 0;   // row stride of block_tables
  int max_seq_len = 0;  // >= every seq_lens[b] (host bound; sizes the split along the sequence)
  int block_size = 16;
  int num_groups = 0;
  const int32_t* group_offsets = nullptr;  // [num_groups + 1]
  const int32_t* prefix_lens = nullptr;    // [num_groups]
  int max_prefix_len = 0;                  // host bound on prefix_lens
  // The shared-prefix path's plan; 0 leaves it to the op. Benchmarks and tests set them to compare plans.
  int max_group_rows = 0;       // rows of the largest group (0: B / num_groups; a captured graph's padding groups
                                // make that average too small); any group size stays correct
  int prefix_vectors = 0;       // query vectors a CTA attends over a group's prefix: 1, 2, 4 or 8
  int prefix_split_tokens = 0;  // the shortest piece the prefix is split into along the sequence (>= 16)
  int plain_vectors = 0;        // query vectors a CTA attends on the plain path: 1, 2, 4 or 8 (0: the op's choice;
                                // a count is the CUDA-core path, also at GQA 8 and head dim 128)
};

namespace cpu {

// ---- moving per-row values between two row orders (context parallelism's splits) --------------------------------
// full[rows[p]] = all[p] for p < n where rows[p] >= 0 (rows dropped where rows[p] < 0).
void scatter_rows_f32(float* full, const float* all, const int32_t* rows, int64_t n);
// local[i] = rows[i] >= 0 ? full[rows[i]] : 0 for i < n.
void take_rows_f32(float* local, const float* full, const int32_t* rows, int64_t n);

// ---- embedding: out[t, :] = wte[ids[t], :] ---------------------------------------------------------------
void embedding_forward(float* out, const int32_t* ids, const float* wte, int T, int C);
void embedding_backward(float* dwte, const float* dout, const int32_t* ids, int T, int C);
// Vocabulary-parallel: wte[V, C] holds rows [vocab_begin, vocab_begin + V); ids outside the slice give zero rows
// (the slices' outputs add up to the whole lookup) and no gradient.
void embedding_slice_forward(float* out, const int32_t* ids, const float* wte, int T, int C, int vocab_begin, int V);
void embedding_slice_backward(float* dwte, const float* dout, const int32_t* ids, int T, int C, int vocab_begin,
                              int V);

// ---- RMSNorm over the last C values of each row: out = x * rstd * w, rstd = 1/sqrt(mean(x^2) + eps) --------
// Also the per-head q/k norm of Qwen3: rows = T*H, C = D, w of length D.
void rmsnorm_forward(float* out, float* rstd, const float* x, const float* w, int rows, int C, float eps);
// dx is written, or (accumulate) added to; dw always accumulates.
void rmsnorm_backward(float* dx, float* dw, const float* dout, const float* x, const float* w, const float* rstd,
                      int rows, int C, bool accumulate = true);

// ---- linear: out[T, OC] = x[T, IC] W[OC, IC]^T (+ bias[OC]) ------------------------------------------------
void linear_forward(float* out, const float* x, const float* w, const float* bias, int T, int IC, int OC);
// Two projections of one input, same shape, no bias (gate/up, k/v): out0 = x W0^T, out1 = x W1^T. The reference of
// the CUDA op, which runs the pair as one batched GEMM.
void linear_forward_pair(float* out0, float* out1, const float* x, const float* w0, const float* w1, int T, int IC,
                         int OC);
// dx, dw and dbias may each be null (the input gradient of some rows and the weight gradient in separate calls).
// dx is written (accumulate_dx false) or added to; dw and dbias always accumulate.
void linear_backward(float* dx, float* dw, float* dbias, const float* dout, const float* x, const float* w, int T,
                     int IC, int OC, bool accumulate_dx);

// ---- RoPE on x[T, H, D] by position ids (packed sequences restart at 0) ---------------------------------------
// The forwards below read x's rows at a stride of ldx values (0: H * D, rows of their own), so that q and k can be
// read where one fused QKV projection left them (the column blocks of a [T, Q + 2K] product); out is [T, H, D].
void rope_inv_freq(float* inv_freq, const RopeParams& p);  // D/2 values
void rope_forward(float* out, const float* x, const int32_t* pos, const float* inv_freq, int T, int H, int D,
                  int64_t ldx = 0);
// dx is written, or (accumulate) added to.
void rope_backward(float* dx, const float* dout, const int32_t* pos, const float* inv_freq, int T, int H, int D,
                   bool accumulate = true);

// ---- Qwen3's per-head q/k norm followed by RoPE, as one op on x[T, H, D] (w of length D) ------------------------
// Per row r = t*H + h: rstd[r] = 1/sqrt(mean(x^2) + eps), n = w * (x * rstd), out = rope(n, pos[t]); the same
// arithmetic as rmsnorm_forward then rope_forward, without the intermediate n (backward needs only x, w and rstd).
// Backward, from dout = d(loss)/d(out): dn = rope_backward(dout), then rmsnorm_backward's formulas.
// Unlike every other backward, dx is WRITTEN (overwritten), not accumulated: the op is its first and only writer,
// so the caller need not zero it. dw [D] is ACCUMULATED as usual.
void qk_norm_rope_forward(float* out, float* rstd, const float* x, const float* w, const int32_t* pos,
                          const float* inv_freq, int T, int H, int D, float eps, int64_t ldx = 0);
void qk_norm_rope_backward(float* dx, float* dw, const float* dout, const float* x, const float* w, const float* rstd,
                           const int32_t* pos, const float* inv_freq, int T, int H, int D);

// ---- causal attention over packed variable-length sequences, grouped-query heads ----------------------------
// q[T, Hq, D], k/v[T, Hkv, D], out[T, Hq, D]; sequence s covers rows [cu_seqlens[s], cu_seqlens[s+1]);
// token i attends to tokens j <= i of its own sequence. Hq % Hkv == 0; query head h uses kv head h / (Hq/Hkv).
// lse[Hq, T] (log-sum-exp of the scaled scores) is saved for backward. Backward WRITES dq, dk and dv (the sequences
// must cover all T rows): it is the first producer of those gradients wherever it is used.
void attention_forward(float* out, float* lse, const float* q, const float* k, const float* v,
                       const int32_t* cu_seqlens, int num_seqs, int T, int Hq, int Hkv, int D, float scale);
void attention_backward(float* dq, float* dk, float* dv, const float* dout, const float* out, const float* lse,
                        const float* q, const float* k, const float* v, const int32_t* cu_seqlens, int num_seqs,
                        int T, int Hq, int Hkv, int D, float scale);

// ---- attention blocks and their merge (ring attention of context parallelism) ---------------------------------
// Full (non-causal) attention of the query rows of each segment against all its key rows (GQA as above):
// q[Tq, Hq, D], k/v[Tkv, Hkv, D]; out[Tq, Hq, D] and lse[Hq, Tq] are written on the segments' query rows only.
void attention_block_forward(float* out, float* lse, const float* q, const float* k, const float* v,
                             const AttentionSegments& seg, int Tq, int Tkv, int Hq, int Hkv, int D, float scale);
// A block's share of the gradients of the whole attention, ACCUMULATED into dq[Tq, Hq, D], dk and dv[Tkv, Hkv, D].
// out and lse are the whole attention's (merged over all blocks): P_ij = exp(scale q_i.k_j - lse_i) is then this
// block's part of each row's softmax and rowsum(dout * out) its correction, as flash attention's backward.
void attention_block_backward(float* dq, float* dk, float* dv, const float* dout, const float* out, const float* lse,
                              const float* q, const float* k, const float* v, const AttentionSegments& seg, int Tq,
                              int Tkv, int Hq, int Hkv, int D, float scale);
// Merges a block's partial attention (block_out[T, H, D], block_lse[H, T]) into the running one (out, lse) on the
// query rows of the segments, by their log-sum-exp:
//   lse' = log(exp(lse) + exp(block_lse)),  out' = exp(lse - lse') out + exp(block_lse - lse') block_out;
// a row whose lse is -inf (nothing merged yet) takes the block's values. Exact in exact arithmetic: merging the
// blocks of a row's keys gives the attention over all of them. No backward: the blocks' backward reads the merged
// out and lse (attention_block_backward), so no gradient flows through the merge.
void attention_merge_forward(float* out, float* lse, const float* block_out, const float* block_lse,
                             const AttentionSegments& seg, int T, int H, int D);

// ---- decode attention: one new query row per sequence against its KV cache (generation; no backward) ----------
// Cache layout: k_cache/v_cache[num_slots, max_len, Hkv, D], one contiguous slot per sequence; position p of the
// sequence in slot s is row (s * max_len + p). Sequence b (of B) has q[b, Hq, D] and reads slot slots[b] (slots
// may be null: slot b), positions [0, lens[b]) where lens[b] >= 1 already counts the current token, whose k and v
// the caller has written at position lens[b] - 1. GQA as in attention_forward. out[B, Hq, D]. Same arithmetic as
// attention_forward's row for that token, so the two agree to rounding. Inference only: there is no backward.
void attention_decode_forward(float* out, const float* q, const float* k_cache, const float* v_cache,
                              const int32_t* slots, const int32_t* lens, int B, int max_len, int Hq, int Hkv, int D,
                              float scale);
// The same over a paged cache (the layout of cuda/generation_ops.h, in fp32): k_pool/v_pool[num_blocks, Hkv,
// block_size, D]; token p of row b is in block block_tables[b * max_blocks + p / block_size] at offset
// p % block_size; the row attends to its first seq_lens[b] tokens. Same arithmetic as attention_decode_forward.
void paged_attention_decode_forward(float* out, const float* q, const float* k_pool, const float* v_pool,
                                    const int32_t* block_tables, const int32_t* seq_lens, int B, int max_blocks,
                                    int block_size, int Hq, int Hkv, int D, float scale);

// ---- the paged KV cache's data movers (the layout of cuda/generation_ops.h, in fp32; exact moves) ------------------
// Writes k[t], v[t] ([T, Hkv, D]) to slot slot_mapping[t] (block slot / block_size, offset slot % block_size);
// slots < 0 are skipped. v's rows lie ldv values apart (0: Hkv * D).
void kv_append(float* k_pool, float* v_pool, const float* k, const float* v, const int32_t* slot_mapping, int T,
               int Hkv, int D, int block_size, int64_t ldv = 0);
// Copies whole blocks src[i] -> dst[i] (n pairs) in both pools (copy-on-write of a shared partial block).
void kv_copy_blocks(float* k_pool, float* v_pool, const int32_t* src, const int32_t* dst, int n, int Hkv, int D,
                    int block_size);

// ---- generation's stop conditions after sampling (cuda::check_stops) ------------------------------------------------
// done[b] = 1 (stop) when tokens[b] is one of stop_ids[0..n_stop); else 2 (length) when gen_len[b] + 1 >= max_new[b]
// or seq_len[b] + 1 >= max_total; else 0. gen_len and seq_len count the tokens before this one.
void check_stops(int32_t* done, const int32_t* tokens, const int32_t* gen_len, const int32_t* seq_len,
                 const int32_t* max_new, int max_total, const int32_t* stop_ids, int n_stop, int B);

// ---- generation's sampler (the rules of generation/sampler.h, row by row) ------------------------------------------
// tokens[b] sampled from logits row b ([B, V], row stride ld >= V) with the uniform philox_uniform(seed, step,
// sample_index[b], position[b], kStreamToken); logprobs[b] = log_softmax(logits[b] / temperature)[token] over the
// full vocabulary. A row with non-finite logits gives the token the sampler finds, which may be -1.
void sample_tokens(int32_t* tokens, float* logprobs, const float* logits, int64_t ld, int B, int V,
                   const SamplingParams& p, uint64_t seed, uint32_t step, const int32_t* sample_index,
                   const int32_t* position);

// ---- SwiGLU: out = silu(gate) * up, elementwise over N values --------------------------------------------------
void swiglu_forward(float* out, const float* gate, const float* up, int64_t N);
// dgate and dup are written, or (accumulate) added to.
void swiglu_backward(float* dgate, float* dup, const float* dout, const float* gate, const float* up, int64_t N,
                     bool accumulate);

// ---- residual add: out = a + b ----------------------------------------------------------------------------------
void add_forward(float* out, const float* a, const float* b, int64_t N);

// ---- LM head fused with log-softmax gather and entropy, in vocabulary chunks -------------------------------------
// For each row t with targets[t] >= 0: z = h[t] W^T / temperature (W[V, C]),
//   logprob[t] = z[targets[t]] - logsumexp(z),  entropy[t] = -sum_v p_v log p_v,  lse[t] = logsumexp(z).
// Rows with targets[t] < 0 get logprob 0 and entropy 0 (and receive no gradient).
// Logits are formed chunk_v vocabulary rows at a time: no [T, V] buffer exists. entropy may be null.
void lm_head_logprob_forward(float* logprob, float* entropy, float* lse, const float* h, const float* w,
                             const int32_t* targets, int T, int C, int V, float temperature, int chunk_v);
// Gradients of sum_t dlogprob[t]*logprob[t] + dentropy[t]*entropy[t] into dh[T, C] and dw[V, C].
// dentropy may be null (entropy not in the loss); entropy is needed only when dentropy is given.
void lm_head_logprob_backward(float* dh, float* dw, const float* dlogprob, const float* dentropy, const float* h,
                              const float* w, const int32_t* targets, const float* lse, const float* entropy, int T,
                              int C, int V, float temperature, int chunk_v);

// ---- the LM head keeping its logits for the backward (training without recompute) --------------------------------
// lm_head_saved_forward is lm_head_logprob_forward that also leaves in `saved` (lm_head_saved_bytes(T, V, chunk_v)
// bytes; what it holds is the backend's own: here the fp32 logits [T, V]) what lm_head_saved_backward needs instead
// of recomputing the logits. lm_head_saved_backward is lm_head_logprob_backward from `saved`, which it consumes
// (its dlogits are formed in place).
size_t lm_head_saved_bytes(int T, int V, int chunk_v);
void lm_head_saved_forward(float* logprob, float* entropy, float* lse, void* saved, const float* h, const float* w,
                           const int32_t* targets, int T, int C, int V, float temperature, int chunk_v);
void lm_head_saved_backward(float* dh, float* dw, const float* dlogprob, const float* dentropy, const float* h,
                            const float* w, const int32_t* targets, const float* lse, const float* entropy,
                            void* saved, int T, int C, int V, float temperature, int chunk_v);

// ---- vocabulary-parallel LM head: this rank's slice of the vocabulary -------------------------------------------
// W[V, C] holds rows [vocab_begin, vocab_begin + V) of the vocabulary padded to a multiple of the tensor-parallel
// size; its first vocab_valid rows exist, the rest are padding and never give a logit. targets are global ids.
// Only per-row statistics leave the slice, never logits. For each row t with targets[t] >= 0, over the slice's
// z = h[t] W[:vocab_valid]^T / temperature, stats [4, T] gets
//   stats[t] = m = max z,  stats[T + t] = s = sum exp(z - m),  stats[2T + t] = u = sum exp(z - m) (z - m),
//   stats[3T + t] = z[targets[t] - vocab_begin] when the target is in the slice, else 0;
// rows without a target (and a slice of padding only) get m = -inf and 0 elsewhere.
void lm_head_vocab_slice_forward(float* stats, const float* h, const float* w, const int32_t* targets, int T, int C,
                                 int V, int vocab_begin, int vocab_valid, float temperature, int chunk_v);
// Moves each row's s and u to a common max[t] >= m (the max over the slices) and sets m = max[t]; after it, the
// slices' s, u and target logits add up (rows 1..3 of stats: one sum over ranks of 3T floats).
void lm_head_stats_rescale(float* stats, const float* max, int T);
// From the combined statistics: lse = m + log s, logprob = z_target - lse, entropy = log s - u / s (0 for rows
// without a target), as lm_head_logprob_forward writes them. entropy may be null.
void lm_head_stats_finish(float* logprob, float* entropy, float* lse, const float* stats, const int32_t* targets,
                          int T);
// lm_head_logprob_backward over the slice, from the whole vocabulary's lse and entropy: dh[T, C] += this slice's
// part of the input gradient (summed over the slices by the caller), dw[V, C] += the slice's rows (padding rows
// get none).
void lm_head_vocab_slice_backward(float* dh, float* dw, const float* dlogprob, const float* dentropy, const float* h,
                                  const float* w, const int32_t* targets, const float* lse, const float* entropy,
                                  int T, int C, int V, int vocab_begin, int vocab_valid, float temperature,
                                  int chunk_v);

// Full logits for a few rows (generation samples from them): logits[T, V] = h W^T, no temperature.
void lm_head_logits(float* logits, const float* h, const float* w, int T, int C, int V);

// ---- optimizer pieces on flat fp32 buffers ------------------------------------------------------------------------
// AdamW (decoupled weight decay, bias correction with the 1-based step count):
//   m = b1 m + (1-b1) g;  v = b2 v + (1-b2) g^2;  p -= lr * (m/(1-b1^step) / (sqrt(v/(1-b2^step)) + eps) + wd p)
void adamw_update(float* param, const float* grad, float* m, float* v, int64_t N, float lr, float beta1, float beta2,
                  float eps, float weight_decay, int step);
// sum of squares in double (for the global gradient norm)
double sum_squares(const float* x, int64_t N);
// x *= s
void scale_inplace(float* x, float s, int64_t N);

// ---- GRPO policy loss of one micro-batch (formulas: rl/policy_loss.h, doc/grpo.md "Policy loss") ----------------
// T tokens of num_seqs whole sequences laid end to end: sequence s covers rows [seq_offsets[s], seq_offsets[s+1])
// (from 0 to T); mask[t] = 1 on the tokens trained on; one advantage per sequence. new_lp is the variable of the
// gradient; old_lp may be new_lp itself (exactly on-policy: ratio 1); ref_lp may be null (no KL term; kl_coef must
// then be 0); entropy may be null (no entropy term and an entropy sum of 0; entropy_coef must then be 0).
// denominator: the GLOBAL D of the optimizer step (> 0), so micro-batches add up to the whole batch.
// Arithmetic in double whatever the storage type. The double overloads serve the unit tests' finite differences.
// Forward writes stats[PolicyLossStat::count] (this micro-batch's partial sums); a NaN logprob on a valid token is
// an error.
void policy_loss_forward(double* stats, const float* new_lp, const float* old_lp, const float* gen_lp,
                         const float* ref_lp, const float* entropy, const uint8_t* mask, const int64_t* seq_offsets,
                         const float* advantages, int T, int num_seqs, const PolicyLossConfig& config,
                         double denominator);
void policy_loss_forward(double* stats, const double* new_lp, const double* old_lp, const double* gen_lp,
                         const double* ref_lp, const double* entropy, const uint8_t* mask,
                         const int64_t* seq_offsets, const double* advantages, int T, int num_seqs,
                         const PolicyLossConfig& config, double denominator);
// Backward accumulates dL/dnew_lp into dnew_lp[T] and dL/dentropy into dentropy[T] (may be null: skipped), on
// valid tokens only.
void policy_loss_backward(float* dnew_lp, float* dentropy, const float* new_lp, const float* old_lp,
                          const float* gen_lp, const float* ref_lp, const uint8_t* mask, const int64_t* seq_offsets,
                          const float* advantages, int T, int num_seqs, const PolicyLossConfig& config,
                          double denominator);
void policy_loss_backward(double* dnew_lp, double* dentropy, const double* new_lp, const double* old_lp,
                          const double* gen_lp, const double* ref_lp, const uint8_t* mask,
                          const int64_t* seq_offsets, const double* advantages, int T, int num_seqs,
                          const PolicyLossConfig& config, double denominator);

// ---- mixture of experts (Qwen3-MoE) ---------------------------------------------------------------------------
// T token rows route to k of E experts each. The router's logits [T, E] are a linear op (h W_router^T, fp32).
// An assignment a = t * k + j is token t's j-th expert. Its row in expert order (all of expert 0's assignments,
// then expert 1's, ..., each expert's in order of a) is row_of[a]; token_of[r] is the token of row r;
// offsets[E + 1] delimit each expert's rows (N = T k rows in all).
//
// Router: probs = softmax(logits) per row (fp32); the k largest probabilities (the lower expert id first among
// equal ones) give topk_idx [T, k] (descending) and topk_w [T, k], divided by their sum when norm_topk_prob.
void moe_topk_forward(float* probs, int32_t* topk_idx, float* topk_w, const float* logits, int T, int E, int k,
                      bool norm_topk_prob);
// dlogits [T, E] += the gradient through topk_w (dtopk_w [T, k]) and through probs of a per-expert gradient daux [E]
// added to every row (the load-balancing loss's; may be null). The selection itself passes no gradient.
void moe_topk_backward(float* dlogits, const float* dtopk_w, const float* daux, const float* probs,
                       const int32_t* topk_idx, const float* topk_w, int T, int E, int k, bool norm_topk_prob);
// Replay (loss.router_replay): row t whose forced[t * row_stride] >= 0 takes the k experts at forced + t *
// row_stride, with their probabilities as weights (renormalized when norm_topk_prob); other rows keep their top-k.
void moe_topk_replay(int32_t* topk_idx, float* topk_w, const float* probs, const int32_t* forced, int64_t row_stride,
                     int T, int E, int k, bool norm_topk_prob);
// The routing plan of topk_idx: offsets [E + 1], row_of [T k], token_of [T k] (as above).
void moe_route(int32_t* offsets, int32_t* row_of, int32_t* token_of, const int32_t* topk_idx, int T, int k, int E);
// Permute: xp [N, C] row r = x [token_of[r]]. Backward: dx[t] += sum_j dxp[row_of[t k + j]] (a gather per token).
void moe_permute_forward(float* xp, const float* x, const int32_t* token_of, int N, int C);
void moe_permute_backward(float* dx, const float* dxp, const int32_t* row_of, int T, int k, int C);
// Unpermute (combine): y[t] = sum_j topk_w[t, j] yp[row_of[t k + j]] (overwrites y [T, C]). Backward:
// dyp[row_of[a]] += topk_w[a] dy[t], dtopk_w[a] += dy[t] . yp[row_of[a]] (dtopk_w may be null).
void moe_unpermute_forward(float* y, const float* yp, const int32_t* row_of, const float* topk_w, int T, int k,
                           int C);
void moe_unpermute_backward(float* dyp, float* dtopk_w, const float* dy, const float* yp, const int32_t* row_of,
                            const float* topk_w, int T, int k, int C);
// Grouped linear: for each expert e < E, rows [offsets[e], offsets[e + 1]) of x [N, IC] times expert e's weight
// w[e] [OC, IC] (w: [E, OC, IC], Hugging Face's [out, in] per expert): out [N, OC] = x w[e]^T. Backward: dx += dout
// w[e] (dx may be null), dw[e] += dout^T x over the expert's rows.
void moe_grouped_linear_forward(float* out, const float* x, const float* w, const int32_t* offsets, int E, int IC,
                                int OC);
void moe_grouped_linear_backward(float* dx, float* dw, const float* dout, const float* x, const float* w,
                                 const int32_t* offsets, int E, int IC, int OC);
// The load-balancing statistics of one layer over its first T rows (rows past them, padding, are routed but not
// counted): prob_sum [E] += the column sums of probs [T, E]; counts [E] = the assignments of topk_idx [T, k] to
// each expert.
void moe_router_stats(float* prob_sum, const float* probs, int T, int E);
void moe_expert_counts(int32_t* counts, const int32_t* topk_idx, int T, int k, int E);
// The load-balancing loss's gradient per expert, the same for every row of every sparse layer: daux [E] = scale *
// sum over the L sparse layers of counts [L, E] (scale = weight E / R^2, R the rows of all L layers).
void moe_aux_loss_backward(float* daux, const int32_t* counts, int L, int E, float scale);

}  // namespace cpu
}  // namespace hone
