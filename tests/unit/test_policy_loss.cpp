// The GRPO policy loss: hand-computed clip-higher, dual clip, KL estimators and clamps, importance-sampling masks
// and metrics; the analytic gradient against central finite differences for every option combination; and
// micro-batches adding up exactly to the one-shot loss with the global denominator; the op's conventions (gradients
// accumulated, old given as the new array on-policy, the entropy sum).
#include <boost/test/unit_test.hpp>

#include <algorithm>
#include <cmath>
#include <ostream>
#include <vector>

#include "ops/ops.h"
#include "ops/philox.h"
#include "rl/policy_loss.h"
#include "runtime/error.h"

namespace hone {
std::ostream& operator<<(std::ostream& os, KlType t) { return os << kl_type_name(t); }
std::ostream& operator<<(std::ostream& os, LossAggregation a) { return os << loss_aggregation_name(a); }
std::ostream& operator<<(std::ostream& os, ImportanceSampling m) { return os << importance_sampling_name(m); }
}  // namespace hone

namespace tt = boost::test_tools;
using hone::ImportanceSampling;
using hone::KlType;
using hone::LossAggregation;

namespace {

// Owned inputs of one micro-batch, in double.
struct Data {
  std::vector<double> now, old, gen, ref, ent, adv;
  std::vector<uint8_t> mask;
  std::vector<int64_t> offsets{0};

  void add_token(double n, double o, double g, double r, double e, uint8_t m) {
    now.push_back(n), old.push_back(o), gen.push_back(g), ref.push_back(r), ent.push_back(e), mask.push_back(m);
  }
  void end_sequence(double a) {
    adv.push_back(a);
    offsets.push_back(static_cast<int64_t>(now.size()));
  }
  hone::PolicyLossBatch<double> batch() const {
    return {now, old, gen, ref, ent, mask, offsets, adv};
  }
  size_t size() const { return now.size(); }
};

struct Result {
  hone::PolicyLossMetrics m;
  std::vector<double> dnew, dent;
};

Result run(const hone::PolicyLossConfig& c, const Data& d, double denominator) {
  Result r;
  r.dnew.assign(d.size(), -7.0);  // overwritten everywhere, masked tokens included
  r.dent.assign(d.size(), -7.0);
  r.m = hone::policy_loss<double>(c, d.batch(), denominator, r.dnew, r.dent);
  return r;
}

double denominator(const hone::PolicyLossConfig& c, const Data& d) {
  return static_cast<double>(hone::loss_denominator(c.aggregation, d.mask, d.offsets));
}

// Deterministic uniforms from Philox.
struct Draws {
  uint32_t seed, n = 0;
  double next(double lo, double hi) { return lo + (hi - lo) * hone::philox_uniform(seed, 0, 0, n++, 3); }
};

double kl_value(const hone::PolicyLossConfig& c, double x) {
  if (c.kl_input_clamp > 0) x = std::clamp(x, -c.kl_input_clamp, c.kl_input_clamp);
  return c.kl_type == KlType::k1 ? -x : c.kl_type == KlType::k2 ? 0.5 * x * x : std::exp(x) - 1 - x;
}

// Random batch of 6 sequences (the fourth entirely masked), two prompt tokens (mask 0) each; new logprobs kept
// 0.01 away from every kink of the loss so central differences are valid.
Data random_batch(const hone::PolicyLossConfig& c, uint32_t seed) {
  Draws r{seed};
  Data d;
  const double lo = std::log(1 - c.ratio_clip_min), hi = std::log(1 + c.ratio_clip_max);
  for (int s = 0; s < 6; ++s) {
    const int len = 4 + static_cast<int>(r.next(0, 8));
    const double bias = r.next(-0.8, 0.8);  // per-sequence generation mismatch, so seq_mask masks some sequences
    for (int t = 0; t < len; ++t) {
      const double old = r.next(-4, -0.05);
      const double gen = old - bias + r.next(-0.3, 0.3);
      const double ref = old + r.next(-0.7, 0.7);
      double now = 0;
      for (;;) {
        const double delta = r.next(-1.5, 1.5);
        now = old + delta;
        bool near = std::fabs(delta - lo) < 0.01 || std::fabs(delta - hi) < 0.01;
        if (c.ratio_clip_c > 0) near |= std::fabs(delta - std::log(c.ratio_clip_c)) < 0.01;
        if (c.kl_input_clamp > 0) near |= std::fabs(std::fabs(ref - now) - c.kl_input_clamp) < 0.01;
        if (c.kl_output_clamp > 0) near |= std::fabs(std::fabs(kl_value(c, ref - now)) - c.kl_output_clamp) < 0.01;
        if (!near) break;
      }
      d.add_token(now, old, gen, ref, r.next(0, 3), s == 3 ? 0 : t >= 2);
    }
    d.end_sequence(r.next(-2, 2));
  }
  return d;
}

// A one-token sequence with A and ratio r (old = -1, gen = old, no reference).
Data one_token(double adv, double ratio) {
  Data d;
  d.add_token(-1.0 + std::log(ratio), -1.0, -1.0, -1.0, 0.0, 1);
  d.end_sequence(adv);
  return d;
}

}  // namespace

