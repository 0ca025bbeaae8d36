// The LM head's logits GEMM with the softmax statistics in its epilogue (Hopper): z = h W^T / temperature is formed
// tile by tile in registers and never written as fp32. Each CTA (one per SM, persistent) computes tiles of 128
// rows x 256 vocabulary columns with wgmma (K-major bf16 operands brought into shared memory by tensor loads, a
// 4-stage ring of barriers: one producer warpgroup, two consumer warpgroups of 64 rows each) and writes, per row
// and tile, the tile's max m, s = sum exp(z - m) and u = sum exp(z - m) (z - m); the target's logit where the tile
// holds it; and for the saved variant (training) the tile's z - m in fp16. A second kernel folds a row's tiles
// into lse, logprob and entropy (or a vocabulary slice's statistics), as the chunked path's running state does.
// Why: the chunked path writes every logit in fp32 and reads it back, 8 bytes a value, which at Qwen3's
// vocabulary costs as much memory time as the GEMM costs tensor time.
#include <algorithm>
#include <cmath>
#include <cstdint>

#include "cuda/check.h"
#include "cuda/hopper.cuh"
#include "cuda/lm_head_kernels.h"
#include "cuda/lm_head_rows.cuh"

// The kernel is made of sm_90a's wgmma and tensor loads: its body is built for that architecture alone. The other
// architectures of a bundle (sm_80 ... sm_100) carry a stub, and the host never launches it there
// (lm_head_tile_stats_runs): the LM head takes its chunked path (cuda/lm_head.cpp).
#if defined(__CUDA_ARCH_FEAT_SM90_ALL)
#define HONE_TILE_STATS_BUILT 1
#endif

