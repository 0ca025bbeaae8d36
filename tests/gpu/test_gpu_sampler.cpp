// The CUDA sampler and stop check (cuda/generation_ops.h) against the CPU rules of src/generation/sampler.h:
//   * agreement: many rows of random logits (and rows rich in exact ties), every filter combination, the same
//     (seed, step, sample, position) on both sides: tokens equal for >= 99.9% of the rows (the GPU weighs tokens
//     with fp32 exp, the CPU in double, so a uniform within ~1e-7 of a boundary may pick a neighbour: the count is
//     printed), the logprob of the GPU's token within 1e-4 of the CPU's temperature_logprob; greedy exactly equal.
//     Rows are stored with a stride wider than the vocabulary and NaN in the padding (never read).
//   * edge rows for the fused first pass: the same agreement over 8 row shapes (huge negatives before a max in the
//     last segment, one very large logit, NaN and -inf, rising and falling ramps, ties, a few live logits, no
//     finite logit or +inf), V from 1 to 151,939, aligned and unaligned rows, 5 settings, 2 steps: >= 99.9% equal
//     tokens per setting (greedy all), never a NaN or -inf token, rows without a finite max their argmax with NaN;
//     and a uniform of exactly 0 on rows whose first half has weights below fp32's range (the draw's restart).
//   * the top-k candidate path (cuda/sampler_topk.cuh) and its fallback to the row-wide path: top-k 1, 2, 50, the
//     cap (4096) and one above it, with top-p 1, 0.9, 0.5 and min-p 0, 0.05, at three temperatures, over 8 row kinds
//     (normal, ties, a plateau whose ties overflow the cap, NaN and -inf, mostly not finite, crowded in one bin of
//     the first level, one dominant logit) at V = 20,000 (unaligned rows) and 151,936: the same rules as above, and
//     the kernel's fit rule on the host shows both paths ran, at the cap too.
//   * distribution: 200,000 draws from one row of known logits (positions vary) against sampling_distribution:
//     chi-square below the 1e-4 upper tail critical value, and no draw of a filtered-out token.
//   * check_stops: exact, on cases chosen to hit each rule and its boundary.
#include <boost/test/unit_test.hpp>

#include <algorithm>
#include <array>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <functional>
#include <random>
#include <span>
#include <string>
#include <vector>

#include "common/gpu.h"

#if HONE_CUDA
#include "cuda/generation_ops.h"
#include "ops/ops.h"
#include "device_buffer.h"
#include "generation/sampler.h"
#include "ops/philox.h"

