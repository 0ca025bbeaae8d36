// The GPU generator between GRPO steps (generation.keep_graphs): release() gives the KV cache's and buffers' memory
// back to the device but keeps their addresses and the decode graphs, so the next generate() with the same seed
// gives the same rollouts and captures nothing; buffers that must grow, keep_graphs off, and a device without room
// for the kept cache any more all fall back to allocating and capturing anew, with the same rollouts.
// "Same rollouts": the same tokens and finish reasons for every sequence, and logprobs within 1e-4 (the sampler
// accumulates its shared-memory histograms with float atomics, so a logprob may differ in its last bits).
#include <boost/test/unit_test.hpp>

#include "common/gpu.h"

#if HONE_CUDA

#include <algorithm>
#include <cmath>
#include <random>

#include "cuda/device_memory.h"
#include "generation/generation_forward.h"
#include "generation/generator.h"
#include "gpu_transformer_test_util.h"
#include "model/transformer.h"

namespace {

// A tiny untied qwen3 model whose logits spread widely (few near ties), as in test_gpu_generator.cpp.
struct KeepModel {
  hone::ModelConfig c;
  hone::ModelWeights w;
  test::ScopedGpuContext g;
  std::unique_ptr<hone::GpuTransformer> gpu;

  explicit KeepModel(uint64_t seed) : c(test::gpu_tiny_config(hone::Architecture::qwen3, false)) {
    w = test::gpu_test_weights(c, seed, 0.08f);
    float* lm = w.lm_head.f32();
    for (int64_t i = 0; i < w.lm_head.numel(); ++i) lm[i] = test::bf16_round(lm[i] * 5.f);
    gpu = std::make_unique<hone::GpuTransformer>(c, hone::ParamLayout::of(c), g.ctx, 512);
    gpu->upload_weights(w);
  }
  std::unique_ptr<hone::Generator<hone::CudaBackend>> generator(const hone::GenerationOptions& o) {
    return std::make_unique<hone::Generator<hone::CudaBackend>>(c, hone::ParamLayout::of(c), gpu->weights(), g.ctx, o);
  }
};

// Groups of G samples of random prompts (GRPO's request order).
std::vector<hone::GenerationRequest> requests(int prompts, int G, int vocab, uint32_t seed) {
  std::mt19937 rng(seed);
  std::vector<std::vector<int32_t>> p(static_cast<size_t>(prompts));
  for (auto& x : p) {
    x.resize(size_t(std::uniform_int_distribution<int>(3, 50)(rng)));
    for (auto& t : x) t = std::uniform_int_distribution<int>(0, vocab - 1)(rng);
  }
  return hone::group_requests(p, G, 100);
}

hone::StopCriteria stops(int max_new) {
  hone::StopCriteria s;
  s.max_new_tokens = max_new;
  s.stop_token_ids = {7, 11};  // sequences end at different steps: the decode batch walks down the buckets
  return s;
}

hone::GenerationOptions options() {
  hone::GenerationOptions o;
  o.kv_cache_gib = 0.05;
  o.max_num_seqs = 24;  // buckets 1, 2, 4, 8, 16, 24
  return o;
}

void check_same(const std::vector<hone::Rollout>& a, const std::vector<hone::Rollout>& b, const char* what) {
  BOOST_REQUIRE(a.size() == b.size());
  double max_diff = 0;
  int same = 0;
  for (size_t i = 0; i < a.size(); ++i) {
    BOOST_TEST((a[i].finish_reason != hone::FinishReason::none));
    const bool eq = a[i].completion == b[i].completion && a[i].finish_reason == b[i].finish_reason;
    same += eq;
    BOOST_TEST(eq, what << ": sequence " << i << " differs");
    if (!eq) continue;
    for (size_t j = 0; j < a[i].logprobs.size(); ++j)
      max_diff = std::max(max_diff, double(std::fabs(a[i].logprobs[j] - b[i].logprobs[j])));
  }
  BOOST_TEST_MESSAGE(what << ": " << same << " of " << a.size() << " sequences identical, logprob diff " << max_diff);
  BOOST_TEST(max_diff < 1e-4, what);
}

}  // namespace