BOOST_AUTO_TEST_SUITE(policy_loss)

// Clip-higher: the ratio is clipped to [0.8, 1.28]; the gradient is 0 exactly where the clipped branch is taken.
BOOST_AUTO_TEST_CASE(clip_higher_is_asymmetric) {
  hone::PolicyLossConfig c;
  c.ratio_clip_min = 0.2, c.ratio_clip_max = 0.28;
  struct Case {
    double adv, ratio, loss, grad;
    bool clipped;
  };
  const std::vector<Case> cases = {
      {1, 1.25, -1.25, -1.25, false},  // inside the upper bound 1.28 (a symmetric 0.2 clip would cut here)
      {1, 1.30, -1.28, 0.0, true},     // above it: clipped
      {1, 0.50, -0.50, -0.50, false},  // A > 0 and ratio low: never clipped
      {-1, 0.85, 0.85, 0.85, false},   // inside the lower bound 0.8
      {-1, 0.75, 0.80, 0.0, true},     // below it: clipped
      {-1, 1.50, 1.50, 1.50, false},   // A < 0 and ratio high: never clipped (without dual clip)
  };
  for (const Case& k : cases) {
    const Result r = run(c, one_token(k.adv, k.ratio), 1.0);
    BOOST_TEST(r.m.loss == k.loss, tt::tolerance(1e-12));
    BOOST_TEST(r.dnew[0] == k.grad, tt::tolerance(1e-12));
    BOOST_TEST(r.m.clipped_tokens == (k.clipped ? 1 : 0));
  }
}

// Dual clip c = 1.4 bounds the loss of a negative-advantage token at -c A = 1.4.
BOOST_AUTO_TEST_CASE(dual_clip_bounds_negative_advantages) {
  hone::PolicyLossConfig c;
  c.ratio_clip_c = 1.4;
  Result r = run(c, one_token(-1, 1.5), 1.0);
  BOOST_TEST(r.m.loss == 1.4, tt::tolerance(1e-12));
  BOOST_TEST(r.dnew[0] == 0.0);
  BOOST_TEST(r.m.dual_clipped_tokens == 1);
  BOOST_TEST(r.m.clipped_tokens == 1);
  r = run(c, one_token(-1, 1.35), 1.0);
  BOOST_TEST(r.m.loss == 1.35, tt::tolerance(1e-12));
  BOOST_TEST(r.dnew[0] == 1.35, tt::tolerance(1e-12));
  BOOST_TEST(r.m.dual_clipped_tokens == 0);
  r = run(c, one_token(2, 3.0), 1.0);  // positive advantages are untouched by the dual clip
  BOOST_TEST(r.m.loss == -2 * 1.2, tt::tolerance(1e-12));
  BOOST_TEST(r.m.dual_clipped_tokens == 0);
}

