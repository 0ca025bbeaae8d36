// The mixture-of-experts routing plan and the row moves on the GPU, the twins of src/ops/cpu/moe.cpp: the T k
// assignments sorted by expert with a stable radix sort (CUB: within an expert, assignments in order, so the
// experts' weight gradients sum their rows in a fixed order), the permutation of token rows into that order and
// the weighted combine back. Every sum runs in fp32 in a fixed order and is rounded once.
#include <cub/device/device_radix_sort.cuh>

#include "cuda/check.h"
#include "cuda/moe_ops.h"

namespace hone::cuda {

namespace {

constexpr int kThreads = 128;

size_t aligned(size_t b) { return (b + 255) / 256 * 256; }

int key_bits(int E) {
  int bits = 1;
  while ((1 << bits) < E) ++bits;
  return bits;
}

__global__ void iota_kernel(int32_t* v, int N) {
  const int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < N) v[i] = i;
}

// From the sorted (expert, assignment) pairs: the token of each row, the row of each assignment.
__global__ void plan_rows_kernel(int32_t* row_of, int32_t* token_of, const int32_t* sorted_assignment, int N, int k) {
  const int r = blockIdx.x * blockDim.x + threadIdx.x;
  if (r >= N) return;
  const int a = sorted_assignment[r];
  token_of[r] = a / k;
  row_of[a] = r;
}

// offsets[e] = the first sorted row of expert e or later (a lower bound), e = 0..E.
__global__ void plan_offsets_kernel(int32_t* offsets, const uint32_t* sorted_expert, int N, int E) {
  const int e = blockIdx.x * blockDim.x + threadIdx.x;
  if (e > E) return;
  int lo = 0, hi = N;
  while (lo < hi) {
    const int mid = (lo + hi) / 2;
    if (int(sorted_expert[mid]) < e) lo = mid + 1;
    else hi = mid;
  }
  offsets[e] = lo;
}

__global__ void permute_forward_kernel(bf16* xp, const bf16* x, const int32_t* token_of, int C) {
  const int r = blockIdx.x;
  const bf16* src = x + int64_t(token_of[r]) * C;
  bf16* dst = xp + int64_t(r) * C;
  for (int c = threadIdx.x; c < C; c += blockDim.x) dst[c] = src[c];
}

__global__ void permute_backward_kernel(bf16* dx, const bf16* dxp, const int32_t* row_of, int k, int C) {
  const int t = blockIdx.x;
  bf16* d = dx + int64_t(t) * C;
  for (int c = threadIdx.x; c < C; c += blockDim.x) {
    float s = __bfloat162float(d[c]);
    float add = 0.f;
    for (int j = 0; j < k; ++j) add += __bfloat162float(dxp[int64_t(row_of[int64_t(t) * k + j]) * C + c]);
    d[c] = __float2bfloat16_rn(s + add);
  }
}

__global__ void unpermute_forward_kernel(bf16* y, const bf16* yp, const int32_t* row_of, const float* topk_w, int k,
                                         int C) {
  const int t = blockIdx.x;
  for (int c = threadIdx.x; c < C; c += blockDim.x) {
    float s = 0.f;
    for (int j = 0; j < k; ++j) {
      const int64_t a = int64_t(t) * k + j;
      s += topk_w[a] * __bfloat162float(yp[int64_t(row_of[a]) * C + c]);
    }
    y[int64_t(t) * C + c] = __float2bfloat16_rn(s);
  }
}

// One block per token: dyp rows (each row belongs to one assignment: no other writer) and the k dot products.
__global__ void unpermute_backward_kernel(bf16* dyp, float* dtopk_w, const bf16* dy, const bf16* yp,
                                          const int32_t* row_of, const float* topk_w, int k, int C) {
  const int t = blockIdx.x;
  __shared__ float part[kThreads];
  const bf16* g = dy + int64_t(t) * C;
  for (int j = 0; j < k; ++j) {
    const int64_t a = int64_t(t) * k + j;
    const int64_t r = row_of[a];
    const float w = topk_w[a];
    float dot = 0.f;
    for (int c = threadIdx.x; c < C; c += blockDim.x) {
      const float gc = __bfloat162float(g[c]);
      bf16* d = dyp + r * C + c;
      *d = __float2bfloat16_rn(__bfloat162float(*d) + w * gc);
      dot += gc * __bfloat162float(yp[r * C + c]);
    }
    part[threadIdx.x] = dot;
    __syncthreads();
    for (int n = kThreads / 2; n > 0; n >>= 1) {
      if (int(threadIdx.x) < n) part[threadIdx.x] += part[threadIdx.x + n];
      __syncthreads();
    }
    if (threadIdx.x == 0 && dtopk_w) dtopk_w[a] += part[0];
    __syncthreads();
  }
}

}  // namespace

