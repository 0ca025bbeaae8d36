// GPU op checks of the GRPO policy loss (cuda/policy_loss.cu) against hone::cpu::policy_loss_forward / _backward.
// Shapes {sequences, longest sequence, variant}: random lengths from 1 to the longest, a masked prompt at the start
// of each sequence and some sequences masked entirely; the variant picks the loss options (below), so clip-higher,
// dual clip, the three KL estimators with their clamps, every importance-sampling mode, both aggregations, the
// entropy term and the exactly on-policy case (old is new) all run.
// Tolerance 1e-6 (relative L2): both twins take the same fp32 inputs and compute every term in double, so they
// differ by the order of the sums (~1e-15) and the fp32 rounding of the gradients (one ulp, ~6e-8); a wrong branch,
// index or scale is O(1). Forward compares each statistic of the block on its own (counts, sums, ratio min/max);
// backward accumulates into random dnew_lp / dentropy and compares the totals.
#if HONE_CUDA
#include <algorithm>
#include <cmath>

#include "check_common.h"
#include "device_buffer.h"
#include "op_checks.h"
#include "ops/ops.h"

namespace {

using hone::ImportanceSampling;
using hone::KlType;
using hone::LossAggregation;

struct Variant {
  hone::PolicyLossConfig c;
  bool ref, entropy, on_policy;
};

Variant variant(int v) {
  Variant x{{}, false, false, false};
  hone::PolicyLossConfig& c = x.c;
  switch (v) {
    case 0: break;  // defaults: symmetric clip 0.2, token, no IS, no KL, no entropy
    case 1:         // clip-higher, dual clip, truncated IS, k3, entropy bonus
      c.ratio_clip_max = 0.28, c.ratio_clip_c = 3, c.importance_sampling = ImportanceSampling::tis;
      c.is_threshold_high = 1.5, c.kl_coef = 0.1, c.kl_type = KlType::k3, c.entropy_coef = 0.01;
      x.ref = x.entropy = true;
      break;
    case 2:  // sequence aggregation, icepop, k1 with an input clamp, a negative entropy coefficient
      c.aggregation = LossAggregation::sequence, c.importance_sampling = ImportanceSampling::icepop;
      c.is_threshold_low = 0.6, c.is_threshold_high = 1.6, c.kl_coef = 0.05, c.kl_type = KlType::k1;
      c.kl_input_clamp = 0.3, c.entropy_coef = -0.02;
      x.ref = x.entropy = true;
      break;
    case 3:  // sequence aggregation, seq_mask, k2 with an output clamp, dual clip
      c.aggregation = LossAggregation::sequence, c.importance_sampling = ImportanceSampling::seq_mask;
      c.is_threshold_low = 0.7, c.is_threshold_high = 1.4, c.kl_coef = 0.2, c.kl_type = KlType::k2;
      c.kl_output_clamp = 0.05, c.ratio_clip_c = 2;
      x.ref = true;
      break;
    case 4:  // exactly on-policy (old is new), k3 with both clamps, entropy bonus
      c.kl_coef = 0.1, c.kl_input_clamp = 0.5, c.kl_output_clamp = 0.1, c.entropy_coef = 0.01;
      x.ref = x.entropy = x.on_policy = true;
      break;
    default:  // seq_mask without KL; the entropy given with coefficient 0 (its sum only)
      c.importance_sampling = ImportanceSampling::seq_mask, c.is_threshold_low = 0.8, c.is_threshold_high = 1.25;
      x.entropy = true;
      break;
  }
  return x;
}

// One random micro-batch on the host and on the device.
struct Problem {
  Variant v;
  int T = 0, S = 0;
  double denominator = 0;
  std::vector<float> now, old, gen, ref, ent, adv;
  std::vector<uint8_t> mask;
  std::vector<int64_t> offsets{0};
  test::DeviceBuffer<float> d_now, d_old, d_gen, d_ref, d_ent, d_adv;
  test::DeviceBuffer<uint8_t> d_mask;
  test::DeviceBuffer<int64_t> d_offsets;

