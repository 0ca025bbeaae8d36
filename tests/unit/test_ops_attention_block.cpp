// The ring attention's ops on the CPU: a block's full attention of query segments against key segments against a
// softmax in double; the merge of two blocks' partial results equal to one block over all their keys; and the ring
// itself simulated in one process for C = 2, 3 and 4 ranks (every rank's split, the diagonal block causal, the
// others by earlier()/later(), merged), forward and backward, against the causal attention of the whole batch.
#include <boost/test/unit_test.hpp>

#include <cmath>
#include <limits>

#include "common/finite_diff.h"
#include "model/packed_batch.h"
#include "ops/ops.h"
#include "parallel/context_parallel.h"

using namespace hone;

BOOST_AUTO_TEST_SUITE(ops_attention_block)

namespace {

constexpr int Hq = 4, Hkv = 2, D = 8;
const float kScale = 1.f / std::sqrt(float(D));

struct Segs {
  std::vector<int32_t> qs, ql, ks, kl;
  AttentionSegments view() const {
    AttentionSegments s;
    s.q_start = qs.data(), s.q_len = ql.data(), s.kv_start = ks.data(), s.kv_len = kl.data();
    s.count = int(qs.size());
    for (size_t i = 0; i < qs.size(); ++i) s.max_q = std::max(s.max_q, ql[i]), s.max_kv = std::max(s.max_kv, kl[i]);
    return s;
  }
};

double dot(const float* a, const float* b) {
  double d = 0;
  for (int c = 0; c < D; ++c) d += double(a[c]) * b[c];
  return d;
}

}  // namespace

BOOST_AUTO_TEST_CASE(block_forward_matches_double_softmax) {
  const int Tq = 11, Tkv = 9;
  const Segs segs{{0, 4, 9}, {3, 5, 2}, {0, 3, 5}, {2, 2, 4}};  // rows 3 and 9.. of q belong to no segment
  const auto q = test::random_floats(size_t(Tq * Hq * D), 1, -2.f, 2.f);
  const auto k = test::random_floats(size_t(Tkv * Hkv * D), 2, -2.f, 2.f);
  const auto v = test::random_floats(size_t(Tkv * Hkv * D), 3, -2.f, 2.f);
  std::vector<float> out(q.size(), 7.f), lse(size_t(Hq * Tq), 7.f);
  cpu::attention_block_forward(out.data(), lse.data(), q.data(), k.data(), v.data(), segs.view(), Tq, Tkv, Hq, Hkv, D,
                               kScale);
  std::vector<bool> covered(Tq, false);
  for (size_t s = 0; s < segs.qs.size(); ++s)
    for (int i = segs.qs[s]; i < segs.qs[s] + segs.ql[s]; ++i) {
      covered[size_t(i)] = true;
      for (int h = 0; h < Hq; ++h) {
        const int g = h / (Hq / Hkv);
        std::vector<double> sc;
        double mx = -1e300;
        for (int j = segs.ks[s]; j < segs.ks[s] + segs.kl[s]; ++j) {
          sc.push_back(kScale * dot(&q[size_t((i * Hq + h) * D)], &k[size_t((j * Hkv + g) * D)]));
          mx = std::max(mx, sc.back());
        }
        double sum = 0;
        for (double& x : sc) sum += (x = std::exp(x - mx));
        BOOST_TEST(std::abs(lse[size_t(h * Tq + i)] - (mx + std::log(sum))) < 1e-5);
        for (int c = 0; c < D; ++c) {
          double o = 0;
          for (int j = 0; j < segs.kl[s]; ++j) o += sc[size_t(j)] / sum * v[size_t(((segs.ks[s] + j) * Hkv + g) * D + c)];
          BOOST_TEST(std::abs(out[size_t((i * Hq + h) * D + c)] - o) < 1e-5);
        }
      }
    }
  for (int i = 0; i < Tq; ++i)  // rows outside the segments keep their values
    if (!covered[size_t(i)]) BOOST_TEST(out[size_t(i * Hq * D)] == 7.f);
}

