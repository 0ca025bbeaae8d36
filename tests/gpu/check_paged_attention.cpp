// GPU checks of decode attention over the paged KV cache (cuda/generation_ops.h) against the fp32 CPU twin
// cpu::paged_attention_decode_forward on the same bf16-rounded q and pools. Tolerance 1e-2 relative L2 (bf16 output).
// A shape is {Hq, Hkv, D, block_size, plain rows, plain max length, G, groups, prefix length, suffix max}:
//   * plain rows (outside every group) have lengths: the max, 1, one block boundary, then random in [1, max]; half
//     of them come before the groups, half after;
//   * each group has G rows sharing its prefix blocks; odd groups use a prefix one block shorter (varied
//     prefix_lens); members have prefix + [1, suffix max] tokens, except the first member of each group with a
//     nonzero prefix, whose sequence ends exactly at the prefix (empty suffix).
// Blocks are placed in random order; every pool entry no row owns (whole blocks and the tails of last blocks) is
// NaN, so a read beyond a row's length fails the check. "paged_attention_decode_shared" runs the shared-prefix path
// (its own plan and each prefix plan a caller may set) and, on the same data, the plain path (num_groups = 0), and
// returns the worst of the errors; "paged_attention_decode" runs the plain path with each plan of query vectors a
// CTA (plain_vectors).
#if HONE_CUDA
#include <algorithm>
#include <cmath>
#include <numeric>

#include "check_common.h"
#include "cuda/generation_ops.h"
#include "device_buffer.h"
#include "op_checks.h"
#include "ops/ops.h"