  Problem(const test::OpShape& s, std::mt19937_64& rng) : Problem(s, rng, draw(s, rng)) {}

  // Device pointers as the op takes them (old is new on-policy; null ref / entropy when the variant has none).
  const float* old_ptr() const { return v.on_policy ? d_now.get() : d_old.get(); }
  const float* ref_ptr() const { return v.ref ? d_ref.get() : nullptr; }
  const float* ent_ptr() const { return v.entropy ? d_ent.get() : nullptr; }
  const float* cpu_old() const { return v.on_policy ? now.data() : old.data(); }
  const float* cpu_ref() const { return v.ref ? ref.data() : nullptr; }
  const float* cpu_ent() const { return v.entropy ? ent.data() : nullptr; }

 private:
  struct Host {
    std::vector<float> now, old, gen, ref, ent, adv;
    std::vector<uint8_t> mask;
    std::vector<int64_t> offsets;
  };

  static Host draw(const test::OpShape& s, std::mt19937_64& rng) {
    Host h;
    h.offsets = {0};
    std::uniform_int_distribution<int> len(1, int(s[1]));
    std::uniform_real_distribution<float> u01(0.f, 1.f);
    std::normal_distribution<float> nd(0.f, 1.f);
    for (int q = 0; q < int(s[0]); ++q) {
      const int n = len(rng), prompt = int(float(n) * 0.3f * u01(rng));
      const bool trained = q == 0 || u01(rng) > 0.1f;  // some sequences are masked entirely, never the first
      const float bias = 0.5f * (2.f * u01(rng) - 1.f);  // per-sequence generation mismatch: seq_mask masks some
      for (int t = 0; t < n; ++t) {
        const float o = -5.f * u01(rng) - 0.01f;
        h.old.push_back(o);
        h.now.push_back(o + 0.3f * nd(rng));
        h.gen.push_back(o - bias + 0.1f * nd(rng));
        h.ref.push_back(h.now.back() + 0.5f * nd(rng));
        h.ent.push_back(4.f * u01(rng));
        h.mask.push_back(trained && (t >= prompt || t == n - 1) ? 1 : 0);
      }
      h.adv.push_back(nd(rng));
      h.offsets.push_back(int64_t(h.now.size()));
    }
    return h;
  }