namespace {

const hone::cuda::GpuContext& gpu() {
  static hone::cuda::GpuContext ctx = hone::cuda::create_gpu_context(0);
  return ctx;
}

struct Combo {
  std::string name;
  hone::SamplingParams p;
};

hone::cuda::GpuSamplingParams to_gpu(const hone::SamplingParams& p) {
  hone::cuda::GpuSamplingParams g;
  g.temperature = p.temperature;
  g.top_k = int(p.top_k);
  g.top_p = p.top_p;
  g.min_p = p.min_p;
  g.greedy = p.greedy;
  return g;
}

struct Draws {
  std::vector<int32_t> tokens;
  std::vector<float> logprobs;
};

// Samples B rows of V logits (row stride ld, the first row at element `offset` of `logits`) on the GPU.
Draws gpu_sample(const std::vector<float>& logits, int64_t ld, int B, int V, const hone::SamplingParams& p,
                 uint64_t seed, uint32_t step, const std::vector<int32_t>& sample, const std::vector<int32_t>& pos,
                 int64_t offset = 0) {
  test::DeviceBuffer<float> dl(int64_t(logits.size()));
  test::DeviceBuffer<int32_t> dtok(B), dsample(B), dpos(B);
  test::DeviceBuffer<float> dlp(B);
  dl.upload_raw(logits);
  dsample.upload_raw(sample);
  dpos.upload_raw(pos);
  dtok.poison();
  dlp.poison();
  hone::cuda::sample_tokens(dtok.get(), dlp.get(), dl.get() + offset, ld, B, V, to_gpu(p), seed, step,
                            dsample.get(), dpos.get(), gpu());
  CUDA_CHECK(cudaStreamSynchronize(gpu().stream));
  Draws d;
  d.tokens.resize(static_cast<size_t>(B));
  d.logprobs = dlp.download();
  CUDA_CHECK(cudaMemcpy(d.tokens.data(), dtok.get(), size_t(B) * sizeof(int32_t), cudaMemcpyDeviceToHost));
  return d;
}

const std::vector<Combo>& combos() {
  static const std::vector<Combo> c = [] {
    std::vector<Combo> v;
    auto add = [&](std::string name, float t, int64_t k, float top_p, float min_p, bool greedy) {
      hone::SamplingParams p;
      p.temperature = t;
      p.top_k = k;
      p.top_p = top_p;
      p.min_p = min_p;
      p.greedy = greedy;
      v.push_back({std::move(name), p});
    };
    add("plain", 1.f, 0, 1.f, 0.f, false);
    add("temperature 0.7", 0.7f, 0, 1.f, 0.f, false);
    add("top-k 50", 1.f, 50, 1.f, 0.f, false);
    add("top-k 1", 1.f, 1, 1.f, 0.f, false);
    add("top-p 0.9", 1.f, 0, 0.9f, 0.f, false);
    add("top-p 0.3", 1.f, 0, 0.3f, 0.f, false);
    add("min-p 0.05", 1.f, 0, 1.f, 0.05f, false);
    add("top-k 50 + top-p 0.9", 1.f, 50, 0.9f, 0.f, false);
    add("all: T 1.3, top-k 20, top-p 0.8, min-p 0.1", 1.3f, 20, 0.8f, 0.1f, false);
    add("greedy", 1.f, 0, 1.f, 0.f, true);
    return v;
  }();
  return c;
}

// Random rows; every fourth row rounded to multiples of 0.5 (exact ties, also at the top-k/top-p boundaries).
std::vector<float> random_rows(int B, int V, int64_t ld, std::mt19937_64& rng) {
  std::normal_distribution<float> nd(0.f, 3.f);
  std::vector<float> x(static_cast<size_t>(B) * size_t(ld), NAN);
  for (int b = 0; b < B; ++b)
    for (int i = 0; i < V; ++i) {
      float v = nd(rng);
      if (b % 4 == 3) v = std::round(v * 2.f) / 2.f;
      x[size_t(b) * ld + i] = v;
    }
  return x;
}

void check_agreement(int B, int V, uint64_t seed) {
  std::mt19937_64 rng(seed);
  const int64_t ld = V + 3;
  const std::vector<float> x = random_rows(B, V, ld, rng);
  std::vector<int32_t> sample(static_cast<size_t>(B)), pos(static_cast<size_t>(B));
  for (int b = 0; b < B; ++b) {
    sample[size_t(b)] = b % 16;
    pos[size_t(b)] = 3 + 7 * b;
  }
  const uint32_t step = 5;
  for (const Combo& c : combos()) {
    const Draws d = gpu_sample(x, ld, B, V, c.p, seed, step, sample, pos);
    int mismatches = 0, outside = 0;
    double worst_lp = 0;
    for (int b = 0; b < B; ++b) {
      const std::span<const float> row(x.data() + size_t(b) * ld, size_t(V));
      const hone::SampledToken want =
          hone::sample_token(row, c.p, seed, step, uint32_t(sample[size_t(b)]), uint32_t(pos[size_t(b)]));
      const int32_t got = d.tokens[size_t(b)];
      BOOST_REQUIRE_MESSAGE(got >= 0 && got < V, c.name << ": row " << b << " token " << got << " outside [0, V)");
      if (got != want.token) ++mismatches;
      const double lp = hone::temperature_logprob(row, c.p.temperature, got);
      worst_lp = std::max(worst_lp, std::fabs(lp - double(d.logprobs[size_t(b)])));
      if (got != want.token && hone::sampling_distribution(row, c.p)[size_t(got)] == 0.0) ++outside;
    }
    std::printf("  sampler V=%d %-44s rows %d, token mismatches %d (%d outside the CPU's kept set), "
                "max |logprob diff| %.2e\n", V, c.name.c_str(), B, mismatches, outside, worst_lp);
    BOOST_TEST_INFO(c.name << " V=" << V);
    if (c.p.greedy) BOOST_TEST(mismatches == 0);
    else BOOST_TEST(double(mismatches) <= 0.001 * B);
    BOOST_TEST(double(outside) <= 0.001 * B);
    BOOST_TEST(worst_lp <= 1e-4);
  }
}

// Row shapes aimed at the fused first pass (per-warp segments with a running max rescaled as it grows, float4 reads
// after an unaligned head): the row max in the last segment after segments of huge negative logits, one very large
// logit, NaN and -inf, a rising ramp (the running max grows at every read), all logits tied, a few live logits among
// very negative ones, a falling ramp (the max in the first segment), and rows without a usable max.
constexpr int kShapes = 8;

void fill_shape(float* x, int V, int shape, int variant, std::mt19937_64& rng) {
  std::normal_distribution<float> nd(0.f, 3.f);
  std::uniform_int_distribution<int> any(0, V - 1);
  const float fv = float(V);
  for (int i = 0; i < V; ++i) x[i] = nd(rng);
  switch (shape) {
    case 0:  // huge negatives, then the max in the last 1/40 of the row
      for (int i = 0; i < 3 * V / 4; ++i) x[i] = i % 3 == 0 ? -1e30f : i % 3 == 1 ? -3e38f : -40.f + nd(rng) / 3.f;
      x[V - 1 - std::uniform_int_distribution<int>(0, std::max(0, V / 40))(rng)] = 15.f;
      break;
    case 1:  // one logit far above the rest (a point mass), or dominant
      x[any(rng)] = variant % 2 == 0 ? 1e4f : 18.f;
      break;
    case 2:  // NaN and -inf among normal logits
      for (int i = 0; i < V; ++i) {
        const int r = int(rng() % 10);
        if (r == 0) x[i] = NAN;
        if (r == 1) x[i] = -INFINITY;
      }
      break;
    case 3:
      for (int i = 0; i < V; ++i) x[i] = 30.f * float(i) / fv + nd(rng) / 6.f;
      break;
    case 4:
      for (int i = 0; i < V; ++i) x[i] = 1.25f;
      break;
    case 5:  // ~200 live logits among -1e4
      for (int i = 0; i < V; ++i)
        if (rng() % uint64_t(std::max(1, V / 200)) != 0) x[i] = -1e4f;
      break;
    case 6:
      for (int i = 0; i < V; ++i) x[i] = 30.f * (1.f - float(i) / fv) + nd(rng) / 6.f;
      break;
    default:  // no finite logit (NaN and -inf, or NaN only), or +inf twice
      if (variant % 2 == 0) {
        for (int i = 0; i < V; ++i) x[i] = rng() % 3 == 0 ? -INFINITY : NAN;
      } else {
        x[any(rng)] = INFINITY;
        x[any(rng)] = INFINITY;
      }
  }
}

// What the GPU must return for a row: the CPU sampler on the row with NaN read as -inf (weight 0 either way) when
// the max is finite; else (no finite logit, or +inf) the argmax (lowest id of the largest non-NaN logit, 0 when all
// are NaN) with a NaN logprob. `clean` receives the row the CPU saw.
struct Want {
  int32_t token;
  bool finite;
};
Want want_for(std::span<const float> row, const hone::SamplingParams& p, uint64_t seed, uint32_t step,
              uint32_t sample, uint32_t pos, std::vector<float>& clean) {
  clean.assign(row.begin(), row.end());
  int32_t best = -1;
  for (size_t i = 0; i < clean.size(); ++i) {
    if (std::isnan(clean[i])) {
      clean[i] = -INFINITY;
      continue;
    }
    if (best < 0 || row[i] > row[size_t(best)]) best = int32_t(i);
  }
  if (best < 0) return {0, false};
  if (!std::isfinite(row[size_t(best)])) return {best, false};
  return {hone::sample_token(clean, p, seed, step, sample, pos).token, true};
}

// The top-k candidate path of the kernel (cuda/sampler_topk.cuh) gathers the keys >= the k-th largest key with its
// low 20, 8 or 0 bits cleared (the first that fits) into kCandidateCap slots; rows where none fits take the row-wide
// path. The same rule on the host tells which path a row takes, so the test can show both ran.
constexpr int kCandidateCap = 4096;

uint32_t order_key(float x) {
  if (std::isnan(x)) return 0u;
  uint32_t u;
  std::memcpy(&u, &x, sizeof u);
  return (u & 0x80000000u) ? ~u : (u | 0x80000000u);
}

bool takes_candidate_path(std::span<const float> row, int64_t k) {
  std::vector<uint32_t> keys(row.size());
  std::transform(row.begin(), row.end(), keys.begin(), order_key);
  std::nth_element(keys.begin(), keys.begin() + (k - 1), keys.end(), std::greater<uint32_t>());
  const uint32_t kth = keys[size_t(k - 1)];
  for (const int shift : {20, 8, 0}) {
    const uint32_t lo = kth & ~((uint32_t(1) << shift) - 1u);
    if (std::count_if(keys.begin(), keys.end(), [&](uint32_t q) { return q >= lo; }) <= kCandidateCap) return true;
  }
  return false;
}

// Row kinds for the candidate path: normal (sd 2, sd 4), rounded to multiples of 0.5 (ties at every boundary), a
// plateau (20 high logits, then 6000 copies of one value: k >= 50 lands in it and its ties overflow the cap), NaN
// and -inf among normal logits, 40 finite logits among NaN and -inf (k = 50 lands on -inf: overflow), 8000 logits
// crowded in [10, 10.5) (the first level's bin overflows, a finer level fits), one dominant logit.
constexpr int kTopkKinds = 8;

void fill_topk_row(float* x, int V, int kind, std::mt19937_64& rng) {
  std::normal_distribution<float> nd(0.f, 1.f);
  std::uniform_int_distribution<int> any(0, V - 1);
  for (int i = 0; i < V; ++i) x[i] = 3.f * nd(rng);
  switch (kind) {
    case 0:
    case 1:
      for (int i = 0; i < V; ++i) x[i] *= kind == 0 ? 2.f / 3.f : 4.f / 3.f;
      break;
    case 2:
      for (int i = 0; i < V; ++i) x[i] = std::round(x[i] * 2.f) / 2.f;
      break;
    case 3:
      for (int i = 0; i < V; ++i) x[i] = -4.f + 2.f * nd(rng);
      for (int n = 0; n < 6000; ++n) x[any(rng)] = 5.f;
      for (int n = 0; n < 20; ++n) x[any(rng)] = 12.f + nd(rng);
      break;
    case 4:
      for (int i = 0; i < V; ++i) {
        const uint64_t r = rng() % 10;
        if (r == 0) x[i] = NAN;
        if (r == 1) x[i] = -INFINITY;
      }
      break;
    case 5:
      for (int i = 0; i < V; ++i) x[i] = rng() % 2 ? NAN : -INFINITY;
      for (int n = 0; n < 40; ++n) x[any(rng)] = 3.f * nd(rng);
      break;
    case 6:
      for (int n = 0; n < 8000; ++n) x[any(rng)] = std::uniform_real_distribution<float>(10.f, 10.5f)(rng);
      break;
    default:
      x[any(rng)] = rng() % 2 ? 1e4f : 18.f;
  }
}

// Upper 1e-4 tail of chi-square with k degrees of freedom (Wilson-Hilferty; z = 3.719 for 1e-4).
double chi2_critical_1e4(int k) {
  const double z = 3.719, a = 2.0 / (9.0 * k);
  return k * std::pow(1.0 - a + z * std::sqrt(a), 3.0);
}

}  // namespace

