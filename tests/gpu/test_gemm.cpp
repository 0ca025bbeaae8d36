// The row-major cuBLASLt wrapper (cuda/gemm.h) against a plain double-precision loop: every transpose combination,
// bf16 and fp32 outputs, beta 0 and 1, the bias epilogue, leading dimensions wider than the matrix (the padding
// must stay untouched) and operands starting at odd element offsets (2-byte aligned). Also the plan cache.
// Tolerances (relative L2): bf16 output 1e-2 (one rounding is ~2e-3); fp32 output 1e-4 (bf16 products are exact in
// fp32, only the summation order differs, ~1e-6).
#include <boost/test/unit_test.hpp>

#include <array>
#include <cmath>
#include <random>
#include <vector>

#include "common/gpu.h"
#include "cuda/gemm.h"
#include "device_buffer.h"
#include "op_checks.h"

namespace {

using hone::cuda::bf16;
using hone::cuda::GemmOut;
using test::DeviceBuffer;

const hone::cuda::GpuContext& gpu() {
  static hone::cuda::GpuContext ctx = hone::cuda::create_gpu_context(0);  // lives for the whole test program
  return ctx;
}

struct Case {
  bool trans_a, trans_b;
  int M, N, K;
  int pad;     // extra elements per stored row of A, B and D
  int offset;  // elements skipped before A, B, D and bias (odd: operands only 2-byte aligned)
  GemmOut out;
  float alpha, beta;
  bool bias;
};

// Runs one case; returns the relative L2 error of D and checks that D's padding is unchanged.
double run_case(const Case& c, std::mt19937_64& rng, bool* padding_ok) {
  const int a_rows = c.trans_a ? c.K : c.M, a_cols = c.trans_a ? c.M : c.K;
  const int b_rows = c.trans_b ? c.N : c.K, b_cols = c.trans_b ? c.K : c.N;
  const int lda = a_cols + c.pad, ldb = b_cols + c.pad, ldd = c.N + c.pad;
  const int64_t a_n = c.offset + int64_t(a_rows) * lda, b_n = c.offset + int64_t(b_rows) * ldb;
  const int64_t d_n = c.offset + int64_t(c.M) * ldd, bias_n = c.offset + c.N;
  auto a = test::random_vector(a_n, rng), b = test::random_vector(b_n, rng), d0 = test::random_vector(d_n, rng);
  auto bias = test::random_vector(bias_n, rng);
  DeviceBuffer<bf16> d_a(a_n), d_b(b_n), d_bias(bias_n), d_d16(d_n);
  DeviceBuffer<float> d_d32(d_n);
  d_a.upload(a);
  d_b.upload(b);
  d_bias.upload(bias);
  if (c.out == GemmOut::bf16) d_d16.upload(d0); else d_d32.upload(d0);  // d0: the values D starts from
  CUDA_CHECK(cudaDeviceSynchronize());
  void* D = c.out == GemmOut::bf16 ? static_cast<void*>(d_d16.get() + c.offset)
                                   : static_cast<void*>(d_d32.get() + c.offset);
  hone::cuda::gemm(c.trans_a, c.trans_b, c.M, c.N, c.K, c.alpha, d_a.get() + c.offset, lda, d_b.get() + c.offset,
                   ldb, c.beta, D, c.out, ldd, c.bias ? d_bias.get() + c.offset : nullptr, gpu());
  const auto got = c.out == GemmOut::bf16 ? d_d16.download() : d_d32.download();

  std::vector<float> want, have;
  *padding_ok = true;
  for (int64_t i = 0; i < c.offset; ++i) *padding_ok = *padding_ok && got[size_t(i)] == d0[size_t(i)];
  for (int i = 0; i < c.M; ++i) {
    for (int j = 0; j < ldd; ++j) {
      const size_t at = size_t(c.offset + int64_t(i) * ldd + j);
      if (j >= c.N) {
        *padding_ok = *padding_ok && got[at] == d0[at];
        continue;
      }
      double s = 0;
      for (int k = 0; k < c.K; ++k) {
        const double av = c.trans_a ? a[size_t(c.offset + int64_t(k) * lda + i)] : a[size_t(c.offset + int64_t(i) * lda + k)];
        const double bv = c.trans_b ? b[size_t(c.offset + int64_t(j) * ldb + k)] : b[size_t(c.offset + int64_t(k) * ldb + j)];
        s += av * bv;
      }
      double v = c.alpha * s + c.beta * d0[at];
      if (c.bias) v += bias[size_t(c.offset + j)];
      want.push_back(float(v));
      have.push_back(got[at]);
    }
  }
  return test::rel_l2(have.data(), want.data(), int64_t(want.size()));
}

}  // namespace

