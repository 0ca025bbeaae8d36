// The experts' grouped linear layers on the GPU: one launch multiplies the rows of every expert by that expert's
// weight (w [E, OC, IC], Hugging Face's [out, in] per expert), reading the row offsets on the device, so the routing
// never goes through the host and the launch can live in a CUDA graph. bf16 operands, fp32 accumulation on tensor
// cores (WMMA 16x16x16), 64 x 64 output tiles with 32-deep k steps, four warps of 32 x 32 each.
//   forward  out[r] = x[r] w[e]^T           rows grouped by expert: a tile never straddles two experts
//   dx       dx[r] += dout[r] w[e]
//   dw       dw[e] += dout[rows of e]^T x[rows of e]   one grid plane per expert, k running over its rows
// Edges (rows past an expert's end, widths not a multiple of the tile) load zeros and store nothing.
// Forward with few rows an expert (at most 64 on average, as in decode): a kernel of its own below, which reads each
// expert's weights once through a cp.async pipeline instead of once per 64-row tile with synchronous loads.
#include <mma.h>

#include <algorithm>
#include <cstdint>
#include <cstdlib>

#include "cuda/check.h"
#include "cuda/moe_ops.h"

namespace hone::cuda {

namespace {

using namespace nvcuda;

constexpr int BM = 64, BN = 64, BK = 32, kThreads = 128;

// smem[R][Cc] <- G[r0 + i][c0 + j] (row-major, leading dimension ld), zero where r0 + i >= rmax or c0 + j >= cmax.
template <int R, int Cc>
__device__ __forceinline__ void load_tile(bf16* smem, const bf16* G, int64_t ld, int64_t r0, int64_t rmax, int64_t c0,
                                          int64_t cmax) {
  const bool vec = (ld % 8 == 0) && ((reinterpret_cast<uintptr_t>(G) & 15) == 0);
  constexpr int kChunks = R * Cc / 8;  // 8 bf16 = 16 bytes
  for (int i = threadIdx.x; i < kChunks; i += kThreads) {
    const int rr = i / (Cc / 8), cc = (i % (Cc / 8)) * 8;
    const int64_t r = r0 + rr, c = c0 + cc;
    bf16* dst = smem + rr * Cc + cc;
    if (vec && r < rmax && c + 8 <= cmax) {
      *reinterpret_cast<int4*>(dst) = *reinterpret_cast<const int4*>(G + r * ld + c);
    } else {
#pragma unroll
      for (int q = 0; q < 8; ++q)
        dst[q] = (r < rmax && c + q < cmax) ? G[r * ld + c + q] : __float2bfloat16_rn(0.f);
    }
  }
}

using Accumulators = wmma::fragment<wmma::accumulator, 16, 16, 16, float>[2][2];

// The block's BM x BN results (each warp's 32 x 32 of accumulators at rows wm, columns wn of the tile), staged
// through Cs [BM][BN] in shared memory, written to G (row-major, leading dimension ld) at G[r0 + i][c0 + j] by
// write(&G[..][..], value), only where r0 + i < rmax and c0 + j < cmax.
template <typename T, typename Write>
__device__ __forceinline__ void store_tile(T* G, int64_t ld, int64_t r0, int64_t rmax, int64_t c0, int64_t cmax,
                                           float* Cs, const Accumulators& acc, int wm, int wn, Write write) {
#pragma unroll
  for (int i = 0; i < 2; ++i)
#pragma unroll
    for (int j = 0; j < 2; ++j)
      wmma::store_matrix_sync(Cs + (wm + 16 * i) * BN + wn + 16 * j, acc[i][j], BN, wmma::mem_row_major);
  __syncthreads();
  for (int i = threadIdx.x; i < BM * BN; i += kThreads) {
    const int64_t r = r0 + i / BN, c = c0 + i % BN;
    if (r < rmax && c < cmax) write(G + r * ld + c, Cs[i]);
  }
}

// Which expert and which of its row tiles grid row `tile` is (-1: past the last tile).
__device__ __forceinline__ void find_tile(const int32_t* offsets, int E, int tile, int* expert, int* m_tile) {
  __shared__ int found[2];
  if (threadIdx.x == 0) {
    int e = 0, t = tile;
    found[0] = -1;
    for (; e < E; ++e) {
      const int n = offsets[e + 1] - offsets[e];
      const int tiles = (n + BM - 1) / BM;
      if (t < tiles) {
        found[0] = e;
        found[1] = t;
        break;
      }
      t -= tiles;
    }
  }
  __syncthreads();
  *expert = found[0];
  *m_tile = found[1];
}

enum class Mode { forward, dx };

// out/dx rows: A = x or dout (row-major [rows, K]); B = w[e] as [N, K] (forward: out = x w^T, B stored [n][k],
// read col-major) or [K, N] (dx: dx = dout w, B stored [k][n], read row-major).
template <Mode kMode>
__global__ void __launch_bounds__(kThreads) grouped_rows_kernel(bf16* out, const bf16* a, const bf16* w,
                                                                const int32_t* offsets, int E, int K, int N) {
  int e, mt;
  find_tile(offsets, E, blockIdx.y, &e, &mt);
  if (e < 0) return;
  const int64_t row_begin = offsets[e] + int64_t(mt) * BM, row_end = offsets[e + 1];
  const int64_t n0 = int64_t(blockIdx.x) * BN;
  const bf16* we = w + int64_t(e) * N * K;

  __shared__ __align__(32) bf16 As[BM * BK];
  __shared__ __align__(32) bf16 Bs[BK * BN];
  __shared__ __align__(32) float Cs[BM * BN];
  const int warp = threadIdx.x / 32, wm = (warp / 2) * 32, wn = (warp % 2) * 32;
  Accumulators acc;
#pragma unroll
  for (int i = 0; i < 2; ++i)
#pragma unroll
    for (int j = 0; j < 2; ++j) wmma::fill_fragment(acc[i][j], 0.f);

  for (int64_t k0 = 0; k0 < K; k0 += BK) {
    load_tile<BM, BK>(As, a, K, row_begin, row_end, k0, K);
    if constexpr (kMode == Mode::forward)
      load_tile<BN, BK>(Bs, we, K, n0, N, k0, K);  // [n][k]
    else
      load_tile<BK, BN>(Bs, we, N, k0, K, n0, N);  // [k][n]
    __syncthreads();
#pragma unroll
    for (int kk = 0; kk < BK; kk += 16) {
      wmma::fragment<wmma::matrix_a, 16, 16, 16, bf16, wmma::row_major> fa[2];
#pragma unroll
      for (int i = 0; i < 2; ++i) wmma::load_matrix_sync(fa[i], As + (wm + 16 * i) * BK + kk, BK);
      if constexpr (kMode == Mode::forward) {
        wmma::fragment<wmma::matrix_b, 16, 16, 16, bf16, wmma::col_major> fb[2];
#pragma unroll
        for (int j = 0; j < 2; ++j) wmma::load_matrix_sync(fb[j], Bs + (wn + 16 * j) * BK + kk, BK);
#pragma unroll
        for (int i = 0; i < 2; ++i)
#pragma unroll
          for (int j = 0; j < 2; ++j) wmma::mma_sync(acc[i][j], fa[i], fb[j], acc[i][j]);
      } else {
        wmma::fragment<wmma::matrix_b, 16, 16, 16, bf16, wmma::row_major> fb[2];
#pragma unroll
        for (int j = 0; j < 2; ++j) wmma::load_matrix_sync(fb[j], Bs + kk * BN + wn + 16 * j, BN);
#pragma unroll
        for (int i = 0; i < 2; ++i)
#pragma unroll
          for (int j = 0; j < 2; ++j) wmma::mma_sync(acc[i][j], fa[i], fb[j], acc[i][j]);
      }
    }
    __syncthreads();
  }
  if constexpr (kMode == Mode::forward)
    store_tile(out, N, row_begin, row_end, n0, N, Cs, acc, wm, wn,
               [](bf16* o, float v) { *o = __float2bfloat16_rn(v); });
  else
    store_tile(out, N, row_begin, row_end, n0, N, Cs, acc, wm, wn,
               [](bf16* o, float v) { *o = __float2bfloat16_rn(__bfloat162float(*o) + v); });
}

// dw[e] [OC, IC] += dout[rows]^T x[rows]: A = dout^T read col-major from dout [rows, OC] (smem [k][m]), B = x
// [rows, IC] row-major (smem [k][n]).
__global__ void __launch_bounds__(kThreads) grouped_weight_grad_kernel(float* dw, const bf16* dout, const bf16* x,
                                                                       const int32_t* offsets, int IC, int OC) {
  const int e = blockIdx.z;
  const int64_t rb = offsets[e], re = offsets[e + 1];
  if (rb == re) return;
  const int64_t m0 = int64_t(blockIdx.y) * BM, n0 = int64_t(blockIdx.x) * BN;
  __shared__ __align__(32) bf16 As[BK * BM];
  __shared__ __align__(32) bf16 Bs[BK * BN];
  __shared__ __align__(32) float Cs[BM * BN];
  const int warp = threadIdx.x / 32, wm = (warp / 2) * 32, wn = (warp % 2) * 32;
  Accumulators acc;
#pragma unroll
  for (int i = 0; i < 2; ++i)
#pragma unroll
    for (int j = 0; j < 2; ++j) wmma::fill_fragment(acc[i][j], 0.f);
  for (int64_t k0 = rb; k0 < re; k0 += BK) {
    load_tile<BK, BM>(As, dout, OC, k0, re, m0, OC);  // [k][m]
    load_tile<BK, BN>(Bs, x, IC, k0, re, n0, IC);     // [k][n]
    __syncthreads();
#pragma unroll
    for (int kk = 0; kk < BK; kk += 16) {
      wmma::fragment<wmma::matrix_a, 16, 16, 16, bf16, wmma::col_major> fa[2];
      wmma::fragment<wmma::matrix_b, 16, 16, 16, bf16, wmma::row_major> fb[2];
#pragma unroll
      for (int i = 0; i < 2; ++i) wmma::load_matrix_sync(fa[i], As + kk * BM + wm + 16 * i, BM);
#pragma unroll
      for (int j = 0; j < 2; ++j) wmma::load_matrix_sync(fb[j], Bs + kk * BN + wn + 16 * j, BN);
#pragma unroll
      for (int i = 0; i < 2; ++i)
#pragma unroll
        for (int j = 0; j < 2; ++j) wmma::mma_sync(acc[i][j], fa[i], fb[j], acc[i][j]);
    }
    __syncthreads();
  }
  store_tile(dw + int64_t(e) * OC * IC, IC, m0, OC, n0, IC, Cs, acc, wm, wn, [](float* o, float v) { *o += v; });
}

// Grid rows enough for every expert's row tiles: sum ceil(n_e / BM) <= max_rows / BM + E.
int row_tiles(int max_rows, int E) { return (max_rows + BM - 1) / BM + E; }

// ---- few rows an expert (decode): the weights streamed once at the copy bandwidth ---------------------------------
// A block computes FN output columns of one expert (grid y = the expert, so no tile search) for all of its rows, in
// chunks of FM rows; an expert's weight slab [FN, K] crosses the block once per chunk (once when it has at most FM
// rows, as in decode), through an FS-stage cp.async pipeline of FK-deep slices, so the weight reads stay in flight
// while the tensor cores run. FN / 16 warps, each 16 columns and every row tile of the chunk (up to FM / 16).
// The variants (column width, slice depth, stages) are benchmarked by bench_moe_decode; kDefaultFewRows runs.
constexpr int FM = 64;

template <int FN, int FK, int FS>
struct FewRows {
  static constexpr int kThreads = FN * 2;            // FN / 16 warps
  static constexpr int kLd = FK + 8;                 // smem row pitch (bf16): a multiple of 16 bytes, off the banks
  static constexpr int kStageA = FM * kLd, kStageB = FN * kLd;
  static constexpr int kCld = FN + 4;                // fp32 staging of the results, reusing the pipeline's memory
  static constexpr int kPipeBytes = FS * (kStageA + kStageB) * int(sizeof(bf16));
  static constexpr int kSmemBytes = std::max(kPipeBytes, FM * kCld * int(sizeof(float)));
};

__device__ __forceinline__ void cp_async16(void* smem, const void* gmem, bool valid) {
  const unsigned s = static_cast<unsigned>(__cvta_generic_to_shared(smem));
  const int bytes = valid ? 16 : 0;  // 0: the 16 bytes are zero-filled, nothing is read
  asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;\n" ::"r"(s), "l"(gmem), "r"(bytes));
}
__device__ __forceinline__ void cp_async_commit() { asm volatile("cp.async.commit_group;\n" ::); }
template <int kPending>
__device__ __forceinline__ void cp_async_wait() {
  asm volatile("cp.async.wait_group %0;\n" ::"n"(kPending));
}

// out[r] = x[r] w[e]^T for the rows of expert blockIdx.y, columns [blockIdx.x * FN, +FN). K % 8 == 0 and 16-byte
// aligned x and w (the caller checks).
template <int FN, int FK, int FS>
__global__ void __launch_bounds__(FN * 2) few_rows_forward_kernel(bf16* out, const bf16* x, const bf16* w,
                                                                  const int32_t* offsets, int K, int N) {
  using P = FewRows<FN, FK, FS>;
  const int e = blockIdx.y;
  const int64_t begin = offsets[e], end = offsets[e + 1];
  if (begin >= end) return;
  const int64_t n0 = int64_t(blockIdx.x) * FN;
  const bf16* we = w + int64_t(e) * N * K;
  extern __shared__ __align__(128) unsigned char smem_raw[];
  bf16* As = reinterpret_cast<bf16*>(smem_raw);
  bf16* Bs = As + FS * P::kStageA;
  float* Cs = reinterpret_cast<float*>(smem_raw);
  const int warp = threadIdx.x / 32, ksteps = (K + FK - 1) / FK;

  for (int64_t r0 = begin; r0 < end; r0 += FM) {
    const int rows = int(std::min<int64_t>(FM, end - r0)), mtiles = (rows + 15) / 16;
    // Stage s of slice t: A's rows x [r0, r0 + FM) and B's columns [n0, n0 + FN), both k in [t FK, t FK + FK).
    auto load = [&](int t, int s) {
      const int64_t k0 = int64_t(t) * FK;
      for (int i = threadIdx.x; i < (FM + FN) * (FK / 8); i += P::kThreads) {
        const int row = i / (FK / 8), kc = (i % (FK / 8)) * 8;
        const bool k_ok = k0 + kc < K;
        if (row < FM) {
          const bool ok = row < rows && k_ok;
          cp_async16(As + s * P::kStageA + row * P::kLd + kc, ok ? x + (r0 + row) * K + k0 + kc : x, ok);
        } else {
          const int n = row - FM;
          const bool ok = n0 + n < N && k_ok;
          cp_async16(Bs + s * P::kStageB + n * P::kLd + kc, ok ? we + (n0 + n) * K + k0 + kc : we, ok);
        }
      }
    };
    wmma::fragment<wmma::accumulator, 16, 16, 16, float> acc[FM / 16];
#pragma unroll
    for (int m = 0; m < FM / 16; ++m) wmma::fill_fragment(acc[m], 0.f);
#pragma unroll
    for (int s = 0; s < FS - 1; ++s) {
      if (s < ksteps) load(s, s);
      cp_async_commit();
    }
    for (int t = 0; t < ksteps; ++t) {
      cp_async_wait<FS - 2>();  // slice t has landed
      __syncthreads();          // ... for every thread; and slice t - 1's stage is free
      if (t + FS - 1 < ksteps) load(t + FS - 1, (t + FS - 1) % FS);
      cp_async_commit();
      const bf16* a = As + (t % FS) * P::kStageA;
      const bf16* b = Bs + (t % FS) * P::kStageB + warp * 16 * P::kLd;
#pragma unroll
      for (int kk = 0; kk < FK; kk += 16) {
        wmma::fragment<wmma::matrix_b, 16, 16, 16, bf16, wmma::col_major> fb;
        wmma::load_matrix_sync(fb, b + kk, P::kLd);
#pragma unroll
        for (int m = 0; m < FM / 16; ++m) {
          if (m < mtiles) {
            wmma::fragment<wmma::matrix_a, 16, 16, 16, bf16, wmma::row_major> fa;
            wmma::load_matrix_sync(fa, a + m * 16 * P::kLd + kk, P::kLd);
            wmma::mma_sync(acc[m], fa, fb, acc[m]);
          }
        }
      }
    }
    cp_async_wait<0>();
    __syncthreads();  // every stage read: the staging may overwrite them
#pragma unroll
    for (int m = 0; m < FM / 16; ++m)
      if (m < mtiles)
        wmma::store_matrix_sync(Cs + m * 16 * P::kCld + warp * 16, acc[m], P::kCld, wmma::mem_row_major);
    __syncthreads();
    for (int i = threadIdx.x; i < rows * FN; i += P::kThreads) {
      const int r = i / FN, c = i % FN;
      if (n0 + c < N) out[(r0 + r) * N + n0 + c] = __float2bfloat16_rn(Cs[r * P::kCld + c]);
    }
    __syncthreads();  // the staging is the next chunk's pipeline
  }
}

template <int FN, int FK, int FS>
void launch_few_rows(bf16* out, const bf16* x, const bf16* w, const int32_t* offsets, int E, int K, int N,
                     const GpuContext& ctx) {
  using P = FewRows<FN, FK, FS>;
  if constexpr (P::kSmemBytes > 48 * 1024) {
    static bool opted_in = false;  // per process: the attribute is the kernel's, on the current device
    if (!opted_in) {
      CUDA_CHECK(cudaFuncSetAttribute(few_rows_forward_kernel<FN, FK, FS>,
                                      cudaFuncAttributeMaxDynamicSharedMemorySize, P::kSmemBytes));
      opted_in = true;
    }
  }
  const dim3 grid((N + FN - 1) / FN, E);
  few_rows_forward_kernel<FN, FK, FS><<<grid, P::kThreads, P::kSmemBytes, ctx.stream>>>(out, x, w, offsets, K, N);
  CUDA_CHECK_LAST();
}

// The variants: {column width, slice depth, stages}.
constexpr int kFewRowsVariants = 5;
const char* const kFewRowsNames[kFewRowsVariants] = {"128 x 32, 3 stages", "64 x 32, 4 stages", "128 x 64, 3 stages",
                                                     "256 x 32, 3 stages", "64 x 64, 4 stages"};
// 128 x 64, 3 stages: 52-60 % of the copy bandwidth at the 30B-A3B decode shapes against 48-52 % for 128 x 32
// (doc/performance.md). HONE_MOE_FEW_ROWS_VARIANT=<index> picks another for a comparison, read once.
constexpr int kDefaultFewRows = 2;

int few_rows_variant() {
  static const int v = [] {
    const char* e = std::getenv("HONE_MOE_FEW_ROWS_VARIANT");
    if (!e || !*e) return kDefaultFewRows;
    char* end = nullptr;
    const long i = std::strtol(e, &end, 10);
    HONE_CHECK(*end == 0 && i >= 0 && i < kFewRowsVariants, "HONE_MOE_FEW_ROWS_VARIANT=", e, ": not a variant 0..",
               kFewRowsVariants - 1);
    return int(i);
  }();
  return v;
}

void few_rows(int variant, bf16* out, const bf16* x, const bf16* w, const int32_t* offsets, int E, int K, int N,
              const GpuContext& ctx) {
  switch (variant) {
    case 0: return launch_few_rows<128, 32, 3>(out, x, w, offsets, E, K, N, ctx);
    case 1: return launch_few_rows<64, 32, 4>(out, x, w, offsets, E, K, N, ctx);
    case 2: return launch_few_rows<128, 64, 3>(out, x, w, offsets, E, K, N, ctx);
    case 3: return launch_few_rows<256, 32, 3>(out, x, w, offsets, E, K, N, ctx);
    case 4: return launch_few_rows<64, 64, 4>(out, x, w, offsets, E, K, N, ctx);
    default: HONE_CHECK(false, "no few-rows variant ", variant);
  }
}

bool aligned16(const void* p) { return (reinterpret_cast<uintptr_t>(p) & 15) == 0; }

}  // namespace

void moe_grouped_linear_forward(bf16* out, const bf16* x, const bf16* w, const int32_t* offsets, int E, int IC,
                                int OC, int max_rows, const GpuContext& ctx) {
  if (max_rows == 0 || E == 0 || OC == 0) return;
  HONE_CHECK(IC > 0, "grouped linear with no input features");
  // Few rows an expert on average (decode): the kernel that streams each expert's weights once.
  if (int64_t(max_rows) <= int64_t(FM) * E && IC % 8 == 0 && aligned16(x) && aligned16(w))
    return few_rows(few_rows_variant(), out, x, w, offsets, E, IC, OC, ctx);
  const dim3 grid((OC + BN - 1) / BN, row_tiles(max_rows, E));
  grouped_rows_kernel<Mode::forward><<<grid, kThreads, 0, ctx.stream>>>(out, x, w, offsets, E, IC, OC);
  CUDA_CHECK_LAST();
}

int moe_few_rows_variants() { return kFewRowsVariants; }
const char* moe_few_rows_variant_name(int variant) {
  HONE_CHECK(variant >= 0 && variant < kFewRowsVariants, "no few-rows variant ", variant);
  return kFewRowsNames[variant];
}

void moe_grouped_linear_forward_few_rows(int variant, bf16* out, const bf16* x, const bf16* w, const int32_t* offsets,
                                         int E, int IC, int OC, const GpuContext& ctx) {
  if (E == 0 || OC == 0) return;
  HONE_CHECK(IC > 0 && IC % 8 == 0 && aligned16(x) && aligned16(w),
             "the few-rows kernel takes an input width that is a multiple of 8 and 16-byte aligned operands");
  few_rows(variant, out, x, w, offsets, E, IC, OC, ctx);
}

void moe_grouped_linear_forward_tiled(bf16* out, const bf16* x, const bf16* w, const int32_t* offsets, int E, int IC,
                                      int OC, int max_rows, const GpuContext& ctx) {
  if (max_rows == 0 || E == 0 || OC == 0) return;
  HONE_CHECK(IC > 0, "grouped linear with no input features");
  const dim3 grid((OC + BN - 1) / BN, row_tiles(max_rows, E));
  grouped_rows_kernel<Mode::forward><<<grid, kThreads, 0, ctx.stream>>>(out, x, w, offsets, E, IC, OC);
  CUDA_CHECK_LAST();
}

void moe_grouped_linear_backward(bf16* dx, float* dw, const bf16* dout, const bf16* x, const bf16* w,
                                 const int32_t* offsets, int E, int IC, int OC, int max_rows, const GpuContext& ctx) {
  if (max_rows == 0 || E == 0 || OC == 0 || IC == 0) return;
  if (dx) {
    const dim3 grid((IC + BN - 1) / BN, row_tiles(max_rows, E));
    grouped_rows_kernel<Mode::dx><<<grid, kThreads, 0, ctx.stream>>>(dx, dout, w, offsets, E, OC, IC);
    CUDA_CHECK_LAST();
  }
  const dim3 grid((IC + BN - 1) / BN, (OC + BM - 1) / BM, E);
  grouped_weight_grad_kernel<<<grid, kThreads, 0, ctx.stream>>>(dw, dout, x, offsets, IC, OC);
  CUDA_CHECK_LAST();
}

}  // namespace hone::cuda
