// AdamW on the flat fp32 master buffer, one fused pass: m, v and param read and written once, grad read once
// (per element 16 B read, 12 B written). The bias corrections 1 - beta^step are formed on
// the host in double and rounded to fp32, exactly as the CPU twin does, and the per-element arithmetic follows the
// CPU's order of operations (IEEE division and sqrt), so the two agree to fp32 rounding (fused multiply-adds).
// float4 accesses when all four buffers are 16-byte aligned; a scalar tail for N % 4.
#include <cmath>

#include "cuda/check.h"
#include "cuda/elementwise_common.cuh"
#include "cuda/ops_cuda.h"
#include "runtime/error.h"

namespace hone::cuda {

namespace {

constexpr int kThreads = 256;

struct AdamParams {
  float lr, beta1, beta2, eps, weight_decay, bc1, bc2;
};

__device__ __forceinline__ void adam_one(float& p, float g, float& m, float& v, const AdamParams& a) {
  m = a.beta1 * m + (1.0f - a.beta1) * g;
  v = a.beta2 * v + (1.0f - a.beta2) * g * g;
  const float mhat = m / a.bc1;
  const float vhat = v / a.bc2;
  p -= a.lr * (mhat / (sqrtf(vhat) + a.eps) + a.weight_decay * p);
}

__global__ void adamw_kernel(float* param, const float* grad, float* m, float* v, int64_t N, AdamParams a, bool vec) {
  const int64_t start = int64_t(blockIdx.x) * blockDim.x + threadIdx.x, stride = int64_t(gridDim.x) * blockDim.x;
  const int64_t nvec = vec ? N / 4 : 0;
  for (int64_t i = start; i < nvec; i += stride) {
    float4 p = reinterpret_cast<float4*>(param)[i];
    const float4 g = reinterpret_cast<const float4*>(grad)[i];
    float4 mm = reinterpret_cast<float4*>(m)[i];
    float4 vv = reinterpret_cast<float4*>(v)[i];
    adam_one(p.x, g.x, mm.x, vv.x, a);
    adam_one(p.y, g.y, mm.y, vv.y, a);
    adam_one(p.z, g.z, mm.z, vv.z, a);
    adam_one(p.w, g.w, mm.w, vv.w, a);
    reinterpret_cast<float4*>(param)[i] = p;
    reinterpret_cast<float4*>(m)[i] = mm;
    reinterpret_cast<float4*>(v)[i] = vv;
  }
  for (int64_t i = nvec * 4 + start; i < N; i += stride) {
    float p = param[i], mm = m[i], vv = v[i];
    adam_one(p, grad[i], mm, vv, a);
    param[i] = p;
    m[i] = mm;
    v[i] = vv;
  }
}

}  // namespace

void adamw_update(float* param, const float* grad, float* m, float* v, int64_t N, float lr, float beta1, float beta2,
                  float eps, float weight_decay, int step, const GpuContext& ctx) {
  HONE_CHECK(step >= 1, "AdamW step count is 1-based, got ", step);
  if (N <= 0) return;
  const AdamParams a{lr,
                     beta1,
                     beta2,
                     eps,
                     weight_decay,
                     float(1.0 - std::pow(double(beta1), step)),
                     float(1.0 - std::pow(double(beta2), step))};
  const bool vec = detail::aligned16(param) && detail::aligned16(grad) && detail::aligned16(m) && detail::aligned16(v);
  const int64_t work = vec ? N / 4 + N % 4 : N;
  adamw_kernel<<<detail::grid_for(work, kThreads, ctx), kThreads, 0, ctx.stream>>>(param, grad, m, v, N, a, vec);
  CUDA_CHECK_LAST();
}

}  // namespace hone::cuda