BOOST_AUTO_TEST_SUITE(cuda_gemm)

BOOST_AUTO_TEST_CASE(row_major_gemm_matches_a_plain_loop, *boost::unit_test::precondition(test::needs_gpu)) {
  std::mt19937_64 rng(7);
  int cases = 0;
  for (int ta = 0; ta < 2; ++ta)
    for (int tb = 0; tb < 2; ++tb)
      for (const GemmOut out : {GemmOut::bf16, GemmOut::f32})
        for (const auto& [M, N, K, pad, offset] : std::vector<std::array<int, 5>>{
                 {1, 1, 1, 0, 0}, {7, 33, 5, 0, 0}, {64, 48, 96, 0, 0}, {33, 17, 65, 3, 1}, {130, 257, 129, 8, 8}}) {
          for (const float beta : {0.f, 1.f}) {
            const bool bias = out == GemmOut::bf16 && (M + beta) > 1.f;  // bias on most bf16 cases
            const Case c{ta != 0, tb != 0, M, N, K, pad, offset, out, 0.75f, beta, bias};
            bool padding_ok = false;
            const double e = run_case(c, rng, &padding_ok);
            const double tol = out == GemmOut::bf16 ? 1e-2 : 1e-4;
            BOOST_TEST(e <= tol, "trans_a=" << ta << " trans_b=" << tb << " M=" << M << " N=" << N << " K=" << K
                                            << " pad=" << pad << " offset=" << offset << " out="
                                            << (out == GemmOut::bf16 ? "bf16" : "fp32") << " beta=" << beta
                                            << " bias=" << bias << ": relative L2 error " << e);
            BOOST_TEST(padding_ok, "the GEMM wrote outside D (M=" << M << " N=" << N << " pad=" << pad << ")");
            ++cases;
          }
        }
  BOOST_TEST(cases == 80);
}

BOOST_AUTO_TEST_CASE(plans_are_cached_by_shape, *boost::unit_test::precondition(test::needs_gpu)) {
  const int M = 24, N = 40, K = 56;
  DeviceBuffer<bf16> a(int64_t(M) * K), b(int64_t(K) * N);
  DeviceBuffer<float> d(int64_t(M) * N);
  a.zero();
  b.zero();
  CUDA_CHECK(cudaDeviceSynchronize());
  const size_t before = hone::cuda::gemm_plan_count(gpu());
  hone::cuda::gemm(false, false, M, N, K, 1.f, a.get(), K, b.get(), N, 0.f, d.get(), GemmOut::f32, N, nullptr, gpu());
  BOOST_TEST(hone::cuda::gemm_plan_count(gpu()) == before + 1);
  hone::cuda::gemm(false, false, M, N, K, 1.f, a.get(), K, b.get(), N, 0.f, d.get(), GemmOut::f32, N, nullptr, gpu());
  BOOST_TEST(hone::cuda::gemm_plan_count(gpu()) == before + 1);  // same shape: the cached plan
  hone::cuda::gemm(false, false, M, N - 1, K, 1.f, a.get(), K, b.get(), N, 0.f, d.get(), GemmOut::f32, N, nullptr,
                   gpu());
  BOOST_TEST(hone::cuda::gemm_plan_count(gpu()) == before + 2);
  const auto out = d.download();
  BOOST_TEST(out[0] == 0.f);
}

