// RoPE: inverse frequencies against numbers computed by torch/transformers, the rotation against a double
// reference with positions that restart in each packed sequence, and the backward (the transposed rotation).
#include <boost/test/unit_test.hpp>

#include <cmath>

#include "common/finite_diff.h"
#include "ops/ops.h"

using namespace hone;

BOOST_AUTO_TEST_SUITE(ops_rope)

// Fails when any value is more than one fp32 ulp (relative 1.2e-7) from the reference.
static void check_inv_freq(const RopeParams& p, const std::vector<float>& ref, const char* what) {
  std::vector<float> got = test::nan_floats(test::len(p.head_dim / 2));
  cpu::rope_inv_freq(got.data(), p);
  BOOST_REQUIRE(got.size() == ref.size());
  std::vector<double> want(ref.begin(), ref.end());
  const std::string m = test::mismatch(what, got.data(), want.data(), want.size(), 0.0, 1.2e-7);
  BOOST_TEST(m.empty(), m);
}

// Reference: torch 2.15, `1.0 / (1e6 ** (torch.arange(0, 128, 2, dtype=torch.int64).float() / 128))` (Qwen3).
BOOST_AUTO_TEST_CASE(default_inv_freq_matches_torch) {
  const std::vector<float> ref = {
      1.f, 0.805842221f, 0.649381638f, 0.523299158f, 0.421696514f, 0.339820832f, 0.273841977f, 0.220673397f,
      0.177827939f, 0.143301263f, 0.115478203f, 0.0930572003f, 0.0749894157f, 0.0604296438f, 0.0486967526f,
      0.0392418988f, 0.0316227786f, 0.0254829675f, 0.0205352511f, 0.0165481716f, 0.0133352149f, 0.0107460786f,
      0.00865964312f, 0.00697830599f, 0.00562341325f, 0.00453158375f, 0.00365174143f, 0.00294272718f,
      0.00237137382f, 0.00191095285f, 0.00153992651f, 0.00124093785f, 0.00100000005f, 0.000805842225f,
      0.000649381662f, 0.000523299095f, 0.000421696488f, 0.000339820836f, 0.000273841957f, 0.000220673421f,
      0.00017782794f, 0.000143301266f, 0.000115478193f, 9.3057206e-05f, 7.49894243e-05f, 6.04296365e-05f,
      4.86967547e-05f, 3.92418988e-05f, 3.16227743e-05f, 2.54829665e-05f, 2.05352499e-05f, 1.65481706e-05f,
      1.33352141e-05f, 1.07460783e-05f, 8.65964375e-06f, 6.97830637e-06f, 5.62341347e-06f, 4.53158373e-06f,
      3.65174128e-06f, 2.94272718e-06f, 2.37137374e-06f, 1.91095296e-06f, 1.53992653e-06f, 1.24093776e-06f};
  RopeParams p;
  p.head_dim = 128;
  p.theta = 1e6f;
  check_inv_freq(p, ref, "default inv_freq, D=128, theta=1e6");
}

