// One GRPO optimizer step of the GPU policy engine against the CPU engine: the same tiny model (Qwen3-like, two
// layers) from the same bf16-rounded initial weights, the same fixed rollouts (prompts, completions, advantages of
// both signs, one sample masked by overlong filtering), packed into several micro-batches, with the KL (k3) and
// entropy terms on and truncated importance sampling. The rollouts, rewards and advantages are inputs here, so the
// step compares what the engines compute:
//   * the logprob phase: max |gpu - cpu| <= 3e-2, mean <= 5e-3 over the completion tokens (the whole-model bf16
//     tolerance of test_gpu_transformer.cpp);
//   * the loss metrics: token counts exactly; each loss term within what a per-token error of 5e-2 in the new
//     logprobs and entropies allows (bounds computed from the CPU's values below); token_mult_prob_error, which
//     reads only the inputs, to 1e-9; exactly on-policy (the micro-batches carry no old logprobs: old is new on
//     the device) every ratio is exactly 1 on both;
//   * the gradient, read as the Adam first moment (exp_avg = (1 - beta1) g after one step): relative L2 <= 5e-2,
//     the bf16 gradient tolerance of test_gpu_transformer.cpp; the gradient norm to 5e-2;
//   * the updated weights: the update w - w0 to 5e-2 relative L2. AdamW's eps = 1, larger than every gradient
//     element, makes the first update lr g / (|g| + 1), nearly linear in g, so its error is the gradient's (with
//     eps = 1e-8 the first update is lr sign(g), and elements whose gradient is near 0 flip between bf16 and fp32).
// The old, generation and reference logprobs are the CPU's logprobs plus fixed perturbations: |new - old| stays
// below 0.13 on both engines, inside the clip range, so no token sits on a kink of the loss (the op test covers the
// branches).
#include <boost/test/unit_test.hpp>

#include "common/gpu.h"

#if HONE_CUDA

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <numeric>
#include <random>

#include "comm/parallel_state.h"
#include "common/compare.h"
#include "gpu_transformer_test_util.h"
#include "rl/grpo_batch.h"
#include "roles/rank_roles.h"

