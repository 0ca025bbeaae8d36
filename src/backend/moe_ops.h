// What the mixture-of-experts feed-forward (model/moe_feed_forward.h) needs of a backend beyond its op table: the
// steps of a sparse layer as backend ops, overloaded on the backend's Exec (as backend/optimizer_ops.h), so the
// feed-forward is written once and dispatch is at compile time.
//   * the router: its logits (a GEMM with fp32 output), softmax and top-k, replay, the routing record, the routing
//     plan, the load-balancing statistics and their gradient, and the router's backward;
//   * permute / unpermute and the experts' grouped linear layers over an expert plan (MoeExpertOffsets): on the CPU
//     the reference ops over host offsets; on the GPU cuBLAS, one GEMM per expert, where the host holds the offsets
//     (a large pass) and our one-launch kernel over the device's offsets otherwise (decode steps, CUDA graphs);
//   * SwiGLU's backward as the feed-forward runs it (written into zeroed gradients on the CPU, written outright on
//     the GPU).
// On the CPU each op is the reference op of src/ops/cpu (ops.h), called as the fp32 feed-forward always has; on the
// GPU the kernels of cuda/moe_ops.h, asynchronous on the Exec's stream. Where the saved routing and the expert-side
// rows live is the backend's memory policy (backend/moe_memory.h), not an op.
#pragma once

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <vector>

#include "backend/backend.h"
#include "ops/ops.h"

#if HONE_CUDA
#include <cuda_runtime.h>

#include "cuda/check.h"
#include "cuda/gemm.h"
#include "cuda/moe_ops.h"
#endif

