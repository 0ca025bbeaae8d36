// GPU cases of the packed attention beyond the per-op checks: the cuDNN plan cache (a second call with the same
// bucketed shape builds no graph), the HONE_ATTENTION switch, the cuDNN path against the CUDA reference on a
// larger packed batch than the CPU checks use, and the backward writing dq/dk/dv in place: every packed row, nothing
// past them (the bucketed batch and sequence padding must not reach memory after the T rows).
#include <boost/test/unit_test.hpp>

#include <cmath>
#include <cstdlib>
#include <vector>

#include "common/gpu.h"
#include "cuda/attention_cudnn.h"
#include "device_buffer.h"
#include "op_checks.h"

namespace {

using hone::cuda::bf16;

// Packed inputs of one attention problem on the device.
struct Packed {
  int Hq, Hkv, D, T = 0, max_len = 0, num_seqs;
  std::vector<int32_t> cu{0};
  test::DeviceBuffer<bf16> q, k, v, out, dout, dq, dk, dv;
  test::DeviceBuffer<float> lse;
  test::DeviceBuffer<int32_t> dcu;

  static int total(const std::vector<int>& lens) {
    int t = 0;
    for (int n : lens) t += n;
    return t;
  }
  Packed(int hq, int hkv, int d, const std::vector<int>& lens, std::mt19937_64& rng)
      : Hq(hq), Hkv(hkv), D(d), T(total(lens)), num_seqs(int(lens.size())), q(int64_t(T) * hq * d),
        k(int64_t(T) * hkv * d), v(int64_t(T) * hkv * d), out(int64_t(T) * hq * d), dout(int64_t(T) * hq * d),
        dq(int64_t(T) * hq * d), dk(int64_t(T) * hkv * d), dv(int64_t(T) * hkv * d), lse(int64_t(hq) * T),
        dcu(int64_t(lens.size()) + 1) {
    for (int n : lens) {
      cu.push_back(cu.back() + n);
      max_len = std::max(max_len, n);
    }
    dcu.upload_raw(cu);
    for (auto* b : {&q, &k, &v, &dout}) {
      auto h = test::random_vector(b->size(), rng);
      b->upload(h);
    }
  }
  float scale() const { return 1.f / std::sqrt(float(D)); }
};

struct ContextGuard {
  hone::cuda::GpuContext ctx = hone::cuda::create_gpu_context(0);
  ~ContextGuard() { hone::cuda::destroy_gpu_context(ctx); }
};

}  // namespace

BOOST_AUTO_TEST_SUITE(gpu_attention)

BOOST_AUTO_TEST_CASE(cudnn_plans_are_built_once_per_bucketed_shape, *boost::unit_test::precondition(test::needs_gpu)) {
  ContextGuard g;
  std::mt19937_64 rng(7);
  Packed a(16, 8, 128, {5, 90, 33}, rng);   // buckets B 8, S 128
  Packed b(16, 8, 128, {100, 7, 128}, rng);  // same buckets, other lengths and T
  BOOST_TEST(hone::cuda::attention_cudnn_graphs_built(g.ctx) == 0);
  for (Packed* p : {&a, &b}) {
    BOOST_TEST_REQUIRE(hone::cuda::attention_forward_cudnn(p->out.get(), p->lse.get(), p->q.get(), p->k.get(),
                                                           p->v.get(), p->dcu.get(), p->num_seqs, p->max_len, p->T,
                                                           p->Hq, p->Hkv, p->D, p->scale(), g.ctx));
    BOOST_TEST(hone::cuda::attention_cudnn_graphs_built(g.ctx) == 1);
  }
  for (Packed* p : {&a, &b}) {
    BOOST_TEST_REQUIRE(hone::cuda::attention_backward_cudnn(
        p->dq.get(), p->dk.get(), p->dv.get(), p->dout.get(), p->out.get(), p->lse.get(), p->q.get(), p->k.get(),
        p->v.get(), p->dcu.get(), p->num_seqs, p->max_len, p->T, p->Hq, p->Hkv, p->D, p->scale(), g.ctx));
    BOOST_TEST(hone::cuda::attention_cudnn_graphs_built(g.ctx) == 2);
  }
  // Another sequence-length bucket is another graph.
  Packed c(16, 8, 128, {129}, rng);
  BOOST_TEST_REQUIRE(hone::cuda::attention_forward_cudnn(c.out.get(), c.lse.get(), c.q.get(), c.k.get(), c.v.get(),
                                                         c.dcu.get(), c.num_seqs, c.max_len, c.T, c.Hq, c.Hkv, c.D,
                                                         c.scale(), g.ctx));
  BOOST_TEST(hone::cuda::attention_cudnn_graphs_built(g.ctx) == 3);
}

