// The CPU engine's logprob passes through the learner and scorer roles (roles/rank_roles.h): each batch's values go
// straight into the caller's buffers (resized to the batch, 0 where no token is predicted), an empty entry is a pass
// whose values are not wanted, and they equal the transformer's own forward on the same weights.
#include <boost/test/unit_test.hpp>

#include <cmath>
#include <vector>

#include "comm/parallel_state.h"
#include "model/transformer.h"
#include "roles/rank_roles.h"
#include "unit/transformer_test_util.h"

using namespace hone;

BOOST_AUTO_TEST_SUITE(role_engine)

BOOST_AUTO_TEST_CASE(logprob_passes_write_the_callers_buffers) {
  const ModelConfig c = test::tiny_config(Architecture::qwen3, false);
  ModelWeights w = allocate_weights(c);
  test::randomize(w, 53);
  rl::GrpoSettings s;
  s.loss.kl_coef = 0.05;  // a reference model for the scorer
  const ParallelState ps(RankGrid(1, 1, 1));
  auto engine = rl::make_engine<CpuBackend>(s, c, w, ps);
  engine->connect(w);

  PackedBatch a = PackedBatch::pack(test::random_sequences({7, 4}, c.vocab_size, 8));
  const PackedBatch b = PackedBatch::pack(test::random_sequences({9}, c.vocab_size, 9));
  a.targets[2] = -1;  // a row that predicts nothing
  const float T = 0.7f;
  Transformer m(c, w);
  m.forward(a, T, false, false);
  const std::vector<float> want(m.logprobs(), m.logprobs() + a.num_tokens());

  std::vector<float> old(3, 42.f), ref;
  engine->policy_logprobs({&a, &b}, T, {}, {&old, nullptr});
  engine->reference_logprobs({&a}, T, {}, {&ref});
  BOOST_TEST_REQUIRE(old.size() == size_t(a.num_tokens()));
  BOOST_TEST_REQUIRE(ref.size() == size_t(a.num_tokens()));
  for (int t = 0; t < a.num_tokens(); ++t) {
    BOOST_TEST_INFO("row " << t);
    BOOST_TEST(old[size_t(t)] == want[size_t(t)]);
    BOOST_TEST(ref[size_t(t)] == want[size_t(t)]);  // the reference starts as the policy
    if (a.targets[size_t(t)] < 0) BOOST_TEST(old[size_t(t)] == 0.f);
    else BOOST_TEST(old[size_t(t)] < 0.f);
  }
}

BOOST_AUTO_TEST_SUITE_END()