BOOST_AUTO_TEST_SUITE(gpu_sampler)

BOOST_AUTO_TEST_CASE(tokens_and_logprobs_match_the_cpu_sampler, *boost::unit_test::precondition(test::needs_gpu)) {
  check_agreement(2000, 1000, 101);
  check_agreement(4, 151936, 202);  // Qwen3 vocabulary: every level of the draw and the radix selects
}

BOOST_AUTO_TEST_CASE(fused_pass_edge_rows_match_the_cpu_sampler, *boost::unit_test::precondition(test::needs_gpu)) {
  // V not a multiple of 4 or 32 or 1024 (and the Qwen3 vocabulary); rows aligned to 16 bytes or not (ld = V, ld odd,
  // ld a multiple of 4 above V, the first row one element past an aligned address); two steps (other uniforms).
  std::vector<Combo> settings;
  for (const Combo& c : combos())
    if (c.name == "plain" || c.name == "temperature 0.7" || c.name == "greedy" || c.name == "min-p 0.05" ||
        c.name == "top-k 50 + top-p 0.9")
      settings.push_back(c);
  BOOST_REQUIRE(settings.size() == 5);
  struct Layout {
    int64_t extra_ld;  // ld = V + extra_ld, or the next multiple of 4 above V + 4 when < 0
    int64_t offset;
  };
  const std::vector<Layout> layouts = {{0, 0}, {1, 1}, {-1, 0}, {-1, 1}};
  for (const Combo& c : settings) {
    int64_t rows = 0, mismatches = 0, outside = 0;
    double worst_lp = 0;
    for (const int V : {1, 3, 5, 37, 1023, 1025, 4099, 151936, 151939}) {
      const int B = V > 10000 ? 3 * kShapes : 32 * kShapes;
      for (const Layout& L : layouts) {
        const int64_t ld = L.extra_ld >= 0 ? V + L.extra_ld : (V + 3) / 4 * 4 + 4;
        std::mt19937_64 rng(uint64_t(V) * 1000 + uint64_t(ld) * 10 + uint64_t(L.offset));
        std::vector<float> x(size_t(L.offset + int64_t(B) * ld), NAN);
        for (int b = 0; b < B; ++b) fill_shape(x.data() + L.offset + int64_t(b) * ld, V, b % kShapes, b / kShapes, rng);
        std::vector<int32_t> sample(static_cast<size_t>(B)), pos(static_cast<size_t>(B));
        for (int b = 0; b < B; ++b) {
          sample[size_t(b)] = b % 7;
          pos[size_t(b)] = 11 * b + V % 97;
        }
        for (const uint32_t step : {1u, 2u}) {
          const uint64_t seed = 9000 + uint64_t(V);
          const Draws d = gpu_sample(x, ld, B, V, c.p, seed, step, sample, pos, L.offset);
          std::vector<float> clean;
          for (int b = 0; b < B; ++b) {
            const std::span<const float> row(x.data() + L.offset + int64_t(b) * ld, size_t(V));
            const Want want =
                want_for(row, c.p, seed, step, uint32_t(sample[size_t(b)]), uint32_t(pos[size_t(b)]), clean);
            const int32_t got = d.tokens[size_t(b)];
            const float lp = d.logprobs[size_t(b)];
// (a macro: Boost formats a message only when the check fails)
#define WHERE                                                                                 \
  c.name << " V=" << V << " ld=" << ld << " offset=" << L.offset << " row " << b << " shape " \
         << b % kShapes << " step " << step << ": token " << got << " logprob " << lp << ", want token " << want.token
            BOOST_REQUIRE_MESSAGE(got >= 0 && got < V, WHERE);
            if (!want.finite) {  // the argmax with a NaN logprob
              BOOST_CHECK_MESSAGE(got == want.token && std::isnan(lp), WHERE);
              continue;
            }
            ++rows;
            if (got != want.token) {
              ++mismatches;
              if (hone::sampling_distribution(clean, c.p)[size_t(got)] == 0.0) ++outside;
            }
            BOOST_CHECK_MESSAGE(std::isfinite(clean[size_t(got)]), WHERE);  // never a NaN or -inf logit
#undef WHERE
            worst_lp = std::max(worst_lp, std::fabs(hone::temperature_logprob(clean, c.p.temperature, got) - lp));
          }
        }
      }
    }
    std::printf("  sampler edge rows %-28s rows %lld, token mismatches %lld (%lld outside the CPU's kept set), "
                "max |logprob diff| %.2e\n", c.name.c_str(), static_cast<long long>(rows),
                static_cast<long long>(mismatches), static_cast<long long>(outside), worst_lp);
    BOOST_TEST_INFO(c.name);
    if (c.p.greedy) BOOST_TEST(mismatches == 0);
    else BOOST_TEST(double(mismatches) <= 0.001 * double(rows));
    BOOST_TEST(double(outside) <= 0.001 * double(rows));
    BOOST_TEST(worst_lp <= 1e-4);
  }
}