size_t moe_route_workspace_bytes(int N, int E) {
  size_t sort_bytes = 0;
  CUDA_CHECK(cub::DeviceRadixSort::SortPairs(nullptr, sort_bytes, static_cast<const uint32_t*>(nullptr),
                                             static_cast<uint32_t*>(nullptr), static_cast<const int32_t*>(nullptr),
                                             static_cast<int32_t*>(nullptr), N, 0, key_bits(E)));
  return 3 * aligned(size_t(N) * 4) + aligned(sort_bytes);
}

void moe_route(int32_t* offsets, int32_t* row_of, int32_t* token_of, const int32_t* topk_idx, int T, int k, int E,
               void* workspace, size_t workspace_bytes, const GpuContext& ctx) {
  const int N = T * k;
  HONE_CHECK(workspace_bytes >= moe_route_workspace_bytes(N, E), "moe_route: a workspace of ", workspace_bytes,
             " bytes, ", moe_route_workspace_bytes(N, E), " needed");
  if (N == 0) {
    CUDA_CHECK(cudaMemsetAsync(offsets, 0, size_t(E + 1) * sizeof(int32_t), ctx.stream));
    return;
  }
  char* ws = static_cast<char*>(workspace);
  int32_t* ids = reinterpret_cast<int32_t*>(ws);
  uint32_t* sorted_expert = reinterpret_cast<uint32_t*>(ws + aligned(size_t(N) * 4));
  int32_t* sorted_ids = reinterpret_cast<int32_t*>(ws + 2 * aligned(size_t(N) * 4));
  void* temp = ws + 3 * aligned(size_t(N) * 4);
  size_t temp_bytes = workspace_bytes - 3 * aligned(size_t(N) * 4);
  iota_kernel<<<(N + 255) / 256, 256, 0, ctx.stream>>>(ids, N);
  CUDA_CHECK_LAST();
  CUDA_CHECK(cub::DeviceRadixSort::SortPairs(temp, temp_bytes, reinterpret_cast<const uint32_t*>(topk_idx),
                                             sorted_expert, ids, sorted_ids, N, 0, key_bits(E), ctx.stream));
  plan_rows_kernel<<<(N + 255) / 256, 256, 0, ctx.stream>>>(row_of, token_of, sorted_ids, N, k);
  CUDA_CHECK_LAST();
  plan_offsets_kernel<<<(E + 1 + 127) / 128, 128, 0, ctx.stream>>>(offsets, sorted_expert, N, E);
  CUDA_CHECK_LAST();
}

void moe_permute_forward(bf16* xp, const bf16* x, const int32_t* token_of, int N, int C, const GpuContext& ctx) {
  if (N == 0) return;
  permute_forward_kernel<<<N, kThreads, 0, ctx.stream>>>(xp, x, token_of, C);
  CUDA_CHECK_LAST();
}

void moe_permute_backward(bf16* dx, const bf16* dxp, const int32_t* row_of, int T, int k, int C,
                          const GpuContext& ctx) {
  if (T == 0) return;
  permute_backward_kernel<<<T, kThreads, 0, ctx.stream>>>(dx, dxp, row_of, k, C);
  CUDA_CHECK_LAST();
}

void moe_unpermute_forward(bf16* y, const bf16* yp, const int32_t* row_of, const float* topk_w, int T, int k, int C,
                           const GpuContext& ctx) {
  if (T == 0) return;
  unpermute_forward_kernel<<<T, kThreads, 0, ctx.stream>>>(y, yp, row_of, topk_w, k, C);
  CUDA_CHECK_LAST();
}

void moe_unpermute_backward(bf16* dyp, float* dtopk_w, const bf16* dy, const bf16* yp, const int32_t* row_of,
                            const float* topk_w, int T, int k, int C, const GpuContext& ctx) {
  if (T == 0) return;
  unpermute_backward_kernel<<<T, kThreads, 0, ctx.stream>>>(dyp, dtopk_w, dy, yp, row_of, topk_w, k, C);
  CUDA_CHECK_LAST();
}

}  // namespace hone::cuda