BOOST_AUTO_TEST_CASE(reference_switch_builds_no_cudnn_graph, *boost::unit_test::precondition(test::needs_gpu)) {
  ContextGuard g;
  std::mt19937_64 rng(8);
  Packed p(8, 4, 64, {3, 40}, rng);
  p.out.poison();
  setenv("HONE_ATTENTION", "reference", 1);
  hone::cuda::attention_forward(p.out.get(), p.lse.get(), p.q.get(), p.k.get(), p.v.get(), p.dcu.get(), p.num_seqs,
                                p.max_len, p.T, p.Hq, p.Hkv, p.D, p.scale(), g.ctx);
  unsetenv("HONE_ATTENTION");
  BOOST_TEST(hone::cuda::attention_cudnn_graphs_built(g.ctx) == 0);
  const auto out = p.out.download();
  bool finite = true;
  for (float x : out) finite = finite && std::isfinite(x);
  BOOST_TEST(finite);
}

// Both GPU paths on a packed batch of training size (2,100 tokens, Qwen3-0.6B heads): they must agree closely.
BOOST_AUTO_TEST_CASE(cudnn_agrees_with_the_cuda_reference, *boost::unit_test::precondition(test::needs_gpu)) {
  ContextGuard g;
  std::mt19937_64 rng(9);
  const std::vector<int> lens = {1000, 1, 511, 64, 300, 224};
  Packed c(16, 8, 128, lens, rng), r(16, 8, 128, lens, rng);
  // The same inputs in both.
  for (auto [from, to] : {std::pair{&c.q, &r.q}, {&c.k, &r.k}, {&c.v, &r.v}, {&c.dout, &r.dout}})
    CUDA_CHECK(cudaMemcpy(to->get(), from->get(), size_t(from->size()) * sizeof(bf16), cudaMemcpyDeviceToDevice));
  for (Packed* p : {&c, &r}) {  // both paths write their gradients
    p->dq.poison();
    p->dk.poison();
    p->dv.poison();
  }
  BOOST_TEST_REQUIRE(hone::cuda::attention_forward_cudnn(c.out.get(), c.lse.get(), c.q.get(), c.k.get(), c.v.get(),
                                                         c.dcu.get(), c.num_seqs, c.max_len, c.T, c.Hq, c.Hkv, c.D,
                                                         c.scale(), g.ctx));
  hone::cuda::attention_forward_reference(r.out.get(), r.lse.get(), r.q.get(), r.k.get(), r.v.get(), r.dcu.get(),
                                          r.num_seqs, r.T, r.Hq, r.Hkv, r.D, r.scale(), g.ctx);
  BOOST_TEST_REQUIRE(hone::cuda::attention_backward_cudnn(
      c.dq.get(), c.dk.get(), c.dv.get(), c.dout.get(), c.out.get(), c.lse.get(), c.q.get(), c.k.get(), c.v.get(),
      c.dcu.get(), c.num_seqs, c.max_len, c.T, c.Hq, c.Hkv, c.D, c.scale(), g.ctx));
  test::DeviceBuffer<float> delta(int64_t(r.Hq) * r.T);
  hone::cuda::attention_backward_reference(r.dq.get(), r.dk.get(), r.dv.get(), r.dout.get(), r.out.get(),
                                           r.lse.get(), r.q.get(), r.k.get(), r.v.get(), r.dcu.get(), r.num_seqs, r.T,
                                           r.Hq, r.Hkv, r.D, r.scale(), delta.get(), g.ctx);
  CUDA_CHECK(cudaStreamSynchronize(g.ctx.stream));
  auto compare = [](const auto& a, const auto& b, const char* what, double tol) {
    const auto x = a.download(), y = b.download();
    const double err = test::rel_l2(x.data(), y.data(), int64_t(x.size()));
    BOOST_TEST(err <= tol, what << ": cuDNN vs reference relative L2 " << err);
  };
  compare(c.out, r.out, "out", 1e-2);
  compare(c.lse, r.lse, "lse", 1e-3);
  compare(c.dq, r.dq, "dq", 1e-2);
  compare(c.dk, r.dk, "dk", 1e-2);
  compare(c.dv, r.dv, "dv", 1e-2);
}