// new = -1, ref = -1.5: x = ref - new = -0.5.
BOOST_AUTO_TEST_CASE(kl_estimators_and_clamps_by_hand) {
  Data d;
  d.add_token(-1.0, -1.0, -1.0, -1.5, 0.0, 1);
  d.end_sequence(0.0);  // A = 0: only the KL term remains
  hone::PolicyLossConfig c;
  c.kl_coef = 0.5;
  struct Case {
    KlType type;
    double in_clamp, out_clamp, kl, dkl;
  };
  const double e5 = std::exp(-0.5), e3 = std::exp(-0.3);
  const std::vector<Case> cases = {
      {KlType::k1, 0, 0, 0.5, 1.0},
      {KlType::k2, 0, 0, 0.125, 0.5},
      {KlType::k3, 0, 0, e5 - 0.5, 1 - e5},
      {KlType::k1, 0.3, 0, 0.3, 0.0},  // input clamped to -0.3: constant
      {KlType::k3, 0.3, 0, e3 - 0.7, 0.0},
      {KlType::k2, 0, 0.1, 0.1, 0.0},  // output 0.125 clamped to 0.1
      {KlType::k3, 0, 0.2, e5 - 0.5, 1 - e5},  // 0.1065 is inside the output clamp
  };
  for (const Case& k : cases) {
    c.kl_type = k.type, c.kl_input_clamp = k.in_clamp, c.kl_output_clamp = k.out_clamp;
    const Result r = run(c, d, 1.0);
    BOOST_TEST(r.m.kl_sum == k.kl, tt::tolerance(1e-12));
    BOOST_TEST(r.m.kl_mean() == k.kl, tt::tolerance(1e-12));
    BOOST_TEST(r.m.loss == 0.5 * k.kl, tt::tolerance(1e-12));
    BOOST_TEST(r.dnew[0] == 0.5 * k.dkl, tt::tolerance(1e-12));
  }
  // k1 can be negative; the output clamp is symmetric: x = +0.5 gives k1 = -0.5, clamped to -0.2.
  Data neg;
  neg.add_token(-1.0, -1.0, -1.0, -0.5, 0.0, 1);
  neg.end_sequence(0.0);
  c.kl_type = KlType::k1, c.kl_input_clamp = 0, c.kl_output_clamp = 0.2;
  BOOST_TEST(run(c, neg, 1.0).m.kl_sum == -0.2, tt::tolerance(1e-12));
  // Without a reference and kl_coef = 0 there is no KL at all.
  neg.ref.clear();
  c.kl_coef = 0;
  BOOST_TEST(run(c, neg, 1.0).m.kl_sum == 0.0);
  c.kl_coef = 0.1;
  std::vector<double> g(1), e;
  BOOST_CHECK_THROW(hone::policy_loss<double>(c, neg.batch(), 1.0, g, e), hone::Error);
}