// Reference: transformers 5.23 / torch 2.15, ROPE_INIT_FUNCTIONS["llama3"](LlamaConfig(head_dim=..., rope_theta=...,
// rope_scaling={"rope_type": "llama3", ...}), "cpu")[0], printed with %.9g.
BOOST_AUTO_TEST_CASE(llama3_inv_freq_matches_transformers) {
  RopeParams p;
  p.llama3 = true;
  p.head_dim = 128;  // Llama 3.1 8B: theta 500000, factor 8, low 1, high 4, original 8192
  p.theta = 500000.f;
  p.factor = 8.f;
  p.low_freq_factor = 1.f;
  p.high_freq_factor = 4.f;
  p.original_max_position_embeddings = 8192;
  check_inv_freq(p,
                 {1.f, 0.814617217f, 0.663601279f, 0.540580988f, 0.440366626f, 0.358730227f, 0.292227834f,
                  0.238053814f, 0.193922758f, 0.157972813f, 0.128687382f, 0.10483095f, 0.0853971019f, 0.0695659518f,
                  0.0566696189f, 0.0461640507f, 0.0376060307f, 0.0306345206f, 0.0249554086f, 0.0203291047f,
                  0.0165604409f, 0.0134904198f, 0.0109895291f, 0.00895225909f, 0.00729266508f, 0.00594073068f,
                  0.00483942125f, 0.00394227589f, 0.00321144611f, 0.00216657063f, 0.00137189368f, 0.00085675146f,
                  0.000524846022f, 0.00031269365f, 0.000178507791f, 9.55621217e-05f, 7.78465546e-05f,
                  6.34151438e-05f, 5.16590699e-05f, 4.20823671e-05f, 3.42810235e-05f, 2.79259093e-05f,
                  2.2748929e-05f, 1.85316694e-05f, 1.50962178e-05f, 1.22976389e-05f, 1.00178686e-05f, 8.1607277e-06f,
                  6.64786967e-06f, 5.41546933e-06f, 4.41153452e-06f, 3.59371188e-06f, 2.92749974e-06f,
                  2.38479174e-06f, 1.94269251e-06f, 1.58255079e-06f, 1.28917316e-06f, 1.05018262e-06f,
                  8.55496921e-07f, 6.96902532e-07f, 5.6770881e-07f, 4.6246538e-07f, 3.7673226e-07f, 3.06892588e-07f},
                 "llama3 inv_freq, Llama 3.1 8B");
  // Small heads with two smoothly interpolated (medium) frequencies: theta 1e4, factor 4, low 1, high 8, orig 2048.
  p.head_dim = 16;
  p.theta = 10000.f;
  p.factor = 4.f;
  p.low_freq_factor = 1.f;
  p.high_freq_factor = 8.f;
  p.original_max_position_embeddings = 2048;
  check_inv_freq(p,
                 {1.f, 0.316227764f, 0.100000001f, 0.0316227786f, 0.00492088543f, 0.000800985435f, 0.000250000012f,
                  7.90569466e-05f},
                 "llama3 inv_freq, D=16 factor 4 low 1 high 8");
  // Factors that are not powers of two: factor 3, low 1.5, high 4, orig 1024.
  p.factor = 3.f;
  p.low_freq_factor = 1.5f;
  p.high_freq_factor = 4.f;
  p.original_max_position_embeddings = 1024;
  check_inv_freq(p,
                 {1.f, 0.316227764f, 0.100000001f, 0.0316227786f, 0.00367932417f, 0.00105409266f, 0.000333333359f,
                  0.000105409265f},
                 "llama3 inv_freq, D=16 factor 3 low 1.5 high 4");
}

BOOST_AUTO_TEST_CASE(rope_rotates_pairs_by_position_and_backward_is_the_transpose) {
  const int T = 6, H = 3, D = 8, half = D / 2;
  const std::vector<int32_t> pos = {0, 1, 2, 0, 1, 5};  // two packed sequences: positions restart at 0
  RopeParams p;
  p.head_dim = D;
  std::vector<float> inv(test::len(half));
  cpu::rope_inv_freq(inv.data(), p);
  auto x = test::random_floats(test::len(T * H * D), 1);
  auto out = test::nan_floats(x.size());
  cpu::rope_forward(out.data(), x.data(), pos.data(), inv.data(), T, H, D);
  std::vector<double> want(x.size());
  for (int t = 0; t < T; ++t)
    for (int h = 0; h < H; ++h)
      for (int i = 0; i < half; ++i) {
        const size_t b = test::len((t * H + h) * D);
        const double a = double(pos[test::len(t)]) * inv[test::len(i)], c = std::cos(a), s = std::sin(a);
        want[b + test::len(i)] = x[b + test::len(i)] * c - x[b + test::len(i + half)] * s;
        want[b + test::len(i + half)] = x[b + test::len(i + half)] * c + x[b + test::len(i)] * s;
      }
  std::string m = test::mismatch("rope out", out.data(), want.data(), want.size(), 1e-6, 1e-6);
  BOOST_TEST(m.empty(), m);
  for (size_t i = 0; i < test::len(H * D); ++i) BOOST_TEST(out[i] == x[i]);  // position 0 is the identity

  auto inplace = x;
  cpu::rope_forward(inplace.data(), inplace.data(), pos.data(), inv.data(), T, H, D);
  BOOST_TEST(inplace == out);

  auto r = test::random_floats(x.size(), 2);
  auto loss = [&] {
    std::vector<float> o(x.size());
    cpu::rope_forward(o.data(), x.data(), pos.data(), inv.data(), T, H, D);
    return test::weighted_sum(o.data(), r.data(), o.size());
  };
  const auto num = test::numerical_gradient(x.data(), x.size(), loss, 1e-2f);
  auto dx = test::random_floats(x.size(), 3);
  const auto dx0 = dx;
  cpu::rope_backward(dx.data(), r.data(), pos.data(), inv.data(), T, H, D);
  m = test::gradient_mismatch("rope dx", test::added(dx, dx0), num, 1e-4);
  BOOST_TEST(m.empty(), m);
  auto dx_w = test::nan_floats(x.size());  // written, not accumulated: NaN is overwritten
  cpu::rope_backward(dx_w.data(), r.data(), pos.data(), inv.data(), T, H, D, false);
  m = test::gradient_mismatch("rope dx written", std::vector<double>(dx_w.begin(), dx_w.end()), num, 1e-4);
  BOOST_TEST(m.empty(), m);
}

BOOST_AUTO_TEST_SUITE_END()