BOOST_AUTO_TEST_SUITE(gpu_generator_keep)

BOOST_AUTO_TEST_CASE(release_keeps_the_graphs_and_the_next_call_captures_nothing,
                     *boost::unit_test::precondition(test::needs_gpu)) {
  KeepModel m(41);
  const auto req = requests(10, 5, m.c.vocab_size, 6);
  hone::SamplingParams sp;
  const hone::StopCriteria st = stops(30);
  auto gen = m.generator(options());
  const auto a = gen->generate(req, sp, st, 4, 8, 256);
  const hone::GenerationStats first = gen->stats();
  BOOST_TEST(first.cuda_graph_captures > 1);  // several buckets
  BOOST_TEST(first.cuda_graph_replays > 0);
  // A bucket's first step runs eagerly and is captured; every later one is a replay.
  BOOST_TEST(first.decode_steps == first.cuda_graph_replays + first.cuda_graph_captures);
  for (int round = 0; round < 3; ++round) {
    gen->release();
    const auto b = gen->generate(req, sp, st, 4, 8, 256);
    check_same(a, b, "after a kept release");
    BOOST_TEST(gen->stats().cuda_graph_captures == 0, "round " << round);
    // Every decode step is a replay now, the first of each bucket included.
    BOOST_TEST(gen->stats().decode_steps == first.decode_steps);
    BOOST_TEST(gen->stats().cuda_graph_replays == gen->stats().decode_steps);
    BOOST_TEST(gen->stats().kv_capacity_tokens == first.kv_capacity_tokens);
  }
  // Other seeds and steps through the kept graphs: the same rollouts as a fresh generator's.
  gen->release();
  const auto c = gen->generate(req, sp, st, 77, 3, 256);
  BOOST_TEST(gen->stats().cuda_graph_captures == 0);
  auto fresh = m.generator(options());
  const auto d = fresh->generate(req, sp, st, 77, 3, 256);
  BOOST_TEST(fresh->stats().cuda_graph_captures > 0);
  check_same(d, c, "kept graphs against a fresh generator");
  // Refit in place while released: the kept graphs read the new weights.
  gen->release();
  m.gpu->upload_weights(test::gpu_test_weights(m.c, 99, 0.08f));
  const auto e = gen->generate(req, sp, st, 77, 3, 256);
  auto fresh2 = m.generator(options());
  check_same(fresh2->generate(req, sp, st, 77, 3, 256), e, "kept graphs after a refit");
}

BOOST_AUTO_TEST_CASE(without_keep_graphs_every_call_captures_again, *boost::unit_test::precondition(test::needs_gpu)) {
  KeepModel m(42);
  const auto req = requests(10, 5, m.c.vocab_size, 7);
  hone::SamplingParams sp;
  const hone::StopCriteria st = stops(30);
  hone::GenerationOptions o = options();
  o.keep_graphs = false;
  auto gen = m.generator(o);
  const auto a = gen->generate(req, sp, st, 5, 1, 256);
  const int64_t captures = gen->stats().cuda_graph_captures;
  BOOST_TEST(captures > 0);
  gen->release();
  const auto b = gen->generate(req, sp, st, 5, 1, 256);
  BOOST_TEST(gen->stats().cuda_graph_captures == captures);
  check_same(a, b, "keep_graphs off, after release");
  // Without a release in between the graphs stay either way.
  const auto c = gen->generate(req, sp, st, 5, 1, 256);
  BOOST_TEST(gen->stats().cuda_graph_captures == 0);
  check_same(a, c, "keep_graphs off, no release");
}

