// Context parallelism on the CPU engine against one rank: the world as one cp group (C = the rank count: 2 under
// make test, 4 when tests/unit/test_grpo_cp.cpp runs this suite under mpirun -np 4), each rank running its chunks
// of the same packed batch with ring attention; the logprobs and entropies of every row within 1e-5 of the whole
// model on one rank, and the gradients summed over the group within 3e-5 relative. Batches: packed sequences of odd
// lengths, sequences shorter than 2C (one token, two, three), one sequence alone, and a long one next to short
// ones; models: Qwen3 (q/k norm, tied), Llama (untied), Qwen2 (biases). Context parallelism with tensor parallelism
// (cp = 2 x tp = 2) runs in tests/unit/test_grpo_cp.cpp under mpirun -np 4.
#include <boost/test/unit_test.hpp>

#include <cmath>
#include <string>

#include "comm/mpi_comm.h"
#include "model/transformer.h"
#include "parallel/context_parallel.h"
#include "unit/transformer_test_util.h"

using namespace hone;

BOOST_AUTO_TEST_SUITE(context_parallel)

namespace {

void check_close(const float* got, const float* want, int64_t n, double tol, const std::string& what) {
  double worst = 0;
  int64_t at = -1;
  for (int64_t i = 0; i < n; ++i) {
    const double err = std::abs(double(got[i]) - double(want[i])) / (1.0 + std::abs(double(want[i])));
    if (!(err <= worst)) worst = err, at = i;  // NaN lands here and fails below
  }
  BOOST_TEST_CONTEXT(what << ": worst relative error " << worst << " at " << at) { BOOST_TEST(worst <= tol); }
}

void run(const ModelConfig& c, const std::vector<int>& lengths, const std::string& name) {
  BOOST_TEST_CONTEXT(name) {
    MpiComm world(MPI_COMM_WORLD, "cp");
    ModelWeights w = allocate_weights(c);
    test::randomize(w, 31);
    PackedBatch batch;
    for (const auto& s : test::random_sequences(lengths, c.vocab_size, 7)) batch.append(s);
    const int T = batch.num_tokens();
    const auto dlp = test::logprob_weights(T), dent = test::entropy_weights(T);

    Transformer one(c, w);
    one.forward(batch, 0.7f, true);
    ModelWeights g_one = allocate_weights(c);
    one.backward(dlp.data(), dent.data(), g_one);

    ContextParallel cp(world);
    Transformer ring(c, w, nullptr, hone::ModelSpan{}, &cp);
    ring.forward(batch, 0.7f, true);
    BOOST_TEST(ring.num_tokens() == T);
    check_close(ring.logprobs(), one.logprobs(), T, 1e-5, "logprob");
    check_close(ring.entropy(), one.entropy(), T, 1e-5, "entropy");
    ModelWeights g_ring = allocate_weights(c);
    ring.backward(dlp.data(), dent.data(), g_ring);
    world.all_reduce_sum(g_ring.flat.f32(), g_ring.flat.numel());  // each rank's share: the optimizer sums them
    // The gradients are sums over the tokens, formed per rank and then over the ranks: fp32 rounding in another
    // order, and in OpenBLAS's kernels, which it picks by the CPU. With four ranks the norm weights' sums (many terms
    // of both signs) reach 1.2e-5; with two on an AMD EPYC host the 29-token Qwen3 batch's v_proj gradient 1.17e-5.
    const double tol = 3e-5;
    const auto got = g_ring.named_parameters(), want = g_one.named_parameters();
    for (size_t i = 0; i < got.size(); ++i)
      check_close(got[i].second.f32(), want[i].second.f32(), got[i].second.numel(), tol,
                  "gradient of " + got[i].first);
  }
}

}  // namespace

BOOST_AUTO_TEST_CASE(packed_odd_lengths) {
  run(test::tiny_config(Architecture::qwen3, true), {7, 5, 9}, "qwen3, lengths 7 5 9");
  run(test::tiny_config(Architecture::llama, false), {11, 3, 6}, "llama, lengths 11 3 6");
  run(test::tiny_config(Architecture::qwen2, false), {13, 4}, "qwen2, lengths 13 4");
}

BOOST_AUTO_TEST_CASE(sequences_shorter_than_2c_chunks) {
  run(test::tiny_config(Architecture::qwen3, true), {1, 2, 3}, "qwen3, lengths 1 2 3");
  run(test::tiny_config(Architecture::qwen3, true), {2}, "qwen3, one sequence of 2");
  run(test::tiny_config(Architecture::llama, false), {1, 17, 2}, "llama, a long sequence between short ones");
}

BOOST_AUTO_TEST_CASE(one_long_sequence) { run(test::tiny_config(Architecture::qwen3, true), {29}, "qwen3, 29 tokens"); }

// The same model and batch twice on one Transformer: the second forward reuses the arenas and the ring's buffers.
BOOST_AUTO_TEST_CASE(second_batch_on_the_same_model) {
  MpiComm world(MPI_COMM_WORLD, "cp");
  const ModelConfig c = test::tiny_config(Architecture::qwen3, true);
  ModelWeights w = allocate_weights(c);
  test::randomize(w, 5);
  ContextParallel cp(world);
  Transformer ring(c, w, nullptr, hone::ModelSpan{}, &cp), one(c, w);
  for (const std::vector<int>& lengths : {std::vector<int>{9, 4}, std::vector<int>{3, 3, 3, 3, 3}}) {
    PackedBatch batch;
    for (const auto& s : test::random_sequences(lengths, c.vocab_size, 3)) batch.append(s);
    one.forward(batch, 1.f, false);
    ring.forward(batch, 1.f, false);
    check_close(ring.logprobs(), one.logprobs(), batch.num_tokens(), 1e-5, "logprob");
  }
}

BOOST_AUTO_TEST_SUITE_END()