// Five tokens with log w = old - gen = 0, 0.5, -0.5, 1.2, -1.2 (sequence 1: first three, sequence 2: last two),
// A = 1 and ratio 1, thresholds [0.5, 2] (log: -0.693, 0.693).
BOOST_AUTO_TEST_CASE(importance_sampling_weights_and_masks) {
  Data d;
  const std::vector<double> logw = {0, 0.5, -0.5, 1.2, -1.2};
  for (size_t t = 0; t < logw.size(); ++t) {
    d.add_token(-1.0, -1.0, -1.0 - logw[t], -1.0, 0.0, 1);
    if (t == 2) d.end_sequence(1.0);
  }
  d.end_sequence(1.0);
  hone::PolicyLossConfig c;
  c.is_threshold_low = 0.5, c.is_threshold_high = 2.0;
  auto grads = [&](ImportanceSampling m) {
    c.importance_sampling = m;
    return run(c, d, 1.0);
  };
  // Gradient of -A r w at r = 1 is -w.
  Result r = grads(ImportanceSampling::none);
  for (double g : r.dnew) BOOST_TEST(g == -1.0);
  r = grads(ImportanceSampling::tis);
  const std::vector<double> tis = {-1, -std::exp(0.5), -std::exp(-0.5), -2.0, -std::exp(-1.2)};
  BOOST_TEST(r.dnew == tis, tt::tolerance(1e-12) << tt::per_element());
  BOOST_TEST(r.m.is_masked_tokens == 0);
  r = grads(ImportanceSampling::icepop);
  const std::vector<double> ice = {-1, -std::exp(0.5), -std::exp(-0.5), 0.0, 0.0};
  BOOST_TEST(r.dnew == ice, tt::tolerance(1e-12) << tt::per_element());
  BOOST_TEST(r.m.is_masked_tokens == 2);
  BOOST_TEST(r.m.is_weight_mean() == (1 + std::exp(0.5) + std::exp(-0.5)) / 5, tt::tolerance(1e-12));
  // seq_mask: sequence 1's mean log w is 0 (kept, weight 1); sequence 2's is 0 too ((1.2 - 1.2) / 2): kept.
  r = grads(ImportanceSampling::seq_mask);
  for (double g : r.dnew) BOOST_TEST(g == -1.0);
  BOOST_TEST(r.m.is_masked_seqs == 0);
  // Shift sequence 2 so its mean log w is 0.9 > log 2: all of its tokens are masked, sequence 1 untouched.
  d.gen[3] -= 0.9, d.gen[4] -= 0.9;
  r = grads(ImportanceSampling::seq_mask);
  const std::vector<double> seq = {-1, -1, -1, 0, 0};
  BOOST_TEST(r.dnew == seq, tt::per_element());
  BOOST_TEST(r.m.is_masked_seqs == 1);
  BOOST_TEST(r.m.is_masked_tokens == 2);
  // ... but the KL term still trains masked tokens (the masks apply to the policy-gradient term only).
  d.ref[3] = -1.5;
  c.kl_coef = 1.0, c.kl_type = KlType::k1;
  r = grads(ImportanceSampling::seq_mask);
  BOOST_TEST(r.dnew[3] == 1.0);
}

BOOST_AUTO_TEST_CASE(metrics_by_hand) {
  Data d;  // ratios 1.1, 0.5, 2.0 (A = 1, clip 0.2: the last is clipped); |gen - old| = 0.1, 0.2, 0
  d.add_token(-1 + std::log(1.1), -1, -1.1, -1, 0, 1);
  d.add_token(-2 + std::log(0.5), -2, -1.8, -2, 0, 1);
  d.add_token(9, 9, 9, 9, 0, 0);  // masked: ignored by every metric
  d.add_token(-3 + std::log(2.0), -3, -3, -3, 0, 1);
  d.end_sequence(1.0);
  const Result r = run(hone::PolicyLossConfig{}, d, 3.0);
  BOOST_TEST(r.m.valid_tokens == 3);
  BOOST_TEST(r.m.clip_fraction() == 1.0 / 3, tt::tolerance(1e-12));
  BOOST_TEST(r.m.ratio_min == 0.5, tt::tolerance(1e-12));
  BOOST_TEST(r.m.ratio_max == 2.0, tt::tolerance(1e-12));
  BOOST_TEST(r.m.ratio_mean() == 3.6 / 3, tt::tolerance(1e-12));
  BOOST_TEST(r.m.token_mult_prob_error() == (std::exp(0.1) + std::exp(0.2) + 1) / 3, tt::tolerance(1e-12));
  BOOST_TEST(r.m.loss == -(1.1 + 0.5 + 1.2) / 3, tt::tolerance(1e-12));
  BOOST_TEST(r.dnew[2] == 0.0);
}

// Token vs sequence aggregation on two sequences of 1 and 3 tokens with per-token losses -A r = -1 each.
BOOST_AUTO_TEST_CASE(token_and_sequence_aggregation_by_hand) {
  Data d;
  d.add_token(-1, -1, -1, -1, 0, 1);
  d.end_sequence(1.0);
  for (int i = 0; i < 3; ++i) d.add_token(-1, -1, -1, -1, 0, 1);
  d.end_sequence(1.0);
  hone::PolicyLossConfig c;
  BOOST_TEST(denominator(c, d) == 4.0);
  Result r = run(c, d, 4.0);
  BOOST_TEST(r.m.loss == -1.0, tt::tolerance(1e-12));
  BOOST_TEST(r.dnew[0] == -0.25, tt::tolerance(1e-12));
  c.aggregation = LossAggregation::sequence;
  BOOST_TEST(denominator(c, d) == 2.0);
  r = run(c, d, 2.0);
  BOOST_TEST(r.m.loss == -1.0, tt::tolerance(1e-12));
  BOOST_TEST(r.dnew[0] == -0.5, tt::tolerance(1e-12));       // 1 / (1 token * 2 sequences)
  BOOST_TEST(r.dnew[1] == -1.0 / 6, tt::tolerance(1e-12));   // 1 / (3 tokens * 2 sequences)
}