BOOST_AUTO_TEST_CASE(topk_candidates_and_their_fallback_match_the_cpu_sampler,
                     *boost::unit_test::precondition(test::needs_gpu)) {
  // top-k 1, 2, 50, at the cap and one above it (never fits), each with top-p 1, 0.9, 0.5 and min-p 0 or 0.05, at
  // temperatures 1, 0.6 and 1.7 in turn; V = 20,000 (3 rows of each kind, ld odd: rows unaligned) and 151,936 (one).
  int64_t rows = 0, mismatches = 0, outside = 0, gathered = 0, fallback = 0, cap_gathered = 0, cap_fallback = 0;
  double worst_lp = 0;
  int setting = 0;
  for (const int64_t k : {int64_t(1), int64_t(2), int64_t(50), int64_t(kCandidateCap), int64_t(kCandidateCap + 1)})
    for (const float top_p : {1.f, 0.9f, 0.5f})
      for (const float min_p : {0.f, 0.05f}) {
        hone::SamplingParams p;
        p.top_k = k;
        p.top_p = top_p;
        p.min_p = min_p;
        p.temperature = std::array<float, 3>{1.f, 0.6f, 1.7f}[size_t(setting++ % 3)];
        for (const int V : {20000, 151936}) {
          const int B = V == 20000 ? 3 * kTopkKinds : kTopkKinds;
          const int64_t ld = V + 1;
          std::mt19937_64 rng(uint64_t(V) + 7 * uint64_t(setting));
          std::vector<float> x(size_t(B) * size_t(ld), NAN);
          for (int b = 0; b < B; ++b) fill_topk_row(x.data() + size_t(b) * ld, V, b % kTopkKinds, rng);
          std::vector<int32_t> sample(static_cast<size_t>(B)), pos(static_cast<size_t>(B));
          for (int b = 0; b < B; ++b) {
            sample[size_t(b)] = b % 5;
            pos[size_t(b)] = 13 * b + setting;
          }
          const uint64_t seed = 31337;
          const uint32_t step = uint32_t(setting);
          const Draws d = gpu_sample(x, ld, B, V, p, seed, step, sample, pos);
          std::vector<float> clean;
          for (int b = 0; b < B; ++b) {
            const std::span<const float> row(x.data() + size_t(b) * ld, size_t(V));
            const Want want =
                want_for(row, p, seed, step, uint32_t(sample[size_t(b)]), uint32_t(pos[size_t(b)]), clean);
            const int32_t got = d.tokens[size_t(b)];
            const float lp = d.logprobs[size_t(b)];
            BOOST_REQUIRE_MESSAGE(got >= 0 && got < V && want.finite, "top-k " << k << " top-p " << top_p << " min-p "
                                  << min_p << " V=" << V << " row " << b << ": token " << got);
            const bool gathers = takes_candidate_path(row, k);
            (gathers ? gathered : fallback) += 1;
            if (k == kCandidateCap) (gathers ? cap_gathered : cap_fallback) += 1;
            ++rows;
            if (got != want.token) {
              ++mismatches;
              if (hone::sampling_distribution(clean, p)[size_t(got)] == 0.0) ++outside;
              std::printf("  sampler top-k path: top-k %lld top-p %.2f min-p %.2f T %.1f V=%d row %d (kind %d, %s): "
                          "token %d, the CPU's %d\n", static_cast<long long>(k), double(top_p), double(min_p),
                          double(p.temperature), V, b, b % kTopkKinds, gathers ? "gathered" : "fallback", got,
                          want.token);
            }
            BOOST_CHECK(std::isfinite(clean[size_t(got)]));  // never a NaN or -inf logit
            worst_lp = std::max(worst_lp, std::fabs(hone::temperature_logprob(clean, p.temperature, got) - lp));
          }
        }
      }
  std::printf("  sampler top-k path: rows %lld (gathered %lld, fallback %lld; at k = %d: %lld and %lld), token "
              "mismatches %lld (%lld outside the CPU's kept set), max |logprob diff| %.2e\n",
              static_cast<long long>(rows), static_cast<long long>(gathered), static_cast<long long>(fallback),
              kCandidateCap, static_cast<long long>(cap_gathered), static_cast<long long>(cap_fallback),
              static_cast<long long>(mismatches), static_cast<long long>(outside), worst_lp);
  BOOST_TEST(gathered > 0);
  BOOST_TEST(fallback > 0);
  BOOST_TEST(cap_gathered > 0);
  BOOST_TEST(cap_fallback > 0);
  BOOST_TEST(double(mismatches) <= 0.001 * double(rows));
  BOOST_TEST(double(outside) <= 0.001 * double(rows));
  BOOST_TEST(worst_lp <= 1e-4);
}

