// The mixture-of-experts router on the GPU, in fp32 as its CPU twin (src/ops/cpu/moe.cpp): softmax and top-k of
// the router logits (one warp per row), the backward through the routing weights and the load-balancing
// loss's per-expert gradient, routing replay, and the per-expert probability sums of the load-balancing loss.
#include "cuda/check.h"
#include "cuda/moe_ops.h"

namespace hone::cuda {

namespace {

constexpr int kWarp = 32;
constexpr int kRowsPerBlock = 8;  // warps per block, one row each
constexpr int kMaxExperts = 512;  // per-lane registers: kMaxExperts / 32 values
constexpr int kMaxTopK = 32;

__device__ __forceinline__ float warp_max(float v) {
  for (int o = kWarp / 2; o > 0; o >>= 1) v = fmaxf(v, __shfl_xor_sync(0xffffffffu, v, o));
  return v;
}
__device__ __forceinline__ double warp_sum(double v) {
  for (int o = kWarp / 2; o > 0; o >>= 1) v += __shfl_xor_sync(0xffffffffu, v, o);
  return v;
}

// Lane l holds experts l, l + 32, ...: probabilities in p[] (NaN-free: softmax of finite logits).
__global__ void topk_forward_kernel(float* probs, int32_t* topk_idx, float* topk_w, const float* logits, int T, int E,
                                    int k, bool norm) {
  const int lane = threadIdx.x % kWarp;
  const int t = blockIdx.x * kRowsPerBlock + threadIdx.x / kWarp;
  if (t >= T) return;
  const float* z = logits + int64_t(t) * E;
  constexpr int kPer = kMaxExperts / kWarp;
  float p[kPer];
  float m = -INFINITY;
#pragma unroll
  for (int i = 0; i < kPer; ++i) {
    const int e = lane + i * kWarp;
    p[i] = e < E ? z[e] : -INFINITY;
    m = fmaxf(m, p[i]);
  }
  m = warp_max(m);
  double s = 0;
#pragma unroll
  for (int i = 0; i < kPer; ++i) {
    const int e = lane + i * kWarp;
    if (e < E) s += exp(double(p[i]) - double(m));
  }
  s = warp_sum(s);
#pragma unroll
  for (int i = 0; i < kPer; ++i) {
    const int e = lane + i * kWarp;
    if (e < E) {
      p[i] = float(exp(double(p[i]) - double(m)) / s);
      probs[int64_t(t) * E + e] = p[i];
    } else {
      p[i] = -1.f;  // below every probability: never selected
    }
  }
  // k rounds of a warp arg-max: the larger probability, the lower expert id among equals.
  double sum = 0;
  float chosen[kMaxTopK];
  for (int j = 0; j < k; ++j) {
    float best = -2.f;
    int best_e = E;
#pragma unroll
    for (int i = 0; i < kPer; ++i) {
      const int e = lane + i * kWarp;
      if (p[i] > best || (p[i] == best && e < best_e)) best = p[i], best_e = e;
    }
    for (int o = kWarp / 2; o > 0; o >>= 1) {
      const float ob = __shfl_xor_sync(0xffffffffu, best, o);
      const int oe = __shfl_xor_sync(0xffffffffu, best_e, o);
      if (ob > best || (ob == best && oe < best_e)) best = ob, best_e = oe;
    }
    if (best_e % kWarp == lane) {
#pragma unroll
      for (int i = 0; i < kPer; ++i)
        if (lane + i * kWarp == best_e) p[i] = -1.f;
    }
    chosen[j] = best;
    sum += best;
    if (lane == 0) topk_idx[int64_t(t) * k + j] = best_e;
  }
  if (lane == 0)
    for (int j = 0; j < k; ++j) topk_w[int64_t(t) * k + j] = norm ? float(double(chosen[j]) / sum) : chosen[j];
}

// One warp per row: dp[e] = daux[e] + the routing weights' part; dlogits += p (dp - sum p dp).
__global__ void topk_backward_kernel(float* dlogits, const float* dtopk_w, const float* daux, const float* probs,
                                     const int32_t* topk_idx, const float* topk_w, int T, int E, int k, bool norm) {
  const int lane = threadIdx.x % kWarp;
  const int t = blockIdx.x * kRowsPerBlock + threadIdx.x / kWarp;
  if (t >= T) return;
  const float* p = probs + int64_t(t) * E;
  const int32_t* idx = topk_idx + int64_t(t) * k;
  const float* w = topk_w + int64_t(t) * k;
  const float* dw = dtopk_w + int64_t(t) * k;
  double S = 0, dot = 0;
  for (int j = 0; j < k; ++j) S += p[idx[j]], dot += double(dw[j]) * w[j];
  double pdp = 0;
  for (int e = lane; e < E; e += kWarp) {
    double dp = daux ? double(daux[e]) : 0.0;
    for (int j = 0; j < k; ++j)
      if (idx[j] == e) dp += norm ? (double(dw[j]) - dot) / S : double(dw[j]);
    pdp += double(p[e]) * dp;
  }
  pdp = warp_sum(pdp);
  float* dz = dlogits + int64_t(t) * E;
  for (int e = lane; e < E; e += kWarp) {
    double dp = daux ? double(daux[e]) : 0.0;
    for (int j = 0; j < k; ++j)
      if (idx[j] == e) dp += norm ? (double(dw[j]) - dot) / S : double(dw[j]);
    dz[e] += float(double(p[e]) * (dp - pdp));
  }
}

__global__ void topk_replay_kernel(int32_t* topk_idx, float* topk_w, const float* probs, const int32_t* forced,
                                   int64_t row_stride, int T, int E, int k, bool norm) {
  const int t = blockIdx.x * blockDim.x + threadIdx.x;
  if (t >= T) return;
  const int32_t* f = forced + int64_t(t) * row_stride;
  if (f[0] < 0) return;
  const float* p = probs + int64_t(t) * E;
  double sum = 0;
  for (int j = 0; j < k; ++j) {
    const int e = min(max(f[j], 0), E - 1);
    topk_idx[int64_t(t) * k + j] = e;
    sum += p[e];
  }
  for (int j = 0; j < k; ++j) {
    const float pe = p[topk_idx[int64_t(t) * k + j]];
    topk_w[int64_t(t) * k + j] = norm ? float(double(pe) / sum) : pe;
  }
}

// One block per expert column; each thread sums a fixed stride of rows, then a tree in shared memory (a fixed
// order: reproducible).
constexpr int kStatsThreads = 256;
__global__ void router_stats_kernel(float* prob_sum, const float* probs, int T, int E) {
  const int e = blockIdx.x;
  __shared__ double part[kStatsThreads];
  double s = 0;
  for (int t = threadIdx.x; t < T; t += kStatsThreads) s += probs[int64_t(t) * E + e];
  part[threadIdx.x] = s;
  __syncthreads();
  for (int n = kStatsThreads / 2; n > 0; n >>= 1) {
    if (int(threadIdx.x) < n) part[threadIdx.x] += part[threadIdx.x + n];
    __syncthreads();
  }
  if (threadIdx.x == 0) prob_sum[e] += float(part[0]);
}

// Integer counts: atomic adds give the same result in any order.
__global__ void expert_counts_kernel(int32_t* counts, const int32_t* topk_idx, int64_t n) {
  const int64_t a = int64_t(blockIdx.x) * blockDim.x + threadIdx.x;
  if (a < n) atomicAdd(counts + topk_idx[a], 1);
}

__global__ void aux_loss_backward_kernel(float* daux, const int32_t* counts, int L, int E, float scale) {
  const int e = blockIdx.x * blockDim.x + threadIdx.x;
  if (e >= E) return;
  long long n = 0;
  for (int l = 0; l < L; ++l) n += counts[int64_t(l) * E + e];
  daux[e] = float(double(scale) * double(n));
}

void check_router(int E, int k) {
  HONE_CHECK(E >= 1 && E <= kMaxExperts, "the GPU router handles up to ", kMaxExperts, " experts, not ", E);
  HONE_CHECK(k >= 1 && k <= E && k <= kMaxTopK, "top-", k, " of ", E, " experts (at most ", kMaxTopK, ")");
}

}  // namespace

void moe_topk_forward(float* probs, int32_t* topk_idx, float* topk_w, const float* logits, int T, int E, int k,
                      bool norm_topk_prob, const GpuContext& ctx) {
  check_router(E, k);
  if (T == 0) return;
  topk_forward_kernel<<<(T + kRowsPerBlock - 1) / kRowsPerBlock, kRowsPerBlock * kWarp, 0, ctx.stream>>>(
      probs, topk_idx, topk_w, logits, T, E, k, norm_topk_prob);
  CUDA_CHECK_LAST();
}

void moe_topk_backward(float* dlogits, const float* dtopk_w, const float* daux, const float* probs,
                       const int32_t* topk_idx, const float* topk_w, int T, int E, int k, bool norm_topk_prob,
                       const GpuContext& ctx) {
  check_router(E, k);
  if (T == 0) return;
  topk_backward_kernel<<<(T + kRowsPerBlock - 1) / kRowsPerBlock, kRowsPerBlock * kWarp, 0, ctx.stream>>>(
      dlogits, dtopk_w, daux, probs, topk_idx, topk_w, T, E, k, norm_topk_prob);
  CUDA_CHECK_LAST();
}

void moe_topk_replay(int32_t* topk_idx, float* topk_w, const float* probs, const int32_t* forced, int64_t row_stride,
                     int T, int E, int k, bool norm_topk_prob, const GpuContext& ctx) {
  check_router(E, k);
  if (T == 0) return;
  topk_replay_kernel<<<(T + 127) / 128, 128, 0, ctx.stream>>>(topk_idx, topk_w, probs, forced, row_stride, T, E, k,
                                                              norm_topk_prob);
  CUDA_CHECK_LAST();
}

void moe_router_stats(float* prob_sum, const float* probs, int T, int E, const GpuContext& ctx) {
  if (T == 0 || E == 0) return;
  router_stats_kernel<<<E, kStatsThreads, 0, ctx.stream>>>(prob_sum, probs, T, E);
  CUDA_CHECK_LAST();
}

void moe_expert_counts(int32_t* counts, const int32_t* topk_idx, int T, int k, int E, const GpuContext& ctx) {
  if (E == 0) return;
  CUDA_CHECK(cudaMemsetAsync(counts, 0, size_t(E) * sizeof(int32_t), ctx.stream));
  const int64_t n = int64_t(T) * k;
  if (n == 0) return;
  expert_counts_kernel<<<int((n + 255) / 256), 256, 0, ctx.stream>>>(counts, topk_idx, n);
  CUDA_CHECK_LAST();
}

void moe_aux_loss_backward(float* daux, const int32_t* counts, int L, int E, float scale, const GpuContext& ctx) {
  if (E == 0) return;
  aux_loss_backward_kernel<<<(E + 127) / 128, 128, 0, ctx.stream>>>(daux, counts, L, E, scale);
  CUDA_CHECK_LAST();
}

}  // namespace hone::cuda
