// Decode attention's plain path at GQA 8 and head dim 128 on the tensor cores (the arguments and the output are
// those of cuda/paged_attention.cu's plain path; doc/cuda-generation-kernels.md has the design).
// A CTA takes the 8 query heads of one row on one KV head (Qwen3-30B-A3B's 32 over 4) over tokens [t0, t1), each warp
// 16 tokens a step. S = Q K^T is an m16n8k16 MMA with the 8 heads as rows 0-7 (rows 8-15 zero) and 8 tokens as
// columns; P V is one with the heads as rows, 16 tokens as k and 8 output dimensions as columns, P taken from the two
// S tiles' accumulators. The dot product does not depend on the order of its dimensions, so a lane's k slots map to
// dimensions it loads as whole 16-byte vectors of Q and K (slots 2t, 2t+1 and 2t+8, 2t+9 of k step 2j + h are
// dimensions 8t + 32j + 4h + {0, 1} and + {2, 3}); likewise output column g of n tile nt is dimension 16g + nt, so a
// lane reads its 4 tokens' values as 16-dimension runs. The online softmax is the CUDA-core path's (base 2, fp32).
#include <cmath>
#include <cstdint>

#include <cuda_bf16.h>

#include "cuda/check.h"
#include "cuda/dependent_launch.cuh"
#include "cuda/paged_attention_args.cuh"