// The analytic gradient with respect to every new logprob and entropy matches central differences (h = 1e-6) for
// every combination of aggregation, importance sampling, KL type, clamps, dual clip and entropy bonus.
BOOST_AUTO_TEST_CASE(gradient_matches_finite_differences_for_every_mode) {
  int combos = 0;
  int64_t clipped = 0, dual = 0, masked = 0;
  for (LossAggregation agg : {LossAggregation::token, LossAggregation::sequence})
    for (ImportanceSampling is : {ImportanceSampling::none, ImportanceSampling::tis, ImportanceSampling::icepop,
                                  ImportanceSampling::seq_mask})
      for (KlType kl : {KlType::k1, KlType::k2, KlType::k3})
        for (int clamps = 0; clamps < 2; ++clamps)
          for (int dual_clip = 0; dual_clip < 2; ++dual_clip)
            for (double entropy_coef : {0.0, 0.01}) {
              hone::PolicyLossConfig c;
              c.aggregation = agg, c.importance_sampling = is, c.kl_type = kl;
              c.ratio_clip_min = 0.2, c.ratio_clip_max = 0.28, c.kl_coef = 0.05, c.entropy_coef = entropy_coef;
              c.is_threshold_low = 0.6, c.is_threshold_high = 1.6;
              if (clamps) c.kl_input_clamp = 0.8, c.kl_output_clamp = 0.3;
              if (dual_clip) c.ratio_clip_c = 2.0;
              Data d = random_batch(c, static_cast<uint32_t>(combos));
              const double den = denominator(c, d);
              const Result r = run(c, d, den);
              clipped += r.m.clipped_tokens, dual += r.m.dual_clipped_tokens, masked += r.m.is_masked_tokens;
              const double h = 1e-6;
              for (size_t t = 0; t < d.size(); ++t) {
                const double keep = d.now[t];
                d.now[t] = keep + h;
                const double up = run(c, d, den).m.loss;
                d.now[t] = keep - h;
                const double down = run(c, d, den).m.loss;
                d.now[t] = keep;
                const double fd = (up - down) / (2 * h);
                BOOST_TEST(std::fabs(fd - r.dnew[t]) < 1e-8,
                           "combo " << combos << " token " << t << " fd " << fd << " analytic " << r.dnew[t]);
                const double e = d.ent[t];
                d.ent[t] = e + h;
                const double eup = run(c, d, den).m.loss;
                d.ent[t] = e - h;
                const double edown = run(c, d, den).m.loss;
                d.ent[t] = e;
                BOOST_TEST(std::fabs((eup - edown) / (2 * h) - r.dent[t]) < 1e-8);
                if (!d.mask[t]) BOOST_TEST(r.dnew[t] == 0.0);
              }
              ++combos;
            }
  BOOST_TEST(combos == 192);
  // Every branch was exercised.
  BOOST_TEST(clipped > 0);
  BOOST_TEST(dual > 0);
  BOOST_TEST(masked > 0);
}

