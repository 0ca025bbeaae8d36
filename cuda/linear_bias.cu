// Bias kernels of the linear layer (cuda/linear_bias.h). The gradient is deterministic: a block owns 32 columns;
// its 32 x 8 threads read coalesced rows (a warp reads 32 neighbouring columns of one row), and the 8 row phases
// are summed in shared memory in a fixed order.
#include "cuda/linear_bias.h"
#include <algorithm>

#include "cuda/check.h"

namespace hone::cuda {

namespace {

constexpr int kCols = 32;
constexpr int kRowPhases = 8;

__global__ void bias_grad_kernel(float* __restrict__ dbias, const bf16* __restrict__ dout, int T, int OC) {
  __shared__ float partial[kRowPhases][kCols + 1];
  const int c = blockIdx.x * kCols + threadIdx.x;
  float acc = 0.f;
  if (c < OC)
    for (int t = threadIdx.y; t < T; t += kRowPhases) acc += __bfloat162float(dout[int64_t(t) * OC + c]);
  partial[threadIdx.y][threadIdx.x] = acc;
  __syncthreads();
  if (threadIdx.y == 0 && c < OC) {
    float s = 0.f;
    for (int k = 0; k < kRowPhases; ++k) s += partial[k][threadIdx.x];
    dbias[c] += s;
  }
}

__global__ void bias_add_kernel(bf16* __restrict__ out, const bf16* __restrict__ bias, int T, int OC, int ld) {
  const int64_t total = int64_t(T) * OC;
  for (int64_t i = int64_t(blockIdx.x) * blockDim.x + threadIdx.x; i < total; i += int64_t(gridDim.x) * blockDim.x) {
    const int64_t t = i / OC, o = i - t * OC;
    bf16& x = out[t * ld + o];
    x = __float2bfloat16(__bfloat162float(x) + __bfloat162float(bias[o]));
  }
}

}  // namespace

void bias_add_rows(bf16* out, const bf16* bias, int T, int OC, int ld, const GpuContext& ctx) {
  const int64_t total = int64_t(T) * OC;
  if (total <= 0) return;
  const int64_t cap = int64_t(ctx.sm_count > 0 ? ctx.sm_count : 132) * 16;
  const int64_t blocks = std::min<int64_t>((total + 255) / 256, cap);
  bias_add_kernel<<<int(blocks), 256, 0, ctx.stream>>>(out, bias, T, OC, ld);
  CUDA_CHECK_LAST();
}

void bias_grad_accumulate(float* dbias, const bf16* dout, int T, int OC, const GpuContext& ctx) {
  HONE_CHECK(T >= 0 && OC >= 0, "bad bias gradient shape T=", T, " OC=", OC);
  if (T == 0 || OC == 0) return;
  const dim3 block(kCols, kRowPhases);
  const dim3 grid((OC + kCols - 1) / kCols);
  bias_grad_kernel<<<grid, block, 0, ctx.stream>>>(dbias, dout, T, OC);
  CUDA_CHECK_LAST();
}

}  // namespace hone::cuda