namespace {

using hone::rl::GrpoSample;
using hone::rl::MicroBatch;
using hone::roles::RoleEngine;

constexpr float kTemperature = 0.8f;
constexpr float kLr = 1e-2f;

hone::rl::GrpoSettings settings() {
  hone::rl::GrpoSettings s;
  s.prompts_per_step = 2, s.generations = 4, s.global_batch_size = 8;
  s.max_new_tokens = 24, s.max_total_sequence_length = 40;
  s.max_tokens_per_microbatch = 64;  // three or four micro-batches
  s.sampling.temperature = kTemperature;
  s.kv_cache_gib = 0.25, s.cuda_graphs = false;
  s.loss.kl_coef = 0.05, s.loss.kl_type = hone::KlType::k3, s.loss.entropy_coef = 0.01;
  s.loss.ratio_clip_max = 0.28, s.loss.importance_sampling = hone::ImportanceSampling::tis;
  s.loss.is_threshold_high = 1.1;
  s.adamw.eps = 1.f, s.adamw.weight_decay = 0.f;
  s.lr.learning_rate = kLr;
  return s;
}

// Two groups of four: random prompts of 3 to 10 tokens and completions of 5 to 24; advantages of both signs
// (mostly positive, so the gradient is not a small difference of large terms); sample 6 truncated and filtered.
std::vector<GrpoSample> make_samples(int vocab) {
  std::mt19937 rng(17);
  std::uniform_int_distribution<int> tok(0, vocab - 1), plen(3, 10), clen(5, 24);
  const float adv[8] = {1.5f, 0.5f, -0.5f, 1.0f, 0.8f, -1.2f, 0.3f, 1.1f};
  std::vector<GrpoSample> samples(8);
  for (size_t i = 0; i < samples.size(); ++i) {
    GrpoSample& s = samples[i];
    s.prompt_index = int64_t(i / 4), s.position = int64_t(i), s.advantage = adv[i], s.trained = i != 6;
    s.rollout.prompt.resize(size_t(plen(rng)));
    s.rollout.completion.resize(size_t(clen(rng)));
    for (auto& t : s.rollout.prompt) t = tok(rng);
    for (auto& t : s.rollout.completion) t = tok(rng);
    s.rollout.logprobs.assign(s.rollout.completion.size(), 0.f);
  }
  return samples;
}

// The old and reference logprobs the loss gets, per sample and completion token (the trainer's logprob phase writes
// them into the micro-batches; here they are the CPU's values, perturbed). Empty: 0 in the micro-batches.
struct LossInputs {
  std::vector<std::vector<float>> old, ref;
};

std::vector<MicroBatch> micro_batches(const std::vector<GrpoSample>& samples, int64_t max_tokens,
                                      const LossInputs* in = nullptr) {
  std::vector<int64_t> all(samples.size());
  std::iota(all.begin(), all.end(), int64_t(0));
  std::vector<MicroBatch> mbs;
  for (const auto& bin : hone::rl::pack_samples(samples, all, max_tokens)) {
    MicroBatch mb = hone::rl::build_micro_batch(samples, bin);
    for (int q = 0; q < mb.batch.num_seqs() && in; ++q) {
      const size_t i = size_t(mb.samples[size_t(q)]);
      const size_t first = size_t(mb.batch.seq_begin(q)) + samples[i].rollout.prompt.size() - 1;
      for (size_t j = 0; j < in->old[i].size(); ++j) mb.old[first + j] = in->old[i][j];
      for (size_t j = 0; j < in->ref[i].size(); ++j) mb.ref[first + j] = in->ref[i][j];
    }
    mbs.push_back(std::move(mb));
  }
  return mbs;
}

// The logprob phase on both engines; the CPU's values (per sample) become the inputs old / generation / reference
// after fixed perturbations, and are returned as the new logprobs the CPU will compute.
std::vector<std::vector<float>> logprob_phase(RoleEngine& cpu, RoleEngine& gpu, std::vector<GrpoSample>& samples,
                                              int64_t max_tokens, LossInputs& in) {
  std::vector<std::vector<float>> cpu_new(samples.size());
  double max_err = 0, sum_err = 0;
  int64_t n = 0;
  for (const MicroBatch& mb : micro_batches(samples, max_tokens)) {
    std::vector<float> c_lp, g;
    cpu.policy_logprobs({&mb.batch}, kTemperature, {}, {&c_lp});
    gpu.policy_logprobs({&mb.batch}, kTemperature, {}, {&g});
    for (int q = 0; q < mb.batch.num_seqs(); ++q) {
      const auto cv = hone::rl::completion_values(mb, q, c_lp.data(), samples);
      const auto gv = hone::rl::completion_values(mb, q, g.data(), samples);
      for (size_t j = 0; j < cv.size(); ++j) {
        const double e = std::fabs(double(gv[j]) - cv[j]);
        max_err = std::max(max_err, std::isfinite(e) ? e : INFINITY);
        sum_err += e, ++n;
      }
      cpu_new[size_t(mb.samples[size_t(q)])] = cv;
    }
  }
  std::printf("policy engine logprobs gpu vs cpu: max %.3g mean %.3g over %lld tokens\n", max_err,
              sum_err / double(n), static_cast<long long>(n));
  BOOST_TEST(max_err <= 3e-2);
  BOOST_TEST(sum_err / double(n) <= 5e-3);
  std::mt19937 rng(23);
  std::uniform_real_distribution<float> u(-1.f, 1.f);
  in.old.assign(samples.size(), {});
  in.ref.assign(samples.size(), {});
  for (size_t i = 0; i < samples.size(); ++i) {
    GrpoSample& s = samples[i];
    for (size_t j = 0; j < cpu_new[i].size(); ++j) {
      in.old[i].push_back(cpu_new[i][j] + 0.1f * u(rng));
      s.rollout.logprobs[j] = in.old[i].back() + 0.15f * u(rng);
      in.ref[i].push_back(cpu_new[i][j] + u(rng));
    }
  }
  return cpu_new;
}

hone::PolicyLossMetrics merged(const std::vector<hone::PolicyLossMetrics>& ms) {
  hone::PolicyLossMetrics m;
  for (const auto& x : ms) m.merge(x);
  return m;
}

struct StepResult {
  hone::PolicyLossMetrics loss;
  double grad_norm = 0;
  hone::ModelWeights master;
  hone::Tensor exp_avg, exp_avg_sq;
};

StepResult train_step(RoleEngine& e, const std::vector<MicroBatch>& mbs, const hone::rl::TrainLoss& loss) {
  StepResult r;
  r.loss = merged(e.train(mbs, loss));
  r.grad_norm = e.optimizer_step(kLr, /*max_grad_norm=*/0.0, /*last_of_step=*/true);
  e.read_state(r.master, r.exp_avg, r.exp_avg_sq);
  return r;
}

// Bounds on the loss terms' difference for a per-token error of 5e-2 in new logprobs and entropies, from the
// CPU's new logprobs (token aggregation: scale 1/D).
struct Bounds {
  double pg = 0, kl = 0, entropy = 0;
};

Bounds loss_bounds(const std::vector<GrpoSample>& samples, const LossInputs& in,
                   const std::vector<std::vector<float>>& cpu_new, const hone::PolicyLossConfig& c, double D,
                   bool on_policy) {
  constexpr double kErr = 5e-2;
  Bounds b;
  for (size_t i = 0; i < samples.size(); ++i) {
    const GrpoSample& s = samples[i];
    if (!s.trained) continue;
    for (size_t j = 0; j < cpu_new[i].size(); ++j) {
      const double now = cpu_new[i][j], old = on_policy ? now : in.old[i][j], gen = s.rollout.logprobs[j];
      const double w = std::min(std::exp(old - gen), c.is_threshold_high);
      // pg = -A w r: r moves by a factor exp(+-kErr); on-policy r = 1 exactly but w = exp(new - gen) moves.
      b.pg += std::fabs(s.advantage) * w * std::exp(now - old) * (std::exp(kErr) - 1) / D;
      const double x = in.ref[i][j] - now;  // k3 = e^x - 1 - x: |dk3| <= |e^x - 1| d + e^(x + d) d^2 / 2
      b.kl += c.kl_coef * (std::fabs(std::exp(x) - 1) * kErr + std::exp(x + kErr) * kErr * kErr / 2) / D;
      b.entropy += std::fabs(c.entropy_coef) * kErr / D;
    }
  }
  return b;
}

// The update w - w0 of every parameter.
std::vector<float> update(const hone::ModelWeights& after, const hone::ModelWeights& before) {
  std::vector<float> d(size_t(before.flat.numel()));
  for (size_t i = 0; i < d.size(); ++i) d[i] = after.flat.f32()[i] - before.flat.f32()[i];
  return d;
}

void check_step(bool on_policy) {
  const hone::ModelConfig mc = test::gpu_tiny_config(hone::Architecture::qwen3, false);
  const hone::ModelWeights w0 = test::gpu_test_weights(mc, 29);
  const hone::rl::GrpoSettings s = settings();
  const hone::ParallelState ps(hone::RankGrid(1, 1, 1));  // one rank: local groups, no NCCL communicator
  auto cpu = hone::rl::make_engine<hone::CpuBackend>(s, mc, w0, ps);
  auto gpu = hone::rl::make_engine<hone::CudaBackend>(s, mc, w0, ps);
  cpu->connect(w0);
  gpu->connect(w0);

  std::vector<GrpoSample> samples = make_samples(mc.vocab_size);
  LossInputs in;
  const auto cpu_new = logprob_phase(*cpu, *gpu, samples, s.max_tokens_per_microbatch, in);
  LossInputs given = in;
  if (on_policy)  // the old logprobs of the micro-batches stay 0: an engine that read them would not get ratio 1
    for (auto& o : given.old) o.clear();
  const std::vector<MicroBatch> mbs = micro_batches(samples, s.max_tokens_per_microbatch, &given);
  BOOST_TEST(mbs.size() >= 2u);
  hone::rl::TrainLoss loss;
  loss.config = s.loss, loss.temperature = kTemperature, loss.on_policy = on_policy;
  int64_t D = 0;
  for (const auto& mb : mbs) D += hone::loss_denominator(s.loss.aggregation, mb.mask, mb.seq_offsets);
  loss.denominator = double(D);

  const StepResult c = train_step(*cpu, mbs, loss), g = train_step(*gpu, mbs, loss);
  const Bounds b = loss_bounds(samples, in, cpu_new, s.loss, double(D), on_policy);
  std::printf("policy engine step (%s): loss gpu %.6g cpu %.6g (pg %.3g / %.3g, kl %.3g / %.3g, entropy %.3g / "
              "%.3g; bounds %.2g %.2g %.2g)\n",
              on_policy ? "on-policy" : "off-policy", g.loss.loss, c.loss.loss, g.loss.pg_loss, c.loss.pg_loss,
              g.loss.kl_loss, c.loss.kl_loss, g.loss.entropy_loss, c.loss.entropy_loss, b.pg, b.kl, b.entropy);

  BOOST_TEST(g.loss.valid_tokens == c.loss.valid_tokens);
  BOOST_TEST(g.loss.valid_tokens == D);
  BOOST_TEST(g.loss.valid_seqs == c.loss.valid_seqs);
  BOOST_TEST(g.loss.clipped_tokens == c.loss.clipped_tokens);
  BOOST_TEST(std::isfinite(g.loss.loss));
  BOOST_TEST(std::fabs(g.loss.pg_loss - c.loss.pg_loss) <= b.pg);
  BOOST_TEST(std::fabs(g.loss.kl_loss - c.loss.kl_loss) <= b.kl);
  BOOST_TEST(std::fabs(g.loss.entropy_loss - c.loss.entropy_loss) <= b.entropy);
  BOOST_TEST(std::fabs(g.loss.loss - c.loss.loss) <= b.pg + b.kl + b.entropy);
  BOOST_TEST(std::fabs(g.loss.entropy_sum - c.loss.entropy_sum) <= 5e-2 * double(D));
  BOOST_TEST(c.loss.kl_loss > 0.0);
  BOOST_TEST(c.loss.entropy_loss < 0.0);
  if (on_policy) {
    BOOST_TEST(g.loss.ratio_min == 1.0);
    BOOST_TEST(g.loss.ratio_max == 1.0);
    BOOST_TEST(std::fabs(g.loss.ratio_sum - c.loss.ratio_sum) <= 1e-9 * c.loss.ratio_sum);
  } else {
    // The inputs alone decide token_mult_prob_error.
    BOOST_TEST(std::fabs(g.loss.token_mult_prob_error() - c.loss.token_mult_prob_error()) <= 1e-9);
  }

  const int64_t n = w0.flat.numel();
  const double grad = test::rel_l2(g.exp_avg.f32(), c.exp_avg.f32(), n);
  const double upd = test::rel_l2(update(g.master, w0), update(c.master, w0));
  std::printf("  gradient (exp_avg) relative L2 %.3g, norm gpu %.6g cpu %.6g, update relative L2 %.3g\n", grad,
              g.grad_norm, c.grad_norm, upd);
  BOOST_TEST(c.grad_norm > 0.0);
  BOOST_TEST(std::fabs(g.grad_norm - c.grad_norm) <= 5e-2 * c.grad_norm);
  BOOST_TEST(grad <= 5e-2);
  BOOST_TEST(upd <= 5e-2);
  BOOST_TEST(test::rel_l2(g.master.flat.f32(), c.master.flat.f32(), n) <= 1e-3);
}

}  // namespace

BOOST_AUTO_TEST_SUITE(gpu_policy_engine)

BOOST_AUTO_TEST_CASE(one_step_matches_the_cpu_engine, *boost::unit_test::precondition(test::needs_gpu)) {
  check_step(/*on_policy=*/false);
}

// Exactly on-policy: old = new, detached, on the device (the micro-batches carry no old logprobs).
BOOST_AUTO_TEST_CASE(one_on_policy_step_matches_the_cpu_engine, *boost::unit_test::precondition(test::needs_gpu)) {
  check_step(/*on_policy=*/true);
}

BOOST_AUTO_TEST_SUITE_END()

#endif  // HONE_CUDA