namespace hone::cuda::paged {

namespace {

__device__ __forceinline__ void mma_16816(float (&d)[4], uint32_t a0, uint32_t a2, uint32_t b0, uint32_t b1) {
  // Rows 8-15 of A are zero (a1 = a3 = 0): only 8 query heads.
  asm volatile(
      "mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, {%0,%1,%2,%3};\n"
      : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
      : "r"(a0), "r"(0u), "r"(a2), "r"(0u), "r"(b0), "r"(b1));
}

__device__ __forceinline__ uint32_t pack_bf16(float lo, float hi) {
  const __nv_bfloat162 v = __floats2bfloat162_rn(lo, hi);
  return *reinterpret_cast<const uint32_t*>(&v);
}

__device__ __forceinline__ uint4 load16_or_zero(const bf16* p, bool valid) {
  return valid ? __ldg(reinterpret_cast<const uint4*>(p)) : make_uint4(0, 0, 0, 0);
}

__device__ void attend_mma8(const Args& a, const int32_t* table, int t0, int t1, int h, const int64_t* qoff,
                            const int64_t* dst, bool direct, float* part_o, float* part_lse) {
  constexpr int D = 128, NQ = 8;
  __shared__ float s_acc[kWarps][NQ][D];
  __shared__ float s_m[kWarps][NQ], s_l[kWarps][NQ];
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
  const int g = lane >> 2, t = lane & 3;
  const int bs_mask = (1 << a.block_shift) - 1;
  auto kv_offset = [&](int j) {  // element offset of token j's row of KV head h
    const int64_t blk = table[j >> a.block_shift];
    return (((blk * a.Hkv + h) << a.block_shift) + (j & bs_mask)) * D;
  };

  uint4 q[4];  // head g, dimensions 8t + 32j .. + 7
#pragma unroll
  for (int j = 0; j < 4; ++j) q[j] = __ldg(reinterpret_cast<const uint4*>(a.q + qoff[g] + 8 * t + 32 * j));
  float acc[16][4];
#pragma unroll
  for (int nt = 0; nt < 16; ++nt) acc[nt][0] = acc[nt][1] = acc[nt][2] = acc[nt][3] = 0.f;
  float m = -INFINITY, l = 0.f;

  for (int T0 = t0 + warp * 16; T0 < t1; T0 += kWarps * 16) {
    // Keys: token T0 + g (tile 0) and T0 + 8 + g (tile 1); values: tokens T0 + 2t, + 1, T0 + 8 + 2t, + 1, dimensions
    // 16g .. 16g + 15. Tokens at or past t1 read nothing (zeros: a pool entry no row owns may hold anything).
    uint4 k[2][4], v[4][2];
#pragma unroll
    for (int tile = 0; tile < 2; ++tile) {
      const int j = T0 + 8 * tile + g;
      const bool ok = j < t1;
      const int64_t e = ok ? kv_offset(j) : 0;
#pragma unroll
      for (int c = 0; c < 4; ++c) k[tile][c] = load16_or_zero(a.k_pool + e + 8 * t + 32 * c, ok);
    }
#pragma unroll
    for (int i = 0; i < 4; ++i) {
      const int j = T0 + 8 * (i >> 1) + 2 * t + (i & 1);
      const bool ok = j < t1;
      const int64_t e = ok ? kv_offset(j) : 0;
      v[i][0] = load16_or_zero(a.v_pool + e + 16 * g, ok);
      v[i][1] = load16_or_zero(a.v_pool + e + 16 * g + 8, ok);
    }
    // S for the 16 tokens: s[tile][c] is head g against token T0 + 8 tile + 2t + c.
    float s[2][4];
#pragma unroll
    for (int tile = 0; tile < 2; ++tile) {
      s[tile][0] = s[tile][1] = s[tile][2] = s[tile][3] = 0.f;
#pragma unroll
      for (int c = 0; c < 4; ++c) {
        mma_16816(s[tile], q[c].x, q[c].y, k[tile][c].x, k[tile][c].y);
        mma_16816(s[tile], q[c].z, q[c].w, k[tile][c].z, k[tile][c].w);
      }
    }
    float p[4];
    float mx = -INFINITY;
#pragma unroll
    for (int i = 0; i < 4; ++i) {
      const int j = T0 + 8 * (i >> 1) + 2 * t + (i & 1);
      p[i] = j < t1 ? s[i >> 1][i & 1] * a.qscale : -INFINITY;
      mx = fmaxf(mx, p[i]);
    }
    mx = fmaxf(mx, __shfl_xor_sync(0xffffffffu, mx, 1));
    mx = fmaxf(mx, __shfl_xor_sync(0xffffffffu, mx, 2));
    const float mn = fmaxf(m, mx);
    const float base = mn == -INFINITY ? 0.f : mn;
    const float alpha = exp2f(m - base);  // 0 while m is -inf
    float sum = 0.f;
#pragma unroll
    for (int i = 0; i < 4; ++i) {
      p[i] = exp2f(p[i] - base);  // 0 for tokens past t1
      sum += p[i];
    }
    l = l * alpha + sum;
    m = mn;
    const uint32_t pa0 = pack_bf16(p[0], p[1]), pa2 = pack_bf16(p[2], p[3]);
#pragma unroll
    for (int nt = 0; nt < 16; ++nt) {
      acc[nt][0] *= alpha;
      acc[nt][1] *= alpha;
      // Dimension 16g + nt of the 4 tokens: 32-bit word nt / 2 of the pair (v[i][0], v[i][1]), half nt % 2.
      const int w = (nt >> 1) & 3, hv = nt >> 3;
      const uint32_t* v0 = reinterpret_cast<const uint32_t*>(&v[0][hv]);
      const uint32_t* v1 = reinterpret_cast<const uint32_t*>(&v[1][hv]);
      const uint32_t* v2 = reinterpret_cast<const uint32_t*>(&v[2][hv]);
      const uint32_t* v3 = reinterpret_cast<const uint32_t*>(&v[3][hv]);
      const uint32_t sel = (nt & 1) ? 0x7632u : 0x5410u;
      mma_16816(acc[nt], pa0, pa2, __byte_perm(v0[w], v1[w], sel), __byte_perm(v2[w], v3[w], sel));
    }
  }
  l += __shfl_xor_sync(0xffffffffu, l, 1);
  l += __shfl_xor_sync(0xffffffffu, l, 2);
#pragma unroll
  for (int nt = 0; nt < 16; ++nt) {
    s_acc[warp][g][32 * t + nt] = acc[nt][0];
    s_acc[warp][g][32 * t + 16 + nt] = acc[nt][1];
  }
  if (t == 0) {
    s_m[warp][g] = m;
    s_l[warp][g] = l;
  }
  __syncthreads();
  store_merged<D, NQ>(a, s_acc, s_m, s_l, NQ, dst, direct, part_o, part_lse);
}

__global__ void __launch_bounds__(kThreads) plain_mma8_kernel(Args a, bool direct) {
  dependent_wait();  // may start before the grid before it ends (cuda/dependent_launch.cuh)
  int64_t idx = blockIdx.x;
  const int s = int(idx % a.nsplit);
  idx /= a.nsplit;
  const int h = int(idx % a.Hkv);
  const int b = int(idx / a.Hkv);
  const int len = a.seq_lens[b];
  const int t0 = row_start(a, b) + s * a.chunk;
  const int t1 = min(t0 + a.chunk, len);
  int64_t qoff[8], dst[8];
#pragma unroll
  for (int r = 0; r < 8; ++r) {
    const int head = h * 8 + r;
    qoff[r] = (int64_t(b) * a.Hq + head) * 128;
    dst[r] = direct ? int64_t(b) * a.Hq + head : (int64_t(b) * a.Hq + head) * a.nsplit + s;
  }
  attend_mma8(a, a.block_tables + int64_t(b) * a.max_blocks, t0, t1, h, qoff, dst, direct, a.plain_o, a.plain_lse);
}

}  // namespace

void launch_plain_mma8(const Args& a, unsigned ctas, bool direct, cudaStream_t stream) {
  launch_dependent(plain_mma8_kernel, dim3(ctas), dim3(kThreads), 0, stream, a, direct);
  CUDA_CHECK_LAST();
}

}  // namespace hone::cuda::paged