// Two blocks of a row's keys merged by their lse give the attention over all the keys.
BOOST_AUTO_TEST_CASE(merge_of_two_blocks_is_the_whole) {
  const int T = 6, Tkv = 10;
  const Segs whole{{0, 3}, {3, 3}, {0, 5}, {5, 5}}, first{{0, 3}, {3, 3}, {0, 5}, {2, 3}},
      second{{0, 3}, {3, 3}, {2, 8}, {3, 2}};
  const auto q = test::random_floats(size_t(T * Hq * D), 4, -2.f, 2.f);
  const auto k = test::random_floats(size_t(Tkv * Hkv * D), 5, -2.f, 2.f);
  const auto v = test::random_floats(size_t(Tkv * Hkv * D), 6, -2.f, 2.f);
  std::vector<float> want(q.size()), want_lse(size_t(Hq * T));
  cpu::attention_block_forward(want.data(), want_lse.data(), q.data(), k.data(), v.data(), whole.view(), T, Tkv, Hq,
                               Hkv, D, kScale);
  std::vector<float> out(q.size(), std::nanf("")), lse(size_t(Hq * T), -std::numeric_limits<float>::infinity());
  std::vector<float> bo(q.size()), bl(size_t(Hq * T));
  for (const Segs* s : {&first, &second}) {
    cpu::attention_block_forward(bo.data(), bl.data(), q.data(), k.data(), v.data(), s->view(), T, Tkv, Hq, Hkv, D,
                                 kScale);
    cpu::attention_merge_forward(out.data(), lse.data(), bo.data(), bl.data(), s->view(), T, Hq, D);
  }
  for (size_t i = 0; i < out.size(); ++i) BOOST_TEST(std::abs(out[i] - want[i]) < 1e-5);
  for (size_t i = 0; i < lse.size(); ++i) BOOST_TEST(std::abs(lse[i] - want_lse[i]) < 1e-5);
}