// Splitting the global batch into micro-batches with the global denominator gives the one-shot loss, gradients
// and metrics, for both aggregations.
BOOST_AUTO_TEST_CASE(micro_batches_add_up_to_the_global_batch) {
  for (LossAggregation agg : {LossAggregation::token, LossAggregation::sequence}) {
    hone::PolicyLossConfig c;
    c.aggregation = agg, c.kl_coef = 0.1, c.ratio_clip_c = 3.0, c.entropy_coef = 0.02;
    c.importance_sampling = ImportanceSampling::icepop, c.is_threshold_low = 0.6, c.is_threshold_high = 1.6;
    const Data all = random_batch(c, 1234);
    const double den = denominator(c, all);
    const Result whole = run(c, all, den);

    const std::vector<std::vector<int>> parts = {{0, 1}, {2}, {3, 4, 5}};
    hone::PolicyLossMetrics merged;
    std::vector<double> dnew, dent;
    int64_t den_sum = 0;
    for (const std::vector<int>& part : parts) {
      Data mb;
      for (int s : part) {
        for (int64_t t = all.offsets[s]; t < all.offsets[s + 1]; ++t)
          mb.add_token(all.now[t], all.old[t], all.gen[t], all.ref[t], all.ent[t], all.mask[t]);
        mb.end_sequence(all.adv[s]);
      }
      den_sum += hone::loss_denominator(agg, mb.mask, mb.offsets);
      const Result r = run(c, mb, den);
      merged.merge(r.m);
      dnew.insert(dnew.end(), r.dnew.begin(), r.dnew.end());
      dent.insert(dent.end(), r.dent.begin(), r.dent.end());
    }
    BOOST_TEST(static_cast<double>(den_sum) == den);
    BOOST_TEST(merged.loss == whole.m.loss, tt::tolerance(1e-12));
    BOOST_TEST(merged.kl_loss == whole.m.kl_loss, tt::tolerance(1e-12));
    BOOST_TEST(dnew == whole.dnew, tt::per_element());  // identical per-token arithmetic
    BOOST_TEST(dent == whole.dent, tt::per_element());
    BOOST_TEST(merged.valid_tokens == whole.m.valid_tokens);
    BOOST_TEST(merged.clipped_tokens == whole.m.clipped_tokens);
    BOOST_TEST(merged.ratio_min == whole.m.ratio_min);
    BOOST_TEST(merged.ratio_max == whole.m.ratio_max);
    BOOST_TEST(merged.token_mult_prob_error() == whole.m.token_mult_prob_error(), tt::tolerance(1e-12));
    // A per-micro-batch denominator would not add up (the sequences differ in length).
    double local = 0;
    for (const std::vector<int>& part : parts) {
      Data mb;
      for (int s : part) {
        for (int64_t t = all.offsets[s]; t < all.offsets[s + 1]; ++t)
          mb.add_token(all.now[t], all.old[t], all.gen[t], all.ref[t], all.ent[t], all.mask[t]);
        mb.end_sequence(all.adv[s]);
      }
      local += run(c, mb, static_cast<double>(hone::loss_denominator(agg, mb.mask, mb.offsets))).m.loss / 3;
    }
    BOOST_TEST(std::fabs(local - whole.m.loss) > 1e-6);
  }
}

BOOST_AUTO_TEST_CASE(float_path_matches_double) {
  hone::PolicyLossConfig c;
  c.kl_coef = 0.05, c.ratio_clip_c = 2.5, c.importance_sampling = ImportanceSampling::tis;
  const Data d = random_batch(c, 99);
  const double den = denominator(c, d);
  const Result r = run(c, d, den);
  auto f = [](const std::vector<double>& v) { return std::vector<float>(v.begin(), v.end()); };
  const std::vector<float> now = f(d.now), old = f(d.old), gen = f(d.gen), ref = f(d.ref), ent = f(d.ent),
                           adv = f(d.adv);
  std::vector<float> g(d.size()), e;
  const hone::PolicyLossBatch<float> b{now, old, gen, ref, ent, d.mask, d.offsets, adv};
  const hone::PolicyLossMetrics m = hone::policy_loss<float>(c, b, den, g, e);
  BOOST_TEST(m.loss == r.m.loss, tt::tolerance(1e-5));
  for (size_t t = 0; t < g.size(); ++t) BOOST_TEST(std::fabs(g[t] - r.dnew[t]) < 1e-5);
}