BOOST_AUTO_TEST_CASE(zero_uniform_draws_the_first_token_of_nonzero_fp32_weight,
                     *boost::unit_test::precondition(test::needs_gpu)) {
  // philox_uniform(4242, 1, 0, 17463744) is exactly 0: the draw takes the first token whose fp32 weight is > 0. The
  // first half of each row sits 120 below the max (weights nonzero in double, 0 in fp32), so the fused pass gives
  // segment 0 a tiny mass that the draw's exact recomputation finds empty: the draw must start again from exact
  // segment sums and land on the first id of the second half, not fall back to the argmax.
  const uint64_t seed = 4242;
  const uint32_t step = 1, position = 17463744;
  BOOST_REQUIRE(hone::philox_uniform(seed, step, 0, position) == 0.f);
  for (const int V : {33, 1000, 4099, 151936}) {
    const int B = 8;
    const int64_t ld = V + (V % 2);
    std::mt19937_64 rng{uint64_t(V)};
    std::normal_distribution<float> nd(0.f, 3.f);
    std::vector<float> x(size_t(B) * size_t(ld), NAN);
    for (int b = 0; b < B; ++b) {
      float* r = x.data() + size_t(b) * ld;
      for (int i = 0; i < V; ++i) r[i] = i < V / 2 ? -105.f + nd(rng) / 10.f : nd(rng);
      r[V - 2] = 15.f;
    }
    const std::vector<int32_t> sample(static_cast<size_t>(B), 0), pos(static_cast<size_t>(B), int32_t(position));
    for (const float t : {1.f, 0.7f}) {
      hone::SamplingParams p;
      p.temperature = t;
      const Draws d = gpu_sample(x, ld, B, V, p, seed, step, sample, pos);
      for (int b = 0; b < B; ++b) {
        BOOST_TEST_INFO("V=" << V << " T=" << t << " row " << b);
        BOOST_TEST(d.tokens[size_t(b)] == V / 2);
      }
    }
  }
}

