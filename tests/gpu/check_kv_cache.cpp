// GPU checks of the paged KV cache's data movers (cuda/generation_ops.h) against their CPU twins (src/ops/cpu/
// kv_cache.cpp): exact (tolerance 0). The pools start with random values, so an entry written where it should not be, or not
// written, shows up; every pool element is compared.
//   kv_append: shape {T, Hkv, D, block_size, num_blocks}; distinct random slots, every third token skipped (-1).
//     D = 12 (not a multiple of 8) takes the element path, the others the 16-byte path. A sixth value pads v's rows
//     (v inside one fused QKV product): they lie Hkv * D + pad apart (an odd pad takes the element path).
//   kv_copy_blocks: shape {n, Hkv, D, block_size, num_blocks}; n distinct sources copied to n other blocks.
#if HONE_CUDA
#include <algorithm>
#include <numeric>

#include "check_common.h"
#include "cuda/generation_ops.h"
#include "device_buffer.h"
#include "op_checks.h"
#include "ops/ops.h"

namespace {

using hone::cuda::bf16;

double check_append(const test::OpShape& s, std::mt19937_64& rng) {
  const int T = int(s[0]), Hkv = int(s[1]), D = int(s[2]), bs = int(s[3]), nblocks = int(s[4]);
  const int64_t pool_n = int64_t(nblocks) * Hkv * bs * D, n = int64_t(T) * Hkv * D;
  const int64_t ldv = s.size() > 5 ? int64_t(Hkv) * D + s[5] : 0, nv = ldv ? int64_t(T) * ldv : n;
  std::vector<float> kp = test::random_vector(pool_n, rng), vp = test::random_vector(pool_n, rng);
  std::vector<float> k = test::random_vector(n, rng), v = test::random_vector(nv, rng);
  std::vector<int32_t> slots(static_cast<size_t>(nblocks) * bs);
  std::iota(slots.begin(), slots.end(), 0);
  std::shuffle(slots.begin(), slots.end(), rng);
  slots.resize(static_cast<size_t>(T));
  for (int t = 0; t < T; t += 3) slots[size_t(t)] = -1;
  test::DeviceBuffer<bf16> dkp(pool_n), dvp(pool_n), dk(n), dv(nv);
  test::DeviceBuffer<int32_t> dslots(T);
  dkp.upload(kp);
  dvp.upload(vp);
  dk.upload(k);
  dv.upload(v);
  dslots.upload_raw(slots);
  test::inputs_ready();
  hone::cuda::kv_append(dkp.get(), dvp.get(), dk.get(), dv.get(), dslots.get(), T, Hkv, D, bs, test::check_context(),
                        ldv);
  const std::vector<float> gk = dkp.download(), gv = dvp.download();
  hone::cpu::kv_append(kp.data(), vp.data(), k.data(), v.data(), slots.data(), T, Hkv, D, bs, ldv);  // the CPU twin
  return std::max(test::rel_l2(gk.data(), kp.data(), pool_n), test::rel_l2(gv.data(), vp.data(), pool_n));
}

double check_copy(const test::OpShape& s, std::mt19937_64& rng) {
  const int n = int(s[0]), Hkv = int(s[1]), D = int(s[2]), bs = int(s[3]), nblocks = int(s[4]);
  const int64_t per_block = int64_t(Hkv) * bs * D, pool_n = int64_t(nblocks) * per_block;
  std::vector<float> kp = test::random_vector(pool_n, rng), vp = test::random_vector(pool_n, rng);
  std::vector<int32_t> ids(static_cast<size_t>(nblocks));
  std::iota(ids.begin(), ids.end(), 0);
  std::shuffle(ids.begin(), ids.end(), rng);
  const std::vector<int32_t> src(ids.begin(), ids.begin() + n), dst(ids.begin() + n, ids.begin() + 2 * n);
  test::DeviceBuffer<bf16> dkp(pool_n), dvp(pool_n);
  test::DeviceBuffer<int32_t> dsrc(n), ddst(n);
  dkp.upload(kp);
  dvp.upload(vp);
  dsrc.upload_raw(src);
  ddst.upload_raw(dst);
  test::inputs_ready();
  hone::cuda::kv_copy_blocks(dkp.get(), dvp.get(), dsrc.get(), ddst.get(), n, Hkv, D, bs, test::check_context());
  const std::vector<float> gk = dkp.download(), gv = dvp.download();
  hone::cpu::kv_copy_blocks(kp.data(), vp.data(), src.data(), dst.data(), n, Hkv, D, bs);  // the CPU twin
  return std::max(test::rel_l2(gk.data(), kp.data(), pool_n), test::rel_l2(gv.data(), vp.data(), pool_n));
}

const test::OpCheckRegistration reg_append{
    {"kv_append", 0.0, {{1, 8, 128, 16, 4},
                    {37, 8, 128, 16, 8},
                    {200, 2, 64, 8, 40},
                    {33, 3, 12, 16, 5},
                    {37, 8, 128, 16, 8, 3072},
                    {200, 2, 64, 8, 40, 1152},
                    {33, 3, 12, 16, 5, 5}},
     &check_append}};
const test::OpCheckRegistration reg_copy{
    {"kv_copy_blocks", 0.0, {{1, 8, 128, 16, 4}, {7, 8, 64, 16, 20}, {3, 3, 12, 8, 9}}, &check_copy}};

}  // namespace
#endif  // HONE_CUDA
