// The merge of a ring attention block's partial result into the running one by their log-sum-exp (the CUDA twin of
// cpu::attention_merge_forward): one warp per (query row of a segment, head), lanes over the head's D features. The
// running output is fp32 (rounded to bf16 once by the caller after the last block); the block's comes from cuDNN in
// bf16.
#include <cmath>

#include "cuda/check.h"
#include "cuda/ops_cuda.h"

namespace hone::cuda {

namespace {

constexpr int kWarps = 4;

// Grid (warp blocks over max_q * H, segments).
__global__ void merge_kernel(float* out, float* lse, const bf16* block_out, const float* block_lse,
                             AttentionSegments seg, int T, int H, int D) {
  const int lane = threadIdx.x & 31, s = blockIdx.y;
  const int64_t r = int64_t(blockIdx.x) * kWarps + threadIdx.x / 32;
  if (r >= int64_t(seg.q_len[s]) * H) return;
  const int t = seg.q_start[s] + int(r / H), h = int(r % H);
  const int64_t row = (int64_t(t) * H + h) * D;
  float* l = lse + int64_t(h) * T + t;
  const float la = *l, lb = block_lse[int64_t(h) * T + t];
  float wa = 0.f, wb = 1.f, l_new = lb;
  if (la != -INFINITY) {  // else nothing merged yet: the block as it is
    const float m = fmaxf(la, lb);
    const float ea = expf(la - m), eb = expf(lb - m), sum = ea + eb;
    wa = ea / sum;
    wb = eb / sum;
    l_new = m + logf(sum);
  }
  for (int d = lane; d < D; d += 32) {
    const float b = __bfloat162float(block_out[row + d]);
    out[row + d] = wa == 0.f ? b : wa * out[row + d] + wb * b;
  }
  __syncwarp();
  if (lane == 0) *l = l_new;
}

}  // namespace

void attention_merge_forward(float* out, float* lse, const bf16* block_out, const float* block_lse,
                             const AttentionSegments& seg, int T, int H, int D, const GpuContext& ctx) {
  HONE_CHECK(seg.count >= 0 && seg.count <= 65535, "attention merge: ", seg.count, " segments (at most 65535)");
  if (seg.count == 0 || seg.max_q == 0 || H == 0 || D == 0) return;
  const dim3 grid{unsigned((int64_t(seg.max_q) * H + kWarps - 1) / kWarps), unsigned(seg.count)};
  merge_kernel<<<grid, kWarps * 32, 0, ctx.stream>>>(out, lse, block_out, block_lse, seg, T, H, D);
  CUDA_CHECK_LAST();
}

}  // namespace hone::cuda