namespace hone::cuda {

namespace {

using namespace hopper;

// 1 in the machine code of the architecture that has the kernel's body, read back by the host for its device.
#if defined(HONE_TILE_STATS_BUILT)
__device__ int g_tile_stats_built = 1;
#else
__device__ int g_tile_stats_built = 0;
#endif

constexpr int kBM = kLmHeadTileRows, kBN = kLmHeadTileV, kBK = 64, kStages = 4;
constexpr int kThreads = 384;  // warpgroup 0 loads, warpgroups 1 and 2 multiply
constexpr int kTileABytes = kBM * kBK * 2, kTileBBytes = kBN * kBK * 2;
constexpr int kStageBytes = kTileABytes + kTileBBytes;
constexpr int kSmemBytes = kStages * kStageBytes + 2 * kStages * 8 + 1024;  // + barriers + alignment slack
// The kernel's device helpers, compiled where its body is (and seen by the host pass, which parses the body).
#if defined(HONE_TILE_STATS_BUILT) || !defined(__CUDA_ARCH__)
// Row tiles that share the vocabulary tiles of one pass over W: a wave of CTAs covers a few vocabulary tiles of
// this many row tiles, so that the group's rows of h stay in L2 while W streams once per group.
constexpr int kGroupM = 32;
constexpr float kLog2e = 1.4426950408889634f, kLn2 = 0.6931471805599453f;

__device__ __forceinline__ float quad_max(float v) {
  v = fmaxf(v, __shfl_xor_sync(0xffffffffu, v, 1));
  return fmaxf(v, __shfl_xor_sync(0xffffffffu, v, 2));
}
__device__ __forceinline__ float quad_sum(float v) {
  v += __shfl_xor_sync(0xffffffffu, v, 1);
  return v + __shfl_xor_sync(0xffffffffu, v, 2);
}

// The tile (tm, tn) of linear tile id `id`: ids run over kGroupM row tiles for each vocabulary tile in turn.
__device__ __forceinline__ void tile_of(int id, int tiles_m, int tiles_n, int& tm, int& tn) {
  const int group_tiles = kGroupM * tiles_n;
  const int group = id / group_tiles;
  const int first_m = group * kGroupM;
  const int gm = min(tiles_m - first_m, kGroupM);
  const int in_group = id - group * group_tiles;
  tm = first_m + in_group % gm;
  tn = in_group / gm;
}

__device__ __forceinline__ float fast_exp2(float x) {  // one MUFU op; results below 2^-126 flush to 0
  float y;
  asm("ex2.approx.ftz.f32 %0, %1;" : "=f"(y) : "f"(x));
  return y;
}

// The epilogue of one consumer warpgroup: its 64 rows of tile (tm, tn) in acc (thread t holds rows
// 16 (t / 32) + (t % 32) / 4 + {0, 8} of them), reduced per row over the tile and written. It runs while the
// tensor cores wait, so it is kept to a few instructions a value with independent chains (two warps a scheduler
// leave little else to hide latency): the max is taken on the unscaled products (scale > 0 keeps their order),
// x = (a - max) scale log2(e) is one FMA and exp2(x) one MUFU op, u is summed in base 2 and turned to base e
// once, and only the thread that holds the target looks for it. tgt: the two rows' targets, loaded before the
// tile's main loop (-1 past R). kFull: no column of the tile is past V.
template <bool kFull>
__device__ __forceinline__ void tile_epilogue(float (&acc)[128], int t, int row0, int tn, int R, int V, int col0,
                                              float scale, const int (&tgt)[2], const LmHeadTileStats& out,
                                              __half* __restrict__ kept, int64_t kept_ld) {
  // Padding columns (past V in the last tile): finite, so that exp2 gives 0 and 0 x (x - max) stays 0 even at
  // temperatures down to 1e-8; every tile has a real column, whose product is far above this.
  constexpr float kPad = -1e20f;
  const int warp = t / 32, lane = t % 32;
  const int c_base = tn * kBN + 2 * (lane % 4);  // the slice's column of acc[0]
  const float sl = scale * kLog2e;
#pragma unroll
  for (int i = 0; i < 2; ++i) {
    const int r = row0 + warp * 16 + lane / 4 + 8 * i;
    float am[2] = {kPad, kPad};
#pragma unroll
    for (int j = 0; j < 32; ++j) {
#pragma unroll
      for (int c = 0; c < 2; ++c) {
        float& a = acc[4 * j + 2 * i + c];
        if (!kFull && c_base + 8 * j + c >= V) a = kPad;
        am[j % 2] = fmaxf(am[j % 2], a);
      }
    }
    const float amax = quad_max(fmaxf(am[0], am[1]));
    const float off = -amax * sl;
    float sp[2] = {0.f, 0.f}, up[2] = {0.f, 0.f};
#pragma unroll
    for (int j = 0; j < 32; ++j) {
#pragma unroll
      for (int c = 0; c < 2; ++c) {
        const float x = fmaf(acc[4 * j + 2 * i + c], sl, off), e = fast_exp2(x);
        sp[j % 2] += e;
        up[j % 2] = fmaf(e, x, up[j % 2]);
      }
    }
    const float s = quad_sum(sp[0] + sp[1]);
    const float u = quad_sum(up[0] + up[1]) * kLn2;
    if (r >= R) continue;
    const float m = amax * scale;
    if (lane % 4 == 0) {
      out.m[int64_t(tn) * out.m_stride + r] = m;
      out.s[int64_t(tn) * out.su_stride + r] = s;
      out.u[int64_t(tn) * out.su_stride + r] = u;
    }
    // The target's offset from this thread's first column; the thread holds offsets 8 j + {0, 1}.
    const int tv = tgt[i] - col0 - c_base;
    if (tv >= 0 && tv < kBN && (tv & 6) == 0) {
      float zt = 0.f;
#pragma unroll
      for (int j = 0; j < 32; ++j) {
#pragma unroll
        for (int c = 0; c < 2; ++c) {
          if (tv == 8 * j + c) zt = acc[4 * j + 2 * i + c] * scale;  // constant indices: acc stays in registers
        }
      }
      out.zt[r] = zt;
    }
    if (kept) {
      __half* kr = kept + int64_t(r) * kept_ld + c_base;
#pragma unroll
      for (int j = 0; j < 32; ++j) {
        const float d0 = fmaxf(fmaf(acc[4 * j + 2 * i], scale, -m), -65504.f);
        const float d1 = fmaxf(fmaf(acc[4 * j + 2 * i + 1], scale, -m), -65504.f);
        if (kFull || c_base + 8 * j + 1 < V) {
          *reinterpret_cast<__half2*>(kr + 8 * j) = __floats2half2_rn(d0, d1);
        } else if (c_base + 8 * j < V) {
          kr[8 * j] = __float2half_rn(d0);
        }
      }
    }
  }
}
#endif  // the kernel's helpers

// Persistent: each CTA takes tiles blockIdx.x, blockIdx.x + gridDim.x, ... The load ring runs on across tiles, so
// the producer fills the next tile's stages while the consumers are in the epilogue of the last one.
__global__ void __launch_bounds__(kThreads, 1)
    tile_stats_kernel(const __grid_constant__ CUtensorMap h_map, const __grid_constant__ CUtensorMap w_map, int R,
                      int V, int C, int col0, float scale, const int32_t* __restrict__ targets, LmHeadTileStats out,
                      __half* __restrict__ kept, int64_t kept_ld, int tiles_m, int tiles_n) {
#if defined(__CUDA_ARCH__) && !defined(HONE_TILE_STATS_BUILT)
  __trap();  // not built for this architecture: lm_head_tile_stats_runs() said no, so it is never launched
#else
  extern __shared__ unsigned char smem_raw[];
  unsigned char* smem = reinterpret_cast<unsigned char*>((reinterpret_cast<uintptr_t>(smem_raw) + 1023) &
                                                         ~uintptr_t(1023));
  uint64_t* full = reinterpret_cast<uint64_t*>(smem + kStages * kStageBytes);
  uint64_t* empty = full + kStages;

  const int wg = threadIdx.x / 128, t = threadIdx.x % 128;
  if (threadIdx.x == 0) {
    for (int s = 0; s < kStages; ++s) {
      barrier_init(&full[s], 1);
      barrier_init(&empty[s], 2);  // one arrival per consumer warpgroup
    }
    barrier_init_fence();
  }
  __syncthreads();
  const int KT = C / kBK, tiles = tiles_m * tiles_n;

  if (wg == 0) {
    if (t != 0) return;
    int it = 0;  // loads issued so far, over all tiles of this CTA
    for (int id = blockIdx.x; id < tiles; id += gridDim.x) {
      int tm, tn;
      tile_of(id, tiles_m, tiles_n, tm, tn);
      for (int kt = 0; kt < KT; ++kt, ++it) {
        const int s = it % kStages;
        if (it >= kStages) barrier_wait(&empty[s], unsigned((it / kStages) - 1) & 1u);
        unsigned char* a = smem + s * kStageBytes;
        barrier_arrive_expect(&full[s], kStageBytes);
        tensor_load_2d(a, &h_map, &full[s], kt * kBK, tm * kBM);
        tensor_load_2d(a + kTileABytes, &w_map, &full[s], kt * kBK, tn * kBN);
      }
    }
    return;
  }

  const int cw = wg - 1;  // this warpgroup's 64 rows of each tile
  int it = 0;
  for (int id = blockIdx.x; id < tiles; id += gridDim.x) {
    int tm, tn;
    tile_of(id, tiles_m, tiles_n, tm, tn);
    // The rows' targets, loaded now so that the load is long done when the epilogue needs them.
    const int row0 = tm * kBM + cw * 64, rt = row0 + (t / 32) * 16 + (t % 32) / 4;
    const int tgt[2] = {rt < R ? __ldg(targets + rt) : -1, rt + 8 < R ? __ldg(targets + rt + 8) : -1};
    float acc[128];
#pragma unroll
    for (int i = 0; i < 128; ++i) acc[i] = 0.f;
    for (int kt = 0; kt < KT; ++kt, ++it) {
      const int s = it % kStages;
      barrier_wait(&full[s], unsigned(it / kStages) & 1u);
      const unsigned char* a = smem + s * kStageBytes;
      const uint64_t da = smem_desc_sw128(a + cw * (kTileABytes / 2)), db = smem_desc_sw128(a + kTileABytes);
      wgmma_fence();
#pragma unroll
      for (int k = 0; k < kBK / 16; ++k) wgmma_m64n256k16(acc, da + 2 * k, db + 2 * k, (kt > 0 || k > 0) ? 1 : 0);
      wgmma_commit();
      wgmma_wait<1>();  // the group of the stage before has finished reading its shared memory
      if (kt > 0 && t == 0) barrier_arrive(&empty[(it - 1) % kStages]);
    }
    wgmma_wait<0>();
    if (t == 0) barrier_arrive(&empty[(it - 1) % kStages]);  // the tile's last stage, for the next tile's loads
    if ((tn + 1) * kBN <= V) {
      tile_epilogue<true>(acc, t, row0, tn, R, V, col0, scale, tgt, out, kept, kept_ld);
    } else {
      tile_epilogue<false>(acc, t, row0, tn, R, V, col0, scale, tgt, out, kept, kept_ld);
    }
  }
#endif  // HONE_TILE_STATS_BUILT
}

// One thread per row (the threads of a warp read consecutive rows of each tile's statistics: whole sectors): the
// tiles' statistics folded as the chunked path folds its chunks (in double), then the row's outputs. A tile always
// holds a real column, so its max is finite and s >= 1 there.
constexpr int kCombineThreads = 256;

__global__ void __launch_bounds__(kCombineThreads)
    tile_combine_kernel(LmHeadTileStats in, int R, int tiles, int col0, int V, const int32_t* __restrict__ targets,
                        LmHeadRowOutputs out) {
  const int r = int(blockIdx.x) * kCombineThreads + int(threadIdx.x);
  if (r >= R) return;
  const int target = targets[r];
  if (target < 0) return detail::write_untargeted_row(out, r);
  float M = -INFINITY;
  for (int k = 0; k < tiles; ++k) M = fmaxf(M, in.m[int64_t(k) * in.m_stride + r]);
  double S = 0.0, U = 0.0;
  for (int k = 0; k < tiles; ++k) {
    const double shift = double(in.m[int64_t(k) * in.m_stride + r]) - double(M), f = exp(shift);
    const double s = in.s[int64_t(k) * in.su_stride + r], u = in.u[int64_t(k) * in.su_stride + r];
    S += f * s;
    U += f * (u + shift * s);
  }
  const int tv = target - col0;
  // A target outside this vocabulary: a slice's target logit is 0 (another slice holds it), the whole
  // vocabulary's logprob NaN (a caller bug), as the chunked path gives.
  const float zt = (tv >= 0 && tv < V) ? in.zt[r] : (out.stats ? 0.f : NAN);
  detail::write_row(out, r, M, S, U, zt);
}

}  // namespace

bool lm_head_tile_stats_runs(const GpuContext&) {
  // wgmma and tensor loads as used here are sm_90a's (H100, H200); Blackwell (sm_100) has no wgmma. The calling
  // thread's current device is the context's (the engines set it once); its compute capability is cached.
  thread_local int cached_device = -1;
  thread_local int arch = 0;
  int device = 0;
  CUDA_CHECK(cudaGetDevice(&device));
  if (device != cached_device) {
    int major = 0, minor = 0;
    CUDA_CHECK(cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor, device));
    CUDA_CHECK(cudaDeviceGetAttribute(&minor, cudaDevAttrComputeCapabilityMinor, device));
    arch = major * 10 + minor;
    cached_device = device;
  }
  if (arch != 90) return false;
  // Whether the machine code the driver loaded for this device has the body: a build for sm_90 without the "a"
  // (SM=90) has only the stub. Read once: every device of arch 9.0 loads the same machine code.
  static const bool built = [] {
    int v = 0;
    if (cudaMemcpyFromSymbol(&v, g_tile_stats_built, sizeof v) != cudaSuccess) {
      (void)cudaGetLastError();  // no machine code for this device: every kernel fails, the tile path is not the news
      return false;
    }
    return v == 1;
  }();
  return built;
}

