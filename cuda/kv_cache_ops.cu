// The paged KV cache's two data movers (cuda/generation_ops.h): kv_append writes the new tokens' K and V rows into
// their slots; kv_copy_blocks duplicates whole blocks (copy-on-write of a group's shared partial block).
// Both move 16-byte vectors (8 bf16) when every pointer is 16-byte aligned and D is a multiple of 8, else single
// elements: one thread per vector, consecutive threads on consecutive addresses of the source. v's rows may lie
// further apart than k's (v read where one fused QKV projection left it).
#include <cstdint>

#include "cuda/check.h"
#include "cuda/dependent_launch.cuh"
#include "cuda/generation_ops.h"

namespace hone::cuda {

namespace {

constexpr int kThreads = 256;

template <typename Vec>
__global__ void kv_append_kernel(Vec* k_pool, Vec* v_pool, const Vec* k, const Vec* v, const int32_t* slot_mapping,
                                 int T, int Hkv, int dvec, int block_size, int64_t ldv) {
  dependent_wait();  // may start before the grid before it ends (cuda/dependent_launch.cuh)
  const int64_t idx = int64_t(blockIdx.x) * blockDim.x + threadIdx.x;
  const int64_t per_token = int64_t(Hkv) * dvec;
  if (idx >= int64_t(T) * per_token) return;
  const int t = int(idx / per_token);
  const int64_t slot = slot_mapping[t];
  if (slot < 0) return;
  const int64_t rest = idx - int64_t(t) * per_token;
  const int h = int(rest / dvec), c = int(rest % dvec);
  const int64_t block = slot / block_size, offset = slot % block_size;
  const int64_t dst = ((block * Hkv + h) * block_size + offset) * dvec + c;
  k_pool[dst] = k[idx];
  v_pool[dst] = v[int64_t(t) * ldv + rest];
}

template <typename Vec>
__global__ void kv_copy_blocks_kernel(Vec* k_pool, Vec* v_pool, const int32_t* src, const int32_t* dst,
                                      int64_t per_block) {
  const int pair = blockIdx.y;
  const int64_t s = int64_t(src[pair]) * per_block, d = int64_t(dst[pair]) * per_block;
  for (int64_t i = int64_t(blockIdx.x) * blockDim.x + threadIdx.x; i < per_block; i += int64_t(gridDim.x) * blockDim.x) {
    k_pool[d + i] = k_pool[s + i];
    v_pool[d + i] = v_pool[s + i];
  }
}

bool aligned16(const void* p) { return (reinterpret_cast<uintptr_t>(p) & 15u) == 0; }

}  // namespace

void kv_append(bf16* k_pool, bf16* v_pool, const bf16* k, const bf16* v, const int32_t* slot_mapping, int T, int Hkv,
               int D, int block_size, const GpuContext& ctx, int64_t ldv) {
  HONE_CHECK(T >= 0 && Hkv > 0 && D > 0 && block_size > 0, "bad kv_append shape T=", T, " Hkv=", Hkv, " D=", D,
             " block_size=", block_size);
  HONE_CHECK(ldv == 0 || ldv >= int64_t(Hkv) * D, "kv_append: v row stride ", ldv, " below Hkv * D = ", Hkv * D);
  if (T == 0) return;
  if (ldv == 0) ldv = int64_t(Hkv) * D;
  const bool vec = D % 8 == 0 && ldv % 8 == 0 && aligned16(k_pool) && aligned16(v_pool) && aligned16(k) &&
                   aligned16(v);
  if (vec) {
    const int dvec = D / 8;
    const int64_t n = int64_t(T) * Hkv * dvec;
    launch_dependent(kv_append_kernel<uint4>, dim3(unsigned((n + kThreads - 1) / kThreads)), dim3(kThreads), 0,
                     ctx.stream, reinterpret_cast<uint4*>(k_pool), reinterpret_cast<uint4*>(v_pool),
                     reinterpret_cast<const uint4*>(k), reinterpret_cast<const uint4*>(v), slot_mapping, T, Hkv, dvec,
                     block_size, ldv / 8);
  } else {
    const int64_t n = int64_t(T) * Hkv * D;
    launch_dependent(kv_append_kernel<bf16>, dim3(unsigned((n + kThreads - 1) / kThreads)), dim3(kThreads), 0,
                     ctx.stream, k_pool, v_pool, k, v, slot_mapping, T, Hkv, D, block_size, ldv);
  }
  CUDA_CHECK_LAST();
}

void kv_copy_blocks(bf16* k_pool, bf16* v_pool, const int32_t* src, const int32_t* dst, int n, int Hkv, int D,
                    int block_size, const GpuContext& ctx) {
  HONE_CHECK(n >= 0 && Hkv > 0 && D > 0 && block_size > 0, "bad kv_copy_blocks shape n=", n, " Hkv=", Hkv, " D=", D,
             " block_size=", block_size);
  HONE_CHECK(n <= 65535, "kv_copy_blocks copies at most 65535 blocks per call, got ", n);
  if (n == 0) return;
  const int64_t per_block = int64_t(Hkv) * block_size * D;
  const bool vec = per_block % 8 == 0 && aligned16(k_pool) && aligned16(v_pool);
  const int64_t items = vec ? per_block / 8 : per_block;
  const dim3 grid(unsigned((items + kThreads - 1) / kThreads < 64 ? (items + kThreads - 1) / kThreads : 64),
                  unsigned(n));
  if (vec) {
    kv_copy_blocks_kernel<uint4><<<grid, kThreads, 0, ctx.stream>>>(
        reinterpret_cast<uint4*>(k_pool), reinterpret_cast<uint4*>(v_pool), src, dst, items);
  } else {
    kv_copy_blocks_kernel<bf16><<<grid, kThreads, 0, ctx.stream>>>(k_pool, v_pool, src, dst, items);
  }
  CUDA_CHECK_LAST();
}

}  // namespace hone::cuda