BOOST_AUTO_TEST_CASE(frequencies_follow_the_sampling_distribution, *boost::unit_test::precondition(test::needs_gpu)) {
  const int V = 300, B = 20000, launches = 10;
  std::vector<float> row(static_cast<size_t>(V));
  for (int i = 0; i < V; ++i) row[size_t(i)] = 3.f * std::sin(0.37f * float(i)) + 0.004f * float(i);
  struct Setting {
    hone::SamplingParams p;
    const char* name;
  };
  std::vector<Setting> settings(3);
  settings[0].name = "T 0.9, top-k 40, top-p 0.9, min-p 0.05";
  settings[0].p.temperature = 0.9f;
  settings[0].p.top_k = 40;
  settings[0].p.top_p = 0.9f;
  settings[0].p.min_p = 0.05f;
  settings[1].name = "top-p 0.95";
  settings[1].p.top_p = 0.95f;
  settings[2].name = "no filter, T 1.5";
  settings[2].p.temperature = 1.5f;
  std::vector<float> x(static_cast<size_t>(B) * V);
  for (int b = 0; b < B; ++b) std::copy(row.begin(), row.end(), x.begin() + size_t(b) * V);
  for (const Setting& s : settings) {
    const std::vector<double> prob = hone::sampling_distribution(row, s.p);
    std::vector<int64_t> count(static_cast<size_t>(V), 0);
    for (int l = 0; l < launches; ++l) {
      std::vector<int32_t> sample(static_cast<size_t>(B), 1), pos(static_cast<size_t>(B));
      for (int b = 0; b < B; ++b) pos[size_t(b)] = l * B + b;
      const Draws d = gpu_sample(x, V, B, V, s.p, 777, 3, sample, pos);
      for (int32_t t : d.tokens) {
        BOOST_REQUIRE(t >= 0 && t < V);
        ++count[size_t(t)];
      }
    }
    const double n = double(B) * launches;
    int64_t filtered_draws = 0;
    double chi2 = 0, pooled_obs = 0, pooled_exp = 0;
    int bins = 0;
    for (int i = 0; i < V; ++i) {
      if (prob[size_t(i)] == 0.0) {
        filtered_draws += count[size_t(i)];
        continue;
      }
      const double e = prob[size_t(i)] * n;
      if (e < 5.0) {
        pooled_obs += double(count[size_t(i)]);
        pooled_exp += e;
        continue;
      }
      chi2 += (double(count[size_t(i)]) - e) * (double(count[size_t(i)]) - e) / e;
      ++bins;
    }
    if (pooled_exp > 0) {
      chi2 += (pooled_obs - pooled_exp) * (pooled_obs - pooled_exp) / pooled_exp;
      ++bins;
    }
    const double crit = chi2_critical_1e4(std::max(1, bins - 1));
    std::printf("  sampler chi-square %-40s %d bins: %.1f (critical %.1f), filtered draws %lld\n", s.name, bins, chi2,
                crit, static_cast<long long>(filtered_draws));
    BOOST_TEST_INFO(s.name);
    BOOST_TEST(bins >= 2);
    BOOST_TEST(filtered_draws == 0);
    BOOST_TEST(chi2 < crit);
  }
}

