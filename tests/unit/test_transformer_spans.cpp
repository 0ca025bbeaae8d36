// A model cut into spans (model/model_span.h), run one after the other in one process as pipeline chunks would be:
// the hidden state handed on, the output's gradient handed back. Logprobs, entropies and every gradient equal the
// whole model's bitwise (the same ops in the same order), with the tied embedding's gradient split over the first
// and last span's copies; the same under activation recompute and with an empty middle span.
#include <boost/test/unit_test.hpp>

#include <vector>

#include "model/transformer.h"
#include "parallel/pipeline_layout.h"
#include "parallel/shard_layout.h"
#include "parallel/shard_weights.h"
#include "transformer_test_util.h"

using namespace hone;

namespace {

void check_chain(const ModelConfig& c, const std::vector<int64_t>& chunk_layers, bool recompute) {
  ModelWeights whole = allocate_weights(c);
  test::randomize(whole, 11);
  PackedBatch batch;
  for (const auto& s : test::random_sequences({6, 9, 4}, c.vocab_size, 3)) batch.append(s);
  const int T = batch.num_tokens();
  const auto dlp = test::logprob_weights(T), dent = test::entropy_weights(T);

  Transformer one(c, whole);
  one.set_recompute(recompute);
  one.forward(batch, 0.9f, true);
  ModelWeights g_one = allocate_weights(c);
  one.backward(dlp.data(), dent.data(), g_one);

  const int P = int(chunk_layers.size());
  const PipelineLayout pipe = PipelineLayout::of(c.num_hidden_layers, P, 1, chunk_layers);
  std::vector<ShardLayout> layouts;
  std::vector<ModelWeights> w, g;
  std::vector<std::unique_ptr<Transformer>> spans;
  for (int s = 0; s < P; ++s) {
    layouts.push_back(ShardLayout::of(c, 1, 0, &pipe, s));
    w.push_back(allocate_shard_weights(layouts.back(), c));
    extract_shard(layouts.back(), whole, w.back());
    g.push_back(allocate_shard_weights(layouts.back(), c));
  }
  for (int s = 0; s < P; ++s) {
    spans.push_back(std::make_unique<Transformer>(
        c, w[size_t(s)], nullptr, ModelSpan{pipe.layer_begin(s), pipe.layer_end(s), s == 0, s == P - 1}));
    spans.back()->set_recompute(recompute);
  }
  const float* h = nullptr;
  for (int s = 0; s < P; ++s) {
    spans[size_t(s)]->forward(batch, 0.9f, true, true, h);
    if (s + 1 < P) h = spans[size_t(s)]->output();
  }
  const Transformer& last = *spans.back();
  BOOST_TEST(std::vector<float>(last.logprobs(), last.logprobs() + T) ==
             std::vector<float>(one.logprobs(), one.logprobs() + T));
  BOOST_TEST(std::vector<float>(last.entropy(), last.entropy() + T) ==
             std::vector<float>(one.entropy(), one.entropy() + T));
  const float* dh = nullptr;
  for (int s = P - 1; s >= 0; --s) {
    if (s == P - 1) spans[size_t(s)]->backward(dlp.data(), dent.data(), g[size_t(s)]);
    else spans[size_t(s)]->backward(nullptr, nullptr, g[size_t(s)], dh);
    if (s > 0) dh = spans[size_t(s)]->input_grad();
  }
  // Every parameter's gradient from the stage holding it; the tied embedding's two copies summed.
  for (const ParamSpec& spec : param_table(c)) {
    std::vector<float> sum(size_t(spec.numel()), 0.f);
    int holders = 0;
    for (int s = 0; s < P; ++s) {
      const ParamShard* p = layouts[size_t(s)].try_find(spec.name);
      if (!p) continue;
      ++holders;
      const float* x = g[size_t(s)].flat.f32() + p->offset;
      for (size_t i = 0; i < sum.size(); ++i) sum[i] += x[i];
    }
    BOOST_TEST(holders == (c.tie_word_embeddings && spec.layer < 0 && spec.global == GlobalParam::embed_tokens ? 2 : 1));
    const float* want = g_one.param(spec).f32();
    if (holders == 1) BOOST_TEST(sum == std::vector<float>(want, want + spec.numel()), spec.name);
    else  // the two uses' gradients, summed in another order than the whole model sums them
      for (size_t i = 0; i < sum.size(); ++i) BOOST_TEST(std::abs(sum[i] - want[i]) <= 1e-6f * (1 + std::abs(want[i])));
  }
}

}  // namespace

BOOST_AUTO_TEST_SUITE(transformer_spans)

BOOST_AUTO_TEST_CASE(two_spans_equal_the_whole_model_tied) {
  ModelConfig c = test::tiny_config(Architecture::qwen3, true);
  c.num_hidden_layers = 4;
  check_chain(c, {2, 2}, false);
}

BOOST_AUTO_TEST_CASE(three_uneven_spans_untied_with_recompute) {
  ModelConfig c = test::tiny_config(Architecture::llama, false);
  c.num_hidden_layers = 4;
  check_chain(c, {1, 3, 0}, true);
}

BOOST_AUTO_TEST_SUITE_END()