namespace {

using hone::cuda::bf16;

struct Batch {
  int Hq = 0, Hkv = 0, D = 0, bs = 0, B = 0, max_blocks = 0, total_blocks = 0, max_len = 0, max_prefix = 0;
  std::vector<int32_t> lens, table, group_offsets, prefix_lens;
};

Batch make_batch(const test::OpShape& s, std::mt19937_64& rng) {
  Batch b;
  b.Hq = int(s.at(0));
  b.Hkv = int(s.at(1));
  b.D = int(s.at(2));
  b.bs = int(s.at(3));
  const int n_plain = int(s.at(4)), plain_max = int(s.at(5)), G = int(s.at(6)), groups = int(s.at(7));
  const int prefix = int(s.at(8)), suffix_max = int(s.at(9));
  std::uniform_int_distribution<int> plain_len(1, std::max(1, plain_max)), suffix_len(1, std::max(1, suffix_max));
  std::vector<int32_t> plain;
  for (int i = 0; i < n_plain; ++i) {
    const int boundary = b.bs * std::max(1, plain_max / b.bs / 2);
    plain.push_back(i == 0 ? plain_max : i == 1 ? 1 : i == 2 ? std::min(plain_max, boundary) : plain_len(rng));
  }
  const int before = n_plain / 2;
  b.lens.assign(plain.begin(), plain.begin() + before);
  std::vector<int> row_prefix(static_cast<size_t>(before), 0);
  for (int g = 0; g < groups; ++g) {
    const int pl = (g % 2 == 1 && prefix >= b.bs) ? prefix - b.bs : prefix;
    b.group_offsets.push_back(int32_t(b.lens.size()));
    b.prefix_lens.push_back(pl);
    b.max_prefix = std::max(b.max_prefix, pl);
    for (int m = 0; m < G; ++m) {
      b.lens.push_back(pl + ((m == 0 && pl > 0) ? 0 : suffix_len(rng)));
      row_prefix.push_back(pl);
    }
  }
  if (groups > 0) b.group_offsets.push_back(int32_t(b.lens.size()));
  for (int i = before; i < n_plain; ++i) {
    b.lens.push_back(plain[size_t(i)]);
    row_prefix.push_back(0);
  }
  b.B = int(b.lens.size());
  for (int32_t n : b.lens) b.max_len = std::max(b.max_len, int(n));
  b.max_blocks = (b.max_len + b.bs - 1) / b.bs + 1;

  // Block ids: shared prefix blocks once per group, then each row's own blocks; all in random order.
  int needed = 3;  // unowned blocks
  for (int r = 0; r < b.B; ++r) needed += (b.lens[size_t(r)] + b.bs - 1) / b.bs;
  b.total_blocks = needed;
  std::vector<int32_t> perm(static_cast<size_t>(needed));
  std::iota(perm.begin(), perm.end(), 0);
  std::shuffle(perm.begin(), perm.end(), rng);
  b.table.assign(static_cast<size_t>(b.B) * size_t(b.max_blocks), 0);
  int next = 0;
  for (int r = 0; r < b.B; ++r) {
    const int nb = (b.lens[size_t(r)] + b.bs - 1) / b.bs, shared = row_prefix[size_t(r)] / b.bs;
    int first_row = r;  // the group's first row owns the shared blocks
    for (size_t g = 0; g + 1 < b.group_offsets.size(); ++g)
      if (r >= b.group_offsets[g] && r < b.group_offsets[g + 1]) first_row = b.group_offsets[g];
    for (int i = 0; i < nb; ++i) {
      const bool reuse = r != first_row && i < shared;
      b.table[size_t(r) * b.max_blocks + i] = reuse ? b.table[size_t(first_row) * b.max_blocks + i] : perm[size_t(next++)];
    }
  }
  return b;
}

// Worst relative L2 error of the GPU paths (shared prefix when the batch has groups, and plain) against the CPU.
double check_paged(const test::OpShape& s, std::mt19937_64& rng, bool shared_path) {
  Batch b = make_batch(s, rng);
  const int Hq = b.Hq, Hkv = b.Hkv, D = b.D, bs = b.bs;
  const int64_t pool_n = int64_t(b.total_blocks) * Hkv * bs * D, nq = int64_t(b.B) * Hq * D;
  std::vector<float> kp(static_cast<size_t>(pool_n), NAN), vp(static_cast<size_t>(pool_n), NAN);
  std::normal_distribution<float> nd(0.f, 1.f);
  for (int r = 0; r < b.B; ++r)
    for (int j = 0; j < b.lens[size_t(r)]; ++j)
      for (int g = 0; g < Hkv; ++g) {
        const int64_t blk = b.table[size_t(r) * b.max_blocks + j / bs];
        const int64_t at = ((blk * Hkv + g) * bs + j % bs) * D;
        if (!std::isnan(kp[size_t(at)])) continue;  // a shared block already written by its group's first row
        for (int d = 0; d < D; ++d) {
          kp[size_t(at + d)] = nd(rng);
          vp[size_t(at + d)] = nd(rng);
        }
      }
  std::vector<float> q = test::random_vector(nq, rng, 2.f);
  test::DeviceBuffer<bf16> dk(pool_n), dv(pool_n), dq(nq), dout(nq);
  test::DeviceBuffer<int32_t> dtable(int64_t(b.table.size())), dlens(b.B),
      doffsets(int64_t(std::max<size_t>(1, b.group_offsets.size()))),
      dprefix(int64_t(std::max<size_t>(1, b.prefix_lens.size())));
  dk.upload(kp);
  dv.upload(vp);
  dq.upload(q);
  dtable.upload_raw(b.table);
  dlens.upload_raw(b.lens);
  if (!b.group_offsets.empty()) {
    doffsets.upload_raw(b.group_offsets);
    dprefix.upload_raw(b.prefix_lens);
  }
  const float scale = 1.f / std::sqrt(float(D));
  std::vector<float> want(static_cast<size_t>(nq));
  hone::cpu::paged_attention_decode_forward(want.data(), q.data(), kp.data(), vp.data(), b.table.data(),
                                            b.lens.data(), b.B, b.max_blocks, bs, Hq, Hkv, D, scale);

  hone::cuda::PagedDecodeArgs a;
  a.block_tables = dtable.get();
  a.seq_lens = dlens.get();
  a.B = b.B;
  a.max_blocks = b.max_blocks;
  a.max_seq_len = b.max_len;
  a.block_size = bs;
  double err = 0;
  // The shared-prefix path with the op's own plan, then with each prefix plan a caller may ask for (query vectors
  // per CTA; the last also splits the prefix into pieces of 16 tokens); then the plain path on the same data.
  // The plain path runs with the op's own plan, then with each plan of query vectors a CTA a caller may ask for.
  const int kPlans[][2] = {{0, 0}, {1, 0}, {2, 0}, {4, 0}, {8, 16}};
  const int kPlainPlans[] = {0, 1, 2, 4, 8};
  const int passes = shared_path ? 6 : 5;
  for (int pass = 0; pass < passes; ++pass) {
    const bool groups = shared_path && pass < 5;
    a.plain_vectors = shared_path ? 0 : kPlainPlans[pass];
    a.num_groups = groups ? int(b.prefix_lens.size()) : 0;
    a.group_offsets = groups ? doffsets.get() : nullptr;
    a.prefix_lens = groups ? dprefix.get() : nullptr;
    a.max_prefix_len = groups ? b.max_prefix : 0;
    a.prefix_vectors = groups ? kPlans[pass][0] : 0;
    a.prefix_split_tokens = groups ? kPlans[pass][1] : 0;
    dout.poison();
    test::inputs_ready();
    hone::cuda::paged_attention_decode_forward(dout.get(), dq.get(), dk.get(), dv.get(), a, Hq, Hkv, D, scale,
                                               test::check_context());
    const std::vector<float> got = dout.download();
    err = test::worst(err, test::rel_l2(got.data(), want.data(), nq));
  }
  return err;
}

// {Hq, Hkv, D, block_size, plain rows, plain max length, G, groups, prefix length, suffix max}
const std::vector<test::OpShape> kPlainShapes = {
    {16, 8, 128, 16, 1, 1, 0, 0, 0, 0},       // B = 1, one token
    {16, 8, 128, 16, 1, 3000, 0, 0, 0, 0},    // B = 1, long: split along the sequence
    {16, 2, 128, 16, 5, 300, 0, 0, 0, 0},     // GQA 8, split
    {4, 4, 64, 16, 7, 64, 0, 0, 0, 0},        // GQA 1, short: one split, direct bf16 output
    {16, 8, 128, 16, 70, 100, 0, 0, 0, 0},    // enough rows to fill the GPU: direct
    {16, 8, 64, 8, 9, 200, 0, 0, 0, 0},       // block 8
    {16, 8, 128, 32, 3, 1000, 0, 0, 0, 0},    // block 32
    {32, 8, 128, 256, 2, 600, 0, 0, 0, 0},    // block 256, GQA 4
    {12, 1, 64, 16, 3, 500, 0, 0, 0, 0},      // GQA 12: two query chunks (8 + 4)
    {32, 4, 128, 16, 40, 700, 0, 0, 0, 0},    // Qwen3-30B-A3B heads (GQA 8)
    {4, 2, 16, 16, 6, 40, 0, 0, 0, 0},        // head dim 16 (the demo deck's model)
    {8, 2, 32, 16, 5, 300, 0, 0, 0, 0},       // head dim 32
};
const std::vector<test::OpShape> kSharedShapes = {
    {16, 8, 128, 16, 2, 50, 8, 3, 128, 100},  // Qwen3-0.6B heads, groups of 8, plain rows before and after
    {16, 2, 128, 16, 3, 300, 3, 4, 64, 70},   // GQA 8, groups of 3 (24 query vectors per group)
    {4, 4, 64, 16, 0, 0, 8, 2, 32, 5},        // GQA 1, only groups
    {4, 2, 16, 16, 2, 20, 16, 2, 16, 3},      // head dim 16, groups of 16
    {16, 8, 64, 16, 1, 20, 3, 2, 2048, 40},   // long prefix: the prefix is split too
    {16, 8, 128, 16, 1, 10, 8, 1, 0, 30},     // an empty prefix
    {16, 8, 128, 16, 4, 3000, 8, 2, 160, 1500},  // long suffixes: split suffix + prefix partials
};

const test::OpCheckRegistration reg_plain{{"paged_attention_decode", 1e-2, kPlainShapes,
                                           [](auto& s, auto& r) { return check_paged(s, r, false); }}};
const test::OpCheckRegistration reg_shared{{"paged_attention_decode_shared", 1e-2, kSharedShapes,
                                            [](auto& s, auto& r) { return check_paged(s, r, true); }}};

}  // namespace
#endif  // HONE_CUDA