void lm_head_tile_stats(const CUtensorMap& h_map, const CUtensorMap& w_map, int R, int V, int C, int col0,
                        float temperature, const int32_t* targets, LmHeadTileStats out, __half* kept, int64_t kept_ld,
                        const GpuContext& ctx) {
  if (R <= 0 || V <= 0) return;
  HONE_CHECK(lm_head_tile_stats_runs(ctx), "the LM head's tile statistics kernel runs on sm_90a (H100, H200) only");
  HONE_CHECK(C % kBK == 0, "the LM head's tile statistics need C a multiple of ", kBK, ", got ", C);
  static const bool configured = [] {
    CUDA_CHECK(cudaFuncSetAttribute(tile_stats_kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, kSmemBytes));
    return true;
  }();
  (void)configured;
  const int tiles_m = (R + kBM - 1) / kBM, tiles_n = (V + kBN - 1) / kBN;
  const int64_t tiles = int64_t(tiles_m) * tiles_n;
  HONE_CHECK(tiles < (int64_t(1) << 31), "an LM head of ", R, " x ", V, " is more tiles than an int counts");
  const int ctas = int(std::min<int64_t>(tiles, std::max(ctx.sm_count, 1)));
  tile_stats_kernel<<<unsigned(ctas), kThreads, kSmemBytes, ctx.stream>>>(
      h_map, w_map, R, V, C, col0, 1.f / temperature, targets, out, kept, kept_ld, tiles_m, tiles_n);
  CUDA_CHECK_LAST();
}

void lm_head_tile_combine(LmHeadTileStats in, int R, int V, int col0, const int32_t* targets, LmHeadRowOutputs out,
                          const GpuContext& ctx) {
  if (R <= 0) return;
  tile_combine_kernel<<<unsigned((R + kCombineThreads - 1) / kCombineThreads), kCombineThreads, 0, ctx.stream>>>(
      in, R, (V + kBN - 1) / kBN, col0, V, targets, out);
  CUDA_CHECK_LAST();
}

}  // namespace hone::cuda
