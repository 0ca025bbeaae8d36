// The CUDA twins of the mixture-of-experts ops (src/ops/ops.h, "mixture of experts"): same names, same arguments
// in the same order, the conventions of cuda/ops_cuda.h (bf16 rows, fp32 router statistics, activation gradients
// accumulated in bf16, parameter gradients in fp32; asynchronous on ctx.stream). The routing plan lives on the
// device, so nothing here waits for the host: the ops run inside CUDA graphs (generation's decode steps).
// Plain header: CUDA headers only.
#pragma once

#include <cstddef>
#include <cstdint>

#include "cuda/ops_cuda.h"

namespace hone::cuda {

// ---- router: logits fp32 [T, E] (a GEMM with fp32 output of h2 and the router weight) ----------------------------
// One warp per row: softmax in fp32, the k largest probabilities (the lower expert id first among equal ones).
void moe_topk_forward(float* probs, int32_t* topk_idx, float* topk_w, const float* logits, int T, int E, int k,
                      bool norm_topk_prob, const GpuContext& ctx);
// dlogits fp32 [T, E] accumulated; daux [E] may be null.
void moe_topk_backward(float* dlogits, const float* dtopk_w, const float* daux, const float* probs,
                       const int32_t* topk_idx, const float* topk_w, int T, int E, int k, bool norm_topk_prob,
                       const GpuContext& ctx);
// Replay (loss.router_replay): row t whose forced[t * row_stride] >= 0 takes the k experts at forced + t *
// row_stride, with their probabilities as weights (renormalized when norm_topk_prob); other rows keep their top-k.
void moe_topk_replay(int32_t* topk_idx, float* topk_w, const float* probs, const int32_t* forced, int64_t row_stride,
                     int T, int E, int k, bool norm_topk_prob, const GpuContext& ctx);
// Over the first T rows: prob_sum [E] += the column sums of probs; counts [E] = the assignments to each expert;
// daux [E] = scale * the layers' counts summed.
void moe_router_stats(float* prob_sum, const float* probs, int T, int E, const GpuContext& ctx);
void moe_expert_counts(int32_t* counts, const int32_t* topk_idx, int T, int k, int E, const GpuContext& ctx);
void moe_aux_loss_backward(float* daux, const int32_t* counts, int L, int E, float scale, const GpuContext& ctx);

// ---- the routing plan: offsets [E + 1], row_of [T k], token_of [T k] (stable: within an expert, assignments in
// order), on the device. Needs moe_route_workspace_bytes(T k, E) bytes of workspace.
size_t moe_route_workspace_bytes(int N, int E);
void moe_route(int32_t* offsets, int32_t* row_of, int32_t* token_of, const int32_t* topk_idx, int T, int k, int E,
               void* workspace, size_t workspace_bytes, const GpuContext& ctx);

// ---- permute / unpermute (combine) ---------------------------------------------------------------------------------
void moe_permute_forward(bf16* xp, const bf16* x, const int32_t* token_of, int N, int C, const GpuContext& ctx);
// dx [T, C] += sum_j dxp[row_of[t k + j]] (one gather per token: deterministic).
void moe_permute_backward(bf16* dx, const bf16* dxp, const int32_t* row_of, int T, int k, int C,
                          const GpuContext& ctx);
// y [T, C] = sum_j topk_w[t, j] yp[row_of[t k + j]] (fp32 sum, rounded once).
void moe_unpermute_forward(bf16* y, const bf16* yp, const int32_t* row_of, const float* topk_w, int T, int k, int C,
                           const GpuContext& ctx);
// dyp += topk_w dy (bf16, accumulated), dtopk_w += dy . yp (fp32, accumulated; may be null).
void moe_unpermute_backward(bf16* dyp, float* dtopk_w, const bf16* dy, const bf16* yp, const int32_t* row_of,
                            const float* topk_w, int T, int k, int C, const GpuContext& ctx);

// ---- the experts' grouped linear layers: w [E, OC, IC] bf16, offsets [E + 1] on the device ------------------------
// Our tensor-core kernel (one launch for every expert; it reads the offsets on the device, so it also runs inside
// CUDA graphs). max_rows: an upper bound of offsets[E] known on the host (sizes the launch).
// With at most 64 rows an expert on average (max_rows <= 64 E: decode) it runs the kernel that streams each expert's
// weights once; otherwise the tiled one (moe_grouped_linear_forward_tiled, which benchmarks compare).
void moe_grouped_linear_forward(bf16* out, const bf16* x, const bf16* w, const int32_t* offsets, int E, int IC,
                                int OC, int max_rows, const GpuContext& ctx);
void moe_grouped_linear_forward_tiled(bf16* out, const bf16* x, const bf16* w, const int32_t* offsets, int E, int IC,
                                      int OC, int max_rows, const GpuContext& ctx);
// The few-rows kernel's variants (column width, slice depth, pipeline stages) one by one, for the benchmark and the
// op checks: IC a multiple of 8, x and w 16-byte aligned. The forward above runs the default one.
int moe_few_rows_variants();
const char* moe_few_rows_variant_name(int variant);
void moe_grouped_linear_forward_few_rows(int variant, bf16* out, const bf16* x, const bf16* w, const int32_t* offsets,
                                         int E, int IC, int OC, const GpuContext& ctx);
// dx (bf16, accumulated; may be null) += dout w[e]; dw (fp32, accumulated) += dout^T x per expert.
void moe_grouped_linear_backward(bf16* dx, float* dw, const bf16* dout, const bf16* x, const bf16* w,
                                 const int32_t* offsets, int E, int IC, int OC, int max_rows, const GpuContext& ctx);
// The same through cuBLASLt, one GEMM per expert with rows (host_offsets: the offsets on the host): what the
// benchmark compares the kernel with.
void moe_grouped_linear_forward_cublas(bf16* out, const bf16* x, const bf16* w, const int32_t* host_offsets, int E,
                                       int IC, int OC, const GpuContext& ctx);
void moe_grouped_linear_backward_cublas(bf16* dx, float* dw, const bf16* dout, const bf16* x, const bf16* w,
                                        const int32_t* host_offsets, int E, int IC, int OC, const GpuContext& ctx);

}  // namespace hone::cuda