namespace hone {

// The expert plan the grouped linear layers run over: the experts' row offsets [experts + 1] in the backend's
// memory, and the same offsets on the host where the host holds them (null: only the device has them; on the CPU
// both are the host's).
struct MoeExpertOffsets {
  const int32_t* offsets = nullptr;
  const int32_t* host = nullptr;
};

// ---- CPU --------------------------------------------------------------------------------------------------------

// logits [T, E] (fp32) = h W_router^T.
inline void moe_router_forward(const CpuBackend::Exec&, float* logits, const float* h, const float* w_router, int T,
                               int C, int E) {
  cpu::linear_forward(logits, h, w_router, nullptr, T, C, E);
}
inline void moe_topk_forward(const CpuBackend::Exec&, float* probs, int32_t* topk_idx, float* topk_w,
                             const float* logits, int T, int E, int k, bool norm_topk_prob) {
  cpu::moe_topk_forward(probs, topk_idx, topk_w, logits, T, E, k, norm_topk_prob);
}
inline void moe_topk_replay(const CpuBackend::Exec&, int32_t* topk_idx, float* topk_w, const float* probs,
                            const int32_t* forced, int64_t row_stride, int T, int E, int k, bool norm_topk_prob) {
  cpu::moe_topk_replay(topk_idx, topk_w, probs, forced, row_stride, T, E, k, norm_topk_prob);
}
// The routing record: the k experts of each of T rows into record [T, S, k] at sparse layer i.
inline void moe_record_routing(const CpuBackend::Exec&, int32_t* record, const int32_t* topk_idx, int T, int S, int i,
                               int k) {
  for (int t = 0; t < T; ++t) std::copy_n(topk_idx + int64_t(t) * k, k, record + (int64_t(t) * S + i) * k);
}
// The routing plan (the CPU needs no workspace).
inline void moe_route(const CpuBackend::Exec&, int32_t* offsets, int32_t* row_of, int32_t* token_of,
                      const int32_t* topk_idx, int T, int k, int E, void* /*workspace*/, size_t /*workspace_bytes*/) {
  cpu::moe_route(offsets, row_of, token_of, topk_idx, T, k, E);
}
inline void moe_expert_counts(const CpuBackend::Exec&, int32_t* counts, const int32_t* topk_idx, int T, int k, int E) {
  cpu::moe_expert_counts(counts, topk_idx, T, k, E);
}
inline void moe_router_stats(const CpuBackend::Exec&, float* prob_sum, const float* probs, int T, int E) {
  cpu::moe_router_stats(prob_sum, probs, T, E);
}
// The load-balancing loss's gradient per expert, d aux / d probs[t, e] times weight: weight E f_e / R^2 with f_e the
// assignments to expert e in the S sparse layers' counts [S, E] and R the rows of all of them (zero when R is 0).
inline void moe_aux_gradient(const CpuBackend::Exec&, float* daux, const int32_t* counts, int S, int E, double weight,
                             double R) {
  std::vector<double> f(size_t(E), 0.0);
  for (int i = 0; i < S; ++i)
    for (int e = 0; e < E; ++e) f[size_t(e)] += double(counts[int64_t(i) * E + e]);
  for (int e = 0; e < E; ++e) daux[e] = R == 0 ? 0.f : float(weight * E * f[size_t(e)] / (R * R));
}
inline void moe_topk_backward(const CpuBackend::Exec&, float* dlogits, const float* dtopk_w, const float* daux,
                              const float* probs, const int32_t* topk_idx, const float* topk_w, int T, int E, int k,
                              bool norm_topk_prob) {
  cpu::moe_topk_backward(dlogits, dtopk_w, daux, probs, topk_idx, topk_w, T, E, k, norm_topk_prob);
}
// The router's backward from dlogits [T, E] (fp32): its weight's gradient and dh accumulated (dlogits_act: the GPU's
// bf16 copy of them; unused here).
inline void moe_router_backward(const CpuBackend::Exec&, float* dh, float* dw_router, const float* dlogits,
                                float* /*dlogits_act*/, const float* h, const float* w_router, int T, int C, int E) {
  cpu::linear_backward(dh, dw_router, nullptr, dlogits, h, w_router, T, C, E, true);
}
inline void moe_permute_backward(const CpuBackend::Exec&, float* dx, const float* dxp, const int32_t* row_of, int T,
                                 int k, int C) {
  cpu::moe_permute_backward(dx, dxp, row_of, T, k, C);
}
inline void moe_unpermute_forward(const CpuBackend::Exec&, float* y, const float* yp, const int32_t* row_of,
                                  const float* topk_w, int T, int k, int C) {
  cpu::moe_unpermute_forward(y, yp, row_of, topk_w, T, k, C);
}
inline void moe_unpermute_backward(const CpuBackend::Exec&, float* dyp, float* dtopk_w, const float* dy,
                                   const float* yp, const int32_t* row_of, const float* topk_w, int T, int k, int C) {
  cpu::moe_unpermute_backward(dyp, dtopk_w, dy, yp, row_of, topk_w, T, k, C);
}
// out = x w[e]^T over each expert's rows (rows: their number, offsets[E]).
inline void moe_expert_linear_forward(const CpuBackend::Exec&, float* out, const float* x, const float* w,
                                      const MoeExpertOffsets& eo, int E, int IC, int OC, int64_t /*rows*/) {
  cpu::moe_grouped_linear_forward(out, x, w, eo.offsets, E, IC, OC);
}
inline void moe_expert_linear_backward(const CpuBackend::Exec&, float* dx, float* dw, const float* dout,
                                       const float* x, const float* w, const MoeExpertOffsets& eo, int E, int IC,
                                       int OC, int64_t /*rows*/) {
  cpu::moe_grouped_linear_backward(dx, dw, dout, x, w, eo.offsets, E, IC, OC);
}
// dgate, dup [N] from dact: zeroed, then accumulated into.
inline void moe_swiglu_backward(const CpuBackend::Exec&, float* dgate, float* dup, const float* dact,
                                const float* gate, const float* up, int64_t N) {
  std::fill(dgate, dgate + N, 0.f);
  std::fill(dup, dup + N, 0.f);
  cpu::swiglu_backward(dgate, dup, dact, gate, up, N, true);
}

// ---- CUDA -------------------------------------------------------------------------------------------------------

#if HONE_CUDA

inline void moe_router_forward(const CudaBackend::Exec& x, float* logits, const bf16* h, const bf16* w_router, int T,
                               int C, int E) {
  cuda::gemm(false, true, T, E, C, 1.f, h, C, w_router, C, 0.f, logits, cuda::GemmOut::f32, E, nullptr, x.ctx());
}
inline void moe_topk_forward(const CudaBackend::Exec& x, float* probs, int32_t* topk_idx, float* topk_w,
                             const float* logits, int T, int E, int k, bool norm_topk_prob) {
  cuda::moe_topk_forward(probs, topk_idx, topk_w, logits, T, E, k, norm_topk_prob, x.ctx());
}
inline void moe_topk_replay(const CudaBackend::Exec& x, int32_t* topk_idx, float* topk_w, const float* probs,
                            const int32_t* forced, int64_t row_stride, int T, int E, int k, bool norm_topk_prob) {
  cuda::moe_topk_replay(topk_idx, topk_w, probs, forced, row_stride, T, E, k, norm_topk_prob, x.ctx());
}
// One strided device copy on the stream (none for no rows: a generation idle pass).
inline void moe_record_routing(const CudaBackend::Exec& x, int32_t* record, const int32_t* topk_idx, int T, int S,
                               int i, int k) {
  if (T > 0)
    CUDA_CHECK(cudaMemcpy2DAsync(record + int64_t(i) * k, size_t(S) * k * sizeof(int32_t), topk_idx,
                                 size_t(k) * sizeof(int32_t), size_t(k) * sizeof(int32_t), size_t(T),
                                 cudaMemcpyDeviceToDevice, x.ctx().stream));
}
inline void moe_route(const CudaBackend::Exec& x, int32_t* offsets, int32_t* row_of, int32_t* token_of,
                      const int32_t* topk_idx, int T, int k, int E, void* workspace, size_t workspace_bytes) {
  cuda::moe_route(offsets, row_of, token_of, topk_idx, T, k, E, workspace, workspace_bytes, x.ctx());
}
inline void moe_expert_counts(const CudaBackend::Exec& x, int32_t* counts, const int32_t* topk_idx, int T, int k,
                              int E) {
  cuda::moe_expert_counts(counts, topk_idx, T, k, E, x.ctx());
}
inline void moe_router_stats(const CudaBackend::Exec& x, float* prob_sum, const float* probs, int T, int E) {
  cuda::moe_router_stats(prob_sum, probs, T, E, x.ctx());
}
inline void moe_aux_gradient(const CudaBackend::Exec& x, float* daux, const int32_t* counts, int S, int E,
                             double weight, double R) {
  cuda::moe_aux_loss_backward(daux, counts, S, E, float(weight * E / std::max(1.0, R * R)), x.ctx());
}
inline void moe_topk_backward(const CudaBackend::Exec& x, float* dlogits, const float* dtopk_w, const float* daux,
                              const float* probs, const int32_t* topk_idx, const float* topk_w, int T, int E, int k,
                              bool norm_topk_prob) {
  cuda::moe_topk_backward(dlogits, dtopk_w, daux, probs, topk_idx, topk_w, T, E, k, norm_topk_prob, x.ctx());
}
// dlogits rounded to bf16 once (into dlogits_act [T, E]), then the two GEMMs (fp32 weight gradient, bf16 dh).
inline void moe_router_backward(const CudaBackend::Exec& x, bf16* dh, float* dw_router, const float* dlogits,
                                bf16* dlogits_act, const bf16* h, const bf16* w_router, int T, int C, int E) {
  const cuda::GpuContext& ctx = x.ctx();
  cuda::f32_to_bf16(dlogits_act, dlogits, int64_t(T) * E, ctx);
  cuda::gemm(true, false, E, C, T, 1.f, dlogits_act, E, h, C, 1.f, dw_router, cuda::GemmOut::f32, C, nullptr, ctx);
  cuda::gemm(false, false, T, C, E, 1.f, dlogits_act, E, w_router, C, 1.f, dh, cuda::GemmOut::bf16, C, nullptr, ctx);
}
inline void moe_permute_backward(const CudaBackend::Exec& x, bf16* dx, const bf16* dxp, const int32_t* row_of, int T,
                                 int k, int C) {
  cuda::moe_permute_backward(dx, dxp, row_of, T, k, C, x.ctx());
}
inline void moe_unpermute_forward(const CudaBackend::Exec& x, bf16* y, const bf16* yp, const int32_t* row_of,
                                  const float* topk_w, int T, int k, int C) {
  cuda::moe_unpermute_forward(y, yp, row_of, topk_w, T, k, C, x.ctx());
}
inline void moe_unpermute_backward(const CudaBackend::Exec& x, bf16* dyp, float* dtopk_w, const bf16* dy,
                                   const bf16* yp, const int32_t* row_of, const float* topk_w, int T, int k, int C) {
  cuda::moe_unpermute_backward(dyp, dtopk_w, dy, yp, row_of, topk_w, T, k, C, x.ctx());
}
// cuBLAS where the host holds the offsets, else the kernel over the device's (rows sizes its launch).
inline void moe_expert_linear_forward(const CudaBackend::Exec& x, bf16* out, const bf16* in, const bf16* w,
                                      const MoeExpertOffsets& eo, int E, int IC, int OC, int64_t rows) {
  if (eo.host) cuda::moe_grouped_linear_forward_cublas(out, in, w, eo.host, E, IC, OC, x.ctx());
  else cuda::moe_grouped_linear_forward(out, in, w, eo.offsets, E, IC, OC, int(rows), x.ctx());
}
inline void moe_expert_linear_backward(const CudaBackend::Exec& x, bf16* dx, float* dw, const bf16* dout,
                                       const bf16* in, const bf16* w, const MoeExpertOffsets& eo, int E, int IC,
                                       int OC, int64_t rows) {
  if (eo.host) cuda::moe_grouped_linear_backward_cublas(dx, dw, dout, in, w, eo.host, E, IC, OC, x.ctx());
  else cuda::moe_grouped_linear_backward(dx, dw, dout, in, w, eo.offsets, E, IC, OC, int(rows), x.ctx());
}
// Writes dgate and dup (no zeroing needed).
inline void moe_swiglu_backward(const CudaBackend::Exec& x, bf16* dgate, bf16* dup, const bf16* dact,
                                const bf16* gate, const bf16* up, int64_t N) {
  cuda::swiglu_backward(dgate, dup, dact, gate, up, N, /*accumulate=*/false, x.ctx());
}

#endif  // HONE_CUDA

}  // namespace hone