BOOST_AUTO_TEST_CASE(check_stops_flags_stop_tokens_and_lengths, *boost::unit_test::precondition(test::needs_gpu)) {
  // Rows: stop id; stop id at the length limit (stop wins); completion limit reached; one short of it; total limit
  // reached; one short of it; nothing; the other stop id.
  const std::vector<int32_t> tokens = {5, 9, 1, 1, 2, 2, 3, 9};
  const std::vector<int32_t> gen_len = {0, 9, 9, 8, 0, 0, 0, 4};
  const std::vector<int32_t> seq_len = {10, 30, 30, 30, 99, 98, 10, 10};
  const std::vector<int32_t> max_new = {10, 10, 10, 10, 50, 50, 50, 50};
  const std::vector<int32_t> stops = {5, 9};
  const std::vector<int32_t> want = {1, 1, 2, 0, 2, 0, 0, 1};
  const int B = int(tokens.size()), max_total = 100;
  test::DeviceBuffer<int32_t> dt(B), dg(B), ds(B), dm(B), dstop(2), done(B);
  dt.upload_raw(tokens);
  dg.upload_raw(gen_len);
  ds.upload_raw(seq_len);
  dm.upload_raw(max_new);
  dstop.upload_raw(stops);
  done.poison();
  hone::cuda::check_stops(done.get(), dt.get(), dg.get(), ds.get(), dm.get(), max_total, dstop.get(), 2, B, gpu());
  CUDA_CHECK(cudaStreamSynchronize(gpu().stream));
  std::vector<int32_t> got(static_cast<size_t>(B));
  CUDA_CHECK(cudaMemcpy(got.data(), done.get(), size_t(B) * sizeof(int32_t), cudaMemcpyDeviceToHost));
  BOOST_TEST(got == want, boost::test_tools::per_element());
  std::vector<int32_t> cpu(static_cast<size_t>(B), -7);  // the CPU twin on the same rows
  hone::cpu::check_stops(cpu.data(), tokens.data(), gen_len.data(), seq_len.data(), max_new.data(), max_total,
                         stops.data(), 2, B);
  BOOST_TEST(cpu == got, boost::test_tools::per_element());

  // No stop ids at all: only the length rules.
  done.poison();
  hone::cuda::check_stops(done.get(), dt.get(), dg.get(), ds.get(), dm.get(), max_total, dstop.get(), 0, B, gpu());
  CUDA_CHECK(cudaStreamSynchronize(gpu().stream));
  CUDA_CHECK(cudaMemcpy(got.data(), done.get(), size_t(B) * sizeof(int32_t), cudaMemcpyDeviceToHost));
  const std::vector<int32_t> want_no_stop = {0, 2, 2, 0, 2, 0, 0, 0};
  BOOST_TEST(got == want_no_stop, boost::test_tools::per_element());
}

BOOST_AUTO_TEST_SUITE_END()

#endif  // HONE_CUDA
