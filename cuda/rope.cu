// Rotary position embedding on bf16 x[T, H, D], pairs (i, i + D/2) as Hugging Face's rotate_half. The angle is
// float(pos) * inv_freq[i] in fp32 as on the CPU, then sincosf (full-precision, not the fast intrinsic). One block
// per token: thread (i, y) computes the cos/sin of pair i once and rotates that pair in heads y, y + blockDim.y, ...
// Every pair is read and written by one thread only, so forward may run in place (out == x, rows of their own).
#include "cuda/check.h"
#include "cuda/dependent_launch.cuh"
#include "cuda/ops_cuda.h"
#include "runtime/error.h"

namespace hone::cuda {

namespace {

constexpr int kThreads = 256;

// backward == false: out = R x; backward == true: out (+)= R^T x (added to the old out when accumulate).
template <bool kBackward>
__global__ void rope_kernel(bf16* out, const bf16* x, const int32_t* pos, const float* inv_freq, int H, int D,
                            int64_t ldx, bool accumulate = false) {
  dependent_wait();  // may start before the grid before it ends (cuda/dependent_launch.cuh)
  const int t = blockIdx.x, half = D / 2, i = threadIdx.x;
  if (i >= half) return;
  const float angle = float(pos[t]) * inv_freq[i];
  float sn, cs;
  sincosf(angle, &sn, &cs);
  for (int h = threadIdx.y; h < H; h += blockDim.y) {
    const int64_t base = (int64_t(t) * H + h) * D, xbase = int64_t(t) * ldx + int64_t(h) * D;
    const float a = __bfloat162float(x[xbase + i]), b = __bfloat162float(x[xbase + i + half]);
    if (kBackward) {
      const float lo = (accumulate ? __bfloat162float(out[base + i]) : 0.f) + (a * cs + b * sn);
      const float hi = (accumulate ? __bfloat162float(out[base + i + half]) : 0.f) + (b * cs - a * sn);
      out[base + i] = __float2bfloat16_rn(lo);
      out[base + i + half] = __float2bfloat16_rn(hi);
    } else {
      out[base + i] = __float2bfloat16_rn(a * cs + (-b) * sn);
      out[base + i + half] = __float2bfloat16_rn(b * cs + a * sn);
    }
  }
}

dim3 rope_block(int H, int D) {
  const int half = D / 2;
  int y = kThreads / half;
  if (y < 1) y = 1;
  if (y > H) y = H;
  return dim3(unsigned(half), unsigned(y));
}

void check_shape(int H, int D) {
  HONE_CHECK(D > 0 && D % 2 == 0 && D / 2 <= 1024, "RoPE head_dim must be even and at most 2048, got ", D);
  HONE_CHECK(H > 0, "RoPE needs at least one head, got ", H);
}

}  // namespace

void rope_forward(bf16* out, const bf16* x, const int32_t* pos, const float* inv_freq, int T, int H, int D,
                  const GpuContext& ctx, int64_t ldx) {
  if (T <= 0) return;
  check_shape(H, D);
  HONE_CHECK(ldx == 0 || ldx >= int64_t(H) * D, "RoPE input row stride ", ldx, " below H * D = ", H * D);
  launch_dependent(rope_kernel<false>, dim3(unsigned(T)), rope_block(H, D), 0, ctx.stream, out, x, pos, inv_freq, H, D,
                   ldx ? ldx : int64_t(H) * D, false);
  CUDA_CHECK_LAST();
}

void rope_backward(bf16* dx, const bf16* dout, const int32_t* pos, const float* inv_freq, int T, int H, int D,
                   bool accumulate, const GpuContext& ctx) {
  if (T <= 0) return;
  check_shape(H, D);
  rope_kernel<true><<<unsigned(T), rope_block(H, D), 0, ctx.stream>>>(dx, dout, pos, inv_freq, H, D,
                                                                      int64_t(H) * D, accumulate);
  CUDA_CHECK_LAST();
}

}  // namespace hone::cuda