  Problem(const test::OpShape& s, std::mt19937_64&, Host h)
      : v(variant(int(s[2]))), T(int(h.now.size())), S(int(s[0])), now(std::move(h.now)), old(std::move(h.old)),
        gen(std::move(h.gen)), ref(std::move(h.ref)), ent(std::move(h.ent)), adv(std::move(h.adv)),
        mask(std::move(h.mask)), offsets(std::move(h.offsets)), d_now(T), d_old(T), d_gen(T), d_ref(T), d_ent(T),
        d_adv(S), d_mask(T), d_offsets(S + 1) {
    int64_t valid = 0;
    for (uint8_t m : mask) valid += m;
    // A global denominator larger than this micro-batch's share (other micro-batches and ranks).
    denominator = double(v.c.aggregation == LossAggregation::token ? valid : S) + 7.0;
    d_now.upload(now);
    d_old.upload(old);
    d_gen.upload(gen);
    d_ref.upload(ref);
    d_ent.upload(ent);
    d_adv.upload(adv);
    d_mask.upload_raw(mask);
    d_offsets.upload_raw(offsets);
  }
};

double check_forward(const test::OpShape& s, std::mt19937_64& rng) {
  const Problem p(s, rng);
  constexpr int K = hone::PolicyLossStat::count;
  test::DeviceBuffer<double> d_stats(K);
  d_stats.poison();
  test::inputs_ready();
  hone::cuda::policy_loss_forward(d_stats.get(), p.d_now.get(), p.old_ptr(), p.d_gen.get(), p.ref_ptr(), p.ent_ptr(),
                                  p.d_mask.get(), p.d_offsets.get(), p.d_adv.get(), p.T, p.S, p.v.c, p.denominator,
                                  test::check_context());
  std::vector<double> got(K);
  CUDA_CHECK(cudaDeviceSynchronize());
  CUDA_CHECK(cudaMemcpy(got.data(), d_stats.get(), K * sizeof(double), cudaMemcpyDeviceToHost));
  std::vector<double> want(K);
  hone::cpu::policy_loss_forward(want.data(), p.now.data(), p.cpu_old(), p.gen.data(), p.cpu_ref(), p.cpu_ent(),
                                 p.mask.data(), p.offsets.data(), p.adv.data(), p.T, p.S, p.v.c, p.denominator);
  // Each statistic on its own scale (every one is finite: the first sequence always has a valid token).
  double e = 0;
  for (int k = 0; k < K; ++k) {
    const float g = float(got[size_t(k)]), w = float(want[size_t(k)]);
    e = test::worst(e, test::rel_l2(&g, &w, 1));
  }
  return e;
}

double rms(const std::vector<float>& v) {
  double s = 0;
  for (float x : v) s += double(x) * x;
  return v.empty() ? 0.0 : std::sqrt(s / double(v.size()));
}

double check_backward(const test::OpShape& s, std::mt19937_64& rng) {
  const Problem p(s, rng);
  const bool with_dent = p.v.c.entropy_coef != 0;
  // The increments alone, to size the accumulators' starting values like them.
  std::vector<float> inc(size_t(p.T), 0.f), inc_e(size_t(p.T), 0.f);
  hone::cpu::policy_loss_backward(inc.data(), inc_e.data(), p.now.data(), p.cpu_old(), p.gen.data(), p.cpu_ref(),
                                  p.mask.data(), p.offsets.data(), p.adv.data(), p.T, p.S, p.v.c, p.denominator);
  std::vector<float> dnew = test::random_vector(p.T, rng, float(std::max(rms(inc), 1e-6)));
  std::vector<float> dent = test::random_vector(p.T, rng, float(std::max(rms(inc_e), 1e-6)));
  test::DeviceBuffer<float> d_dnew(p.T), d_dent(p.T);
  d_dnew.upload(dnew);
  d_dent.upload(dent);
  test::inputs_ready();
  hone::cuda::policy_loss_backward(d_dnew.get(), with_dent ? d_dent.get() : nullptr, p.d_now.get(), p.old_ptr(),
                                   p.d_gen.get(), p.ref_ptr(), p.d_mask.get(), p.d_offsets.get(), p.d_adv.get(), p.T,
                                   p.S, p.v.c, p.denominator, test::check_context());
  const std::vector<float> got = d_dnew.download(), got_e = d_dent.download();
  hone::cpu::policy_loss_backward(dnew.data(), with_dent ? dent.data() : nullptr, p.now.data(), p.cpu_old(),
                                  p.gen.data(), p.cpu_ref(), p.mask.data(), p.offsets.data(), p.adv.data(), p.T, p.S,
                                  p.v.c, p.denominator);
  return test::worst(test::rel_l2(got, dnew), test::rel_l2(got_e, dent));
}

// {sequences, longest sequence, variant}: one token; a few short sequences; many sequences of a micro-batch;
// sequences longer than a block (256 threads) and a few thousand tokens long; every variant at least twice.
const std::vector<test::OpShape> kShapes = {
    {1, 1, 0},    {3, 7, 1},      {17, 64, 2},    {64, 300, 3},  {200, 40, 4},   {5, 2000, 5},
    {1, 4000, 1}, {300, 100, 0},  {8, 5000, 2},   {40, 700, 3},  {1000, 12, 4},  {33, 513, 5},
};

const test::OpCheckRegistration reg_fwd{{"policy_loss_forward", 1e-6, kShapes, &check_forward}};
const test::OpCheckRegistration reg_bwd{{"policy_loss_backward", 1e-6, kShapes, &check_backward}};

}  // namespace
#endif  // HONE_CUDA