// cuDNN writes the gradients straight into the caller's buffers: all T rows (poisoned before) get finite values, and
// guard rows after them (the padded batches and sequences of the bucketed graph start there) keep theirs.
BOOST_AUTO_TEST_CASE(cudnn_backward_writes_every_row_in_place_and_no_more,
                     *boost::unit_test::precondition(test::needs_gpu)) {
  ContextGuard g;
  std::mt19937_64 rng(10);
  Packed p(16, 8, 128, {5, 90, 33}, rng);  // buckets B 8, S 128: padding in both
  BOOST_TEST_REQUIRE(hone::cuda::attention_forward_cudnn(p.out.get(), p.lse.get(), p.q.get(), p.k.get(), p.v.get(),
                                                         p.dcu.get(), p.num_seqs, p.max_len, p.T, p.Hq, p.Hkv, p.D,
                                                         p.scale(), g.ctx));
  const int64_t guard_rows = 256, nq = int64_t(p.T) * p.Hq * p.D, nkv = int64_t(p.T) * p.Hkv * p.D;
  test::DeviceBuffer<bf16> dq(nq + guard_rows * p.Hq * p.D), dk(nkv + guard_rows * p.Hkv * p.D),
      dv(nkv + guard_rows * p.Hkv * p.D);
  for (auto* b : {&dq, &dk, &dv}) {
    b->zero();
    CUDA_CHECK(cudaMemset(b->get(), 0xFF, size_t(b == &dq ? nq : nkv) * sizeof(bf16)));  // NaN on the T rows
  }
  BOOST_TEST_REQUIRE(hone::cuda::attention_backward_cudnn(
      dq.get(), dk.get(), dv.get(), p.dout.get(), p.out.get(), p.lse.get(), p.q.get(), p.k.get(), p.v.get(),
      p.dcu.get(), p.num_seqs, p.max_len, p.T, p.Hq, p.Hkv, p.D, p.scale(), g.ctx));
  CUDA_CHECK(cudaStreamSynchronize(g.ctx.stream));
  for (auto* b : {&dq, &dk, &dv}) {
    const auto h = b->download();
    const size_t rows_end = size_t(b == &dq ? nq : nkv);
    size_t bad_rows = 0, touched_guard = 0;
    for (size_t i = 0; i < h.size(); ++i) {
      if (i < rows_end && !std::isfinite(h[i])) ++bad_rows;
      if (i >= rows_end && h[i] != 0.f) ++touched_guard;
    }
    BOOST_TEST(bad_rows == 0u, "unwritten gradient elements: " << bad_rows);
    BOOST_TEST(touched_guard == 0u, "elements written past the T rows: " << touched_guard);
  }
}

BOOST_AUTO_TEST_SUITE_END()