BOOST_AUTO_TEST_CASE(larger_buffers_capture_again, *boost::unit_test::precondition(test::needs_gpu)) {
  KeepModel m(43);
  const auto req = requests(10, 5, m.c.vocab_size, 8);
  hone::SamplingParams sp;
  auto gen = m.generator(options());
  gen->generate(req, sp, stops(30), 6, 1, 256);  // block tables of (50 + 30) / 16 = 5 blocks
  gen->release();
  // Longer completions: wider block tables, so the buffers (and the graphs that read them) are made anew.
  const hone::StopCriteria longer = stops(150);
  const auto a = gen->generate(req, sp, longer, 6, 2, 256);
  BOOST_TEST(gen->stats().cuda_graph_captures > 0);
  auto fresh = m.generator(options());
  check_same(fresh->generate(req, sp, longer, 6, 2, 256), a, "after the buffers grew");
  // And those are kept in turn.
  gen->release();
  const auto b = gen->generate(req, sp, longer, 6, 2, 256);
  BOOST_TEST(gen->stats().cuda_graph_captures == 0);
  check_same(a, b, "after the buffers grew, kept");
}

// The cache sized by kv_cache_memory_fraction: a kept release() gives its memory to whoever needs it (training);
// when the device has no room for it at the next generate(), it is sized anew from what is free then.
BOOST_AUTO_TEST_CASE(released_memory_goes_back_and_no_room_sizes_anew,
                     *boost::unit_test::precondition(test::needs_gpu)) {
  KeepModel m(44);
  const auto req = requests(10, 5, m.c.vocab_size, 9);
  hone::SamplingParams sp;
  const hone::StopCriteria st = stops(30);
  hone::GenerationOptions o = options();
  o.kv_cache_gib = 0;
  o.kv_cache_memory_fraction = 0.02;  // about 1.6 GB on an 80 GB GPU
  auto gen = m.generator(o);
  const auto a = gen->generate(req, sp, st, 7, 1, 256);
  const int64_t capacity = gen->stats().kv_capacity_tokens;
  const double cache_bytes = double(capacity) / 16.0 * double(hone::GenerationForward<hone::CudaBackend>::block_bytes(
                                                                   m.c, 16, m.c.num_key_value_heads));
  const size_t used_generating = hone::cuda::device_memory_info().used_bytes();
  gen->release();
  const size_t used_released = hone::cuda::device_memory_info().used_bytes();
  BOOST_TEST_MESSAGE("KV cache " << cache_bytes / 1e9 << " GB; device memory in use " << used_generating / 1e9
                                 << " GB generating, " << used_released / 1e9 << " GB released");
  BOOST_TEST(double(used_released) + 0.9 * cache_bytes < double(used_generating));

  // Back at the same size while there is room.
  const auto b = gen->generate(req, sp, st, 7, 1, 256);
  BOOST_TEST(gen->stats().cuda_graph_captures == 0);
  BOOST_TEST(gen->stats().kv_capacity_tokens == capacity);
  check_same(a, b, "kept cache");
  gen->release();

  // Someone else takes most of the device: the kept cache no longer fits, a smaller one is sized from what is free.
  const size_t free_now = hone::cuda::device_memory_info().free_bytes;
  const size_t leave = size_t(768) << 20;
  BOOST_REQUIRE(free_now > leave + (size_t(1) << 30));
  hone::DeviceArray<char> hog(int64_t(free_now - leave), "the rest of the device");
  const auto c = gen->generate(req, sp, st, 7, 1, 256);
  BOOST_TEST(gen->stats().kv_capacity_tokens < capacity);
  BOOST_TEST(gen->stats().preemptions == 0);  // still room for every sequence at once: the same schedule
  BOOST_TEST(gen->stats().cuda_graph_captures > 0);
  check_same(a, c, "cache sized anew");
}

BOOST_AUTO_TEST_SUITE_END()

#endif  // HONE_CUDA