// The op itself (ops/ops.h): backward ACCUMULATES into its gradients on valid tokens only; old may be the new
// array (exactly on-policy: every ratio 1); the entropy sum covers the valid tokens whatever entropy_coef is.
BOOST_AUTO_TEST_CASE(op_accumulates_and_takes_new_as_old) {
  hone::PolicyLossConfig c;
  c.kl_coef = 0.05, c.entropy_coef = 0.01, c.importance_sampling = ImportanceSampling::tis;
  const Data d = random_batch(c, 7);
  const double den = denominator(c, d);
  const int T = static_cast<int>(d.size()), S = static_cast<int>(d.adv.size());
  std::vector<double> dnew(d.size(), 0.5), dent(d.size(), -0.25);
  hone::cpu::policy_loss_backward(dnew.data(), dent.data(), d.now.data(), d.old.data(), d.gen.data(), d.ref.data(),
                                  d.mask.data(), d.offsets.data(), d.adv.data(), T, S, c, den);
  const Result r = run(c, d, den);
  for (size_t t = 0; t < d.size(); ++t) {
    BOOST_TEST(dnew[t] == 0.5 + r.dnew[t]);
    BOOST_TEST(dent[t] == -0.25 + r.dent[t]);
  }
  double stats[hone::PolicyLossStat::count];
  hone::cpu::policy_loss_forward(stats, d.now.data(), d.now.data(), d.gen.data(), d.ref.data(), d.ent.data(),
                                 d.mask.data(), d.offsets.data(), d.adv.data(), T, S, c, den);
  const hone::PolicyLossMetrics m = hone::policy_loss_metrics(stats);
  BOOST_TEST(m.ratio_min == 1.0);
  BOOST_TEST(m.ratio_max == 1.0);
  BOOST_TEST(m.clipped_tokens == 0);
  double ent = 0;
  for (size_t t = 0; t < d.size(); ++t) ent += d.mask[t] ? d.ent[t] : 0.0;
  BOOST_TEST(m.entropy_sum == ent, tt::tolerance(1e-12));
  c.entropy_coef = 0;
  hone::cpu::policy_loss_forward(stats, d.now.data(), d.old.data(), d.gen.data(), d.ref.data(), d.ent.data(),
                                 d.mask.data(), d.offsets.data(), d.adv.data(), T, S, c, den);
  BOOST_TEST(stats[hone::PolicyLossStat::entropy_sum] == ent, tt::tolerance(1e-12));
  BOOST_TEST(stats[hone::PolicyLossStat::entropy_loss] == 0.0);
}

BOOST_AUTO_TEST_CASE(names_parse_and_bad_config_is_a_user_error) {
  BOOST_TEST(hone::parse_kl_type("k2") == KlType::k2);
  BOOST_TEST(hone::parse_loss_aggregation("sequence") == LossAggregation::sequence);
  BOOST_TEST(hone::parse_importance_sampling("seq_mask") == ImportanceSampling::seq_mask);
  BOOST_CHECK_THROW(hone::parse_kl_type("k4"), hone::UserError);
  BOOST_CHECK_THROW(hone::parse_loss_aggregation("mean"), hone::UserError);
  BOOST_CHECK_THROW(hone::parse_importance_sampling("is"), hone::UserError);
  hone::PolicyLossConfig c;
  c.ratio_clip_c = 0.9;
  BOOST_CHECK_THROW(hone::validate_policy_loss_config(c), hone::UserError);
  c = {};
  c.importance_sampling = ImportanceSampling::icepop, c.is_threshold_low = 3, c.is_threshold_high = 2;
  BOOST_CHECK_THROW(hone::validate_policy_loss_config(c), hone::UserError);
  c = {};
  c.ratio_clip_min = 1.5;
  BOOST_CHECK_THROW(hone::validate_policy_loss_config(c), hone::UserError);
  BOOST_CHECK_NO_THROW(hone::validate_policy_loss_config(hone::PolicyLossConfig{}));
  // A NaN logprob on a trained token is an internal error, not a silent NaN loss; on a masked token it is ignored.
  Data d = one_token(1.0, 1.0);
  d.add_token(NAN, NAN, NAN, NAN, 0.0, 0);
  d.end_sequence(1.0);
  BOOST_CHECK_NO_THROW(run(hone::PolicyLossConfig{}, d, 1.0));
  d.now[0] = NAN;
  BOOST_CHECK_THROW(run(hone::PolicyLossConfig{}, d, 1.0), hone::Error);
}

BOOST_AUTO_TEST_SUITE_END()