// The ring of C ranks in one process: every rank's q, k, v are the whole batch's rows it holds (random values on
// padding rows, which no real row sees), each rank's output is merged over the C blocks as ring_attention.cpp does,
// and the backward sends each block's k/v gradients to its owner. Real rows match the causal attention of the
// whole batch.
BOOST_AUTO_TEST_CASE(ring_in_one_process_equals_causal_attention) {
  for (int C : {2, 3, 4}) {
    PackedBatch batch;
    for (int n : {7, 1, 12, 2, 5}) batch.append(std::vector<int32_t>(size_t(n), 1));
    const int T = batch.num_tokens();
    const auto q = test::random_floats(size_t(T * Hq * D), 10, -2.f, 2.f);
    const auto k = test::random_floats(size_t(T * Hkv * D), 11, -2.f, 2.f);
    const auto v = test::random_floats(size_t(T * Hkv * D), 12, -2.f, 2.f);
    const auto dout = test::random_floats(size_t(T * Hq * D), 13, -1.f, 1.f);
    std::vector<float> out(q.size()), lse(size_t(Hq * T));
    cpu::attention_forward(out.data(), lse.data(), q.data(), k.data(), v.data(), batch.cu_seqlens.data(),
                           batch.num_seqs(), T, Hq, Hkv, D, kScale);
    std::vector<float> dq(q.size(), 0.f), dk(k.size(), 0.f), dv(v.size(), 0.f);
    cpu::attention_backward(dq.data(), dk.data(), dv.data(), dout.data(), out.data(), lse.data(), q.data(), k.data(),
                            v.data(), batch.cu_seqlens.data(), batch.num_seqs(), T, Hq, Hkv, D, kScale);

    // Each rank's rows (padding: fixed garbage q/k/v, zero dout).
    std::vector<ContextParallelSplit> sp;
    std::vector<std::vector<float>> lq(test::len(C)), lk(test::len(C)), lv(test::len(C)), ldo(test::len(C));
    for (int r = 0; r < C; ++r) {
      sp.push_back(split_for_context_parallel(batch, C, r));
      for (int32_t g : sp.back().global_row) {
        auto take = [&](std::vector<float>& dst, const std::vector<float>& src, int width, float pad) {
          for (int c = 0; c < width; ++c) dst.push_back(g >= 0 ? src[size_t(g * width + c)] : pad * float(c % 3));
        };
        take(lq[size_t(r)], q, Hq * D, 0.5f);
        take(lk[size_t(r)], k, Hkv * D, -0.7f);
        take(lv[size_t(r)], v, Hkv * D, 0.9f);
        take(ldo[size_t(r)], dout, Hq * D, 0.f);
      }
    }
    const int Tl = sp[0].local_tokens();
    for (int r = 1; r < C; ++r) BOOST_TEST(sp[size_t(r)].local_tokens() == Tl);
    std::vector<std::vector<float>> lo(test::len(C)), ll(test::len(C)), ldq(test::len(C)), ldk(test::len(C)),
        ldv(test::len(C));
    std::vector<float> bo(size_t(Tl * Hq * D)), bl(size_t(Hq * Tl));
    auto segs_of = [&](int i, int r) { return r < i ? sp[size_t(i)].earlier() : sp[size_t(i)].later(); };
    for (int i = 0; i < C; ++i) {
      const PackedBatch& lb = sp[size_t(i)].local;
      lo[size_t(i)].resize(bo.size());
      ll[size_t(i)].resize(bl.size());
      cpu::attention_forward(lo[size_t(i)].data(), ll[size_t(i)].data(), lq[size_t(i)].data(), lk[size_t(i)].data(),
                             lv[size_t(i)].data(), lb.cu_seqlens.data(), lb.num_seqs(), Tl, Hq, Hkv, D, kScale);
      for (int j = 1; j < C; ++j) {
        const int r = (i - j + C) % C;
        cpu::attention_block_forward(bo.data(), bl.data(), lq[size_t(i)].data(), lk[size_t(r)].data(),
                                     lv[size_t(r)].data(), segs_of(i, r), Tl, Tl, Hq, Hkv, D, kScale);
        cpu::attention_merge_forward(lo[size_t(i)].data(), ll[size_t(i)].data(), bo.data(), bl.data(), segs_of(i, r),
                                     Tl, Hq, D);
      }
    }
    // Each rank's own causal block writes its gradients first (attention_backward writes), then the other ranks'
    // blocks add theirs, as the ring does.
    for (int i = 0; i < C; ++i) {
      ldq[size_t(i)].assign(bo.size(), std::nanf(""));
      ldk[size_t(i)].assign(size_t(Tl * Hkv * D), std::nanf(""));
      ldv[size_t(i)].assign(size_t(Tl * Hkv * D), std::nanf(""));
      const PackedBatch& lb = sp[size_t(i)].local;
      cpu::attention_backward(ldq[size_t(i)].data(), ldk[size_t(i)].data(), ldv[size_t(i)].data(), ldo[size_t(i)].data(),
                              lo[size_t(i)].data(), ll[size_t(i)].data(), lq[size_t(i)].data(), lk[size_t(i)].data(),
                              lv[size_t(i)].data(), lb.cu_seqlens.data(), lb.num_seqs(), Tl, Hq, Hkv, D, kScale);
    }
    for (int i = 0; i < C; ++i) {
      for (int j = 1; j < C; ++j) {
        const int r = (i - j + C) % C;
        cpu::attention_block_backward(ldq[size_t(i)].data(), ldk[size_t(r)].data(), ldv[size_t(r)].data(),
                                      ldo[size_t(i)].data(), lo[size_t(i)].data(), ll[size_t(i)].data(),
                                      lq[size_t(i)].data(), lk[size_t(r)].data(), lv[size_t(r)].data(), segs_of(i, r),
                                      Tl, Tl, Hq, Hkv, D, kScale);
      }
    }
    double worst = 0;
    int rows = 0;
    for (int i = 0; i < C; ++i)
      for (int t = 0; t < Tl; ++t) {
        const int32_t g = sp[size_t(i)].global_row[size_t(t)];
        if (g < 0) continue;
        ++rows;
        for (int c = 0; c < Hq * D; ++c) {
          worst = std::max<double>(worst, std::abs(lo[size_t(i)][size_t(t * Hq * D + c)] - out[size_t(g * Hq * D + c)]));
          worst = std::max<double>(worst, std::abs(ldq[size_t(i)][size_t(t * Hq * D + c)] - dq[size_t(g * Hq * D + c)]));
        }
        for (int c = 0; c < Hkv * D; ++c) {
          worst = std::max<double>(worst, std::abs(ldk[size_t(i)][size_t(t * Hkv * D + c)] - dk[size_t(g * Hkv * D + c)]));
          worst = std::max<double>(worst, std::abs(ldv[size_t(i)][size_t(t * Hkv * D + c)] - dv[size_t(g * Hkv * D + c)]));
        }
        for (int h = 0; h < Hq; ++h)
          worst = std::max<double>(worst, std::abs(ll[size_t(i)][size_t(h * Tl + t)] - lse[size_t(h * T + g)]));
      }
    BOOST_TEST_CONTEXT("C = " << C) {
      BOOST_TEST(rows == T);  // every row once
      BOOST_TEST(worst < 2e-5);
    }
  }
}

BOOST_AUTO_TEST_SUITE_END()
