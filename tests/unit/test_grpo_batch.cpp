// Micro-batches of the GRPO loop: completion tokens land on the rows that predict them, prompts are never
// targets, the loss mask follows GrpoSample::trained; and the loop's settings checks.
#include <boost/test/unit_test.hpp>

#include "config/config.h"
#include "rl/grpo_batch.h"
#include "rl/grpo_settings.h"
#include "runtime/error.h"

using namespace hone;
using namespace hone::rl;

namespace {

GrpoSample sample(std::vector<int32_t> prompt, std::vector<int32_t> completion, float adv, bool trained = true) {
  GrpoSample s;
  s.rollout.prompt = std::move(prompt);
  s.rollout.completion = std::move(completion);
  for (size_t j = 0; j < s.rollout.completion.size(); ++j) s.rollout.logprobs.push_back(-0.5f - float(j));
  s.advantage = adv;
  s.trained = trained;
  return s;
}

}  // namespace

BOOST_AUTO_TEST_SUITE(grpo_batch)

BOOST_AUTO_TEST_CASE(completion_tokens_are_predicted_from_the_row_before) {
  std::vector<GrpoSample> s = {sample({10, 11, 12}, {20, 21}, 1.5f), sample({30}, {40, 41, 42}, -0.5f, false)};
  MicroBatch mb = build_micro_batch(s, {0, 1});
  // Sequence 0: rows 0..4 = 10 11 12 20 21; sequence 1: rows 5..8 = 30 40 41 42.
  BOOST_TEST(mb.batch.tokens == (std::vector<int32_t>{10, 11, 12, 20, 21, 30, 40, 41, 42}), boost::test_tools::per_element());
  BOOST_TEST(mb.batch.targets == (std::vector<int32_t>{-1, -1, 20, 21, -1, 40, 41, 42, -1}), boost::test_tools::per_element());
  BOOST_TEST(mb.mask == (std::vector<uint8_t>{0, 0, 1, 1, 0, 0, 0, 0, 0}), boost::test_tools::per_element());
  BOOST_TEST(mb.gen[2] == -0.5f);
  BOOST_TEST(mb.gen[3] == -1.5f);
  BOOST_TEST(mb.gen[7] == -2.5f);  // recorded even where the mask is 0
  BOOST_TEST(mb.old == std::vector<float>(9, 0.f), boost::test_tools::per_element());  // until the logprob phase
  BOOST_TEST(mb.seq_offsets == (std::vector<int64_t>{0, 5, 9}), boost::test_tools::per_element());
  BOOST_TEST(mb.advantages == (std::vector<float>{1.5f, -0.5f}), boost::test_tools::per_element());
  // Reading per-row values back per completion token.
  std::vector<float> rows(9);
  for (int t = 0; t < 9; ++t) rows[size_t(t)] = float(t);
  BOOST_TEST(completion_values(mb, 0, rows.data(), s) == (std::vector<float>{2.f, 3.f}), boost::test_tools::per_element());
  BOOST_TEST(completion_values(mb, 1, rows.data(), s) == (std::vector<float>{5.f, 6.f, 7.f}), boost::test_tools::per_element());
}

BOOST_AUTO_TEST_CASE(packing_respects_the_budget_and_keeps_every_sample) {
  std::vector<GrpoSample> s;
  for (int i = 0; i < 7; ++i) s.push_back(sample(std::vector<int32_t>(size_t(2 + i), 7), std::vector<int32_t>(3, 8), 0.f));
  Packing p;
  const auto bins = pack_samples(s, {0, 1, 2, 3, 4, 5, 6}, 16, &p);
  std::vector<int> seen(7, 0);
  for (const auto& b : bins) {
    int64_t tokens = 0;
    for (int64_t i : b) tokens += s[size_t(i)].length(), ++seen[size_t(i)];
    BOOST_TEST(tokens <= 16);
  }
  for (int n : seen) BOOST_TEST(n == 1);
  BOOST_TEST(p.efficiency() > 0.5);
}

BOOST_AUTO_TEST_CASE(settings_check_batch_sizes_against_the_rank_count) {
  Config c = load_config_from_string("[model]\nhidden_size = 8\nintermediate_size = 8\nnum_layers = 1\nnum_attention_heads = 2\n"
                                     "[tokenizer]\nkind = \"chars\"\n[data]\ntask = \"reverse\"\n"
                                     "[grpo]\nnum_prompts_per_step = 6\nnum_generations_per_prompt = 4\n"
                                     "[generation]\nmax_new_tokens = 4\nmax_total_sequence_length = 32\n"
                                     "[train]\nglobal_batch_size = 12\n",
                                     "deck.toml");
  const GrpoSettings s = read_grpo_settings(c, 2);
  BOOST_TEST(s.optimizer_steps_per_step() == 2);
  BOOST_TEST(!s.skip_prev_logprobs());  // two optimizer steps: the previous-policy pass runs
  BOOST_TEST(s.lr.decay_steps == 100 * 2);
  BOOST_CHECK_THROW(read_grpo_settings(c, 4), UserError);  // 6 prompts over 4 ranks
  c.set("train.global_batch_size", DeckValue(int64_t(5)), {});
  BOOST_CHECK_THROW(read_grpo_settings(c, 1), UserError);  // 24 rollouts in batches of 5
  c.set("train.global_batch_size", DeckValue(int64_t(0)), {});
  BOOST_TEST(read_grpo_settings(c, 1).skip_prev_logprobs());
  // The rank grid: dp follows from the rank count and parallel.tp; the rank count must be a multiple of tp.
  const RankGrid g = read_rank_grid(c, 4);
  BOOST_TEST(g.dp() == 4);
  BOOST_TEST(g.tp() == 1);
  c.set("parallel.tp", DeckValue(int64_t(2)), {});
  const RankGrid g2 = read_rank_grid(c, 4);
  BOOST_TEST(g2.dp() == 2);
  BOOST_TEST(g2.tp() == 2);
  auto refused = [&](int world, const std::string& what) {
    try {
      read_rank_grid(c, world);
      BOOST_FAIL("grid accepted");
    } catch (const UserError& e) {
      BOOST_TEST(std::string(e.what()).find(what) != std::string::npos, e.what());
    }
  };
  refused(3, "parallel.tp");
  // Pipeline parallelism: the model's layers must split over the stages (checked first, whatever the rank count),
  // and the rank count must be a multiple of tp x pp.
  c.set("parallel.pp", DeckValue(int64_t(2)), {});
  refused(4, "cannot be split evenly over 2 pipeline chunks");
  c.set("model.num_layers", DeckValue(int64_t(4)), {});
  const RankGrid g3 = read_rank_grid(c, 4);
  BOOST_TEST(g3.pp() == 2);
  BOOST_TEST(g3.dp() == 1);
  refused(6, "parallel.tp * parallel.pp");
}

BOOST_AUTO_TEST_SUITE_END()