// gemm_varying (one expert's rows): the row count (and, for a weight gradient, the depth) changes from call to
// call; each call matches gemm on its own sizes, and calls within one power-of-two bucket share a plan.
BOOST_AUTO_TEST_CASE(varying_rows_match_gemm_and_share_a_plan, *boost::unit_test::precondition(test::needs_gpu)) {
  const int N = 96, Kmax = 300, Mmax = 300;
  std::mt19937_64 rng(5);
  std::normal_distribution<float> nd(0.f, 1.f);
  std::vector<float> ha(size_t(Mmax) * Kmax), hb(size_t(Kmax) * N);
  for (auto& v : ha) v = nd(rng);
  for (auto& v : hb) v = nd(rng);
  DeviceBuffer<bf16> a(int64_t(Mmax) * Kmax), b(int64_t(Kmax) * N);
  a.upload(ha);
  b.upload(hb);
  DeviceBuffer<float> d1(int64_t(Mmax) * N), d2(int64_t(Mmax) * N);
  for (const bool weight_grad : {false, true}) {
    // rows: out[M, N] = a[M, K] b[K, N] with M varying; weight gradient: out[K0, N] = a^T b over a varying depth.
    const size_t before = hone::cuda::gemm_plan_count(gpu());
    for (const int n : {1, 7, 64, 65, 100, 127, 128, 200, 300}) {
      const int M = weight_grad ? 40 : n, K = weight_grad ? n : 80;
      const int lda = weight_grad ? 40 : 80;
      d1.zero();
      d2.zero();
      hone::cuda::gemm(weight_grad, false, M, N, K, 1.f, a.get(), lda, b.get(), N, 1.f, d1.get(), GemmOut::f32, N,
                       nullptr, gpu());
      hone::cuda::gemm_varying(weight_grad, false, M, N, K, 1.f, a.get(), lda, b.get(), N, 1.f, d2.get(),
                               GemmOut::f32, N, gpu());
      const auto x = d1.download(), y = d2.download();
      double num = 0, den = 0;
      for (int64_t i = 0; i < int64_t(M) * N; ++i) {
        num += (double(x[size_t(i)]) - y[size_t(i)]) * (double(x[size_t(i)]) - y[size_t(i)]);
        den += double(x[size_t(i)]) * x[size_t(i)];
      }
      BOOST_TEST(std::sqrt(num / std::max(den, 1e-30)) <= 1e-5, "weight_grad=" << weight_grad << " n=" << n);
    }
    // gemm's exact plans: 9 sizes; gemm_varying's: the buckets 64, 128, 256, 512.
    BOOST_TEST(hone::cuda::gemm_plan_count(gpu()) <= before + 9 + 4);
  }
}

BOOST_AUTO_TEST_CASE(bad_shapes_are_refused, *boost::unit_test::precondition(test::needs_gpu)) {
  DeviceBuffer<bf16> a(64), b(64);
  DeviceBuffer<float> d(64);
  // K = 0, a leading dimension below the row length, a bias on an fp32 output.
  BOOST_CHECK_THROW(hone::cuda::gemm(false, false, 2, 2, 0, 1.f, a.get(), 1, b.get(), 2, 0.f, d.get(), GemmOut::f32, 2,
                                     nullptr, gpu()),
                    hone::Error);
  BOOST_CHECK_THROW(hone::cuda::gemm(false, false, 2, 4, 4, 1.f, a.get(), 3, b.get(), 4, 0.f, d.get(), GemmOut::f32, 4,
                                     nullptr, gpu()),
                    hone::Error);
  BOOST_CHECK_THROW(hone::cuda::gemm(false, false, 2, 4, 4, 1.f, a.get(), 4, b.get(), 4, 0.f, d.get(), GemmOut::f32, 4,
                                     a.get(), gpu()),
                    hone::Error);
}

BOOST_AUTO_TEST_SUITE_END()
