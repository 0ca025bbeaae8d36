// The per-rank device memory count of `hone run` on the GPU: the optimizer state it keeps (whole or a 1/dp shard),
// which phase is the larger, and a refusal that names the numbers and the keys that make the run fit. The numbers
// are those of the Llama-3.1-8B shape on 141 GB GPUs (input/bench-grpo-llama-3.1-8b.toml). Under tensor
// parallelism the counts are those of a rank's shard, and a run that tp could fit is told so.
#include <boost/test/unit_test.hpp>

#include <string>

#include "app/bench_args.h"
#include "model/model_config.h"
#include "parallel/pipeline_layout.h"
#include "rl/device_memory_plan.h"
#include "runtime/error.h"

namespace {

constexpr double GiB = double(int64_t(1) << 30);

hone::rl::DeviceMemoryPlan llama_8b(int dp, bool distributed) {
  hone::rl::DeviceMemoryPlan p;
  p.num_params = 8030261248;
  p.dp = dp;
  p.distributed = distributed;
  p.activations = 20 * GiB;
  p.microbatch_tokens = 4096;
  p.kv_cache = 34 * GiB;
  return p;
}

// The Llama-3.1-8B shape (config.json of meta-llama/Llama-3.1-8B).
hone::ModelConfig llama_8b_shape() {
  hone::ModelConfig c;
  c.arch = hone::Architecture::llama;
  c.vocab_size = 128256;
  c.hidden_size = 4096;
  c.intermediate_size = 14336;
  c.num_hidden_layers = 32;
  c.num_attention_heads = 32;
  c.num_key_value_heads = 8;
  c.head_dim = 128;
  c.max_position_embeddings = 131072;
  c.rope.head_dim = 128;
  return c;
}

bool has(const std::string& s, const std::string& part) { return s.find(part) != std::string::npos; }

// An H200 (143,771 MiB) less a bf16 policy and a bf16 reference (2 x 16.06 GB) and the CUDA context.
const double free_after_weights = 143771.0 * (1 << 20) - 2 * 2.0 * 8030261248.0 - 0.6 * GiB;

}  // namespace

BOOST_AUTO_TEST_SUITE(device_memory_plan)

BOOST_AUTO_TEST_CASE(the_distributed_optimizer_keeps_a_shard) {
  hone::rl::DeviceMemoryPlan p;
  p.num_params = 10;
  BOOST_TEST(p.optimizer_state() == 120.0);
  p.dp = 3;
  BOOST_TEST(p.optimizer_state() == 120.0);  // plain: whole on every rank
  p.distributed = true;
  BOOST_TEST(p.optimizer_state() == 48.0);   // ceil(10 / 3) = 4 parameters x 12 bytes
  BOOST_TEST(p.gradients() == 40.0);          // gradients stay whole (reduce-scatter reads all of them)
  p.kv_cache = 100;
  BOOST_TEST(p.generation() == 148.0);
  p.offload = true;
  BOOST_TEST(p.generation() == 116.0);        // the moments wait on the host; the master weights stay
}

BOOST_AUTO_TEST_CASE(llama_8b_fits_two_gpus_with_the_distributed_optimizer) {
  const auto p = llama_8b(2, true);
  BOOST_TEST(p.training() > p.generation());
  BOOST_TEST(device_memory_refusal(p, free_after_weights).empty());
}

BOOST_AUTO_TEST_CASE(llama_8b_without_it_is_refused_naming_the_key) {
  const std::string m = device_memory_refusal(llama_8b(2, false), free_after_weights);
  BOOST_TEST_INFO(m);
  BOOST_TEST(has(m, "train.distributed_optimizer = true (shards"));
  BOOST_TEST(has(m, "89.7 GiB for the fp32 master weights and Adam moments, whole on every rank"));
  BOOST_TEST(has(m, "29.9 GiB of fp32 gradients"));
  BOOST_TEST(has(m, "4096-token micro-batch"));
  BOOST_TEST(has(m, "train.recompute = \"selective\""));
}

BOOST_AUTO_TEST_CASE(llama_8b_on_one_gpu_is_refused_even_when_distributed) {
  const std::string m1 = device_memory_refusal(llama_8b(1, false), free_after_weights);
  BOOST_TEST_INFO(m1);
  BOOST_TEST(has(m1, "more GPUs with train.distributed_optimizer = true"));
  const std::string m4 = device_memory_refusal(llama_8b(4, true), 30 * GiB);
  BOOST_TEST_INFO(m4);
  BOOST_TEST(has(m4, "this rank's 1/4 shard"));
  BOOST_TEST(has(m4, "more GPUs"));
}

BOOST_AUTO_TEST_CASE(a_kv_cache_too_large_names_the_generation_keys) {
  auto p = llama_8b(2, true);
  p.kv_cache = 120 * GiB;
  BOOST_TEST(p.generation() > p.training());
  const std::string m = device_memory_refusal(p, free_after_weights);
  BOOST_TEST_INFO(m);
  BOOST_TEST(has(m, "generation.kv_cache_gib"));
  BOOST_TEST(has(m, "train.optimizer_offload = true"));
  p.offload = true;
  BOOST_TEST(!has(device_memory_refusal(p, free_after_weights), "train.optimizer_offload"));
}

BOOST_AUTO_TEST_CASE(tensor_parallel_counts_the_shard) {
  const hone::ModelConfig c = llama_8b_shape();
  hone::rl::DeviceMemoryPlan p;
  set_tensor_parallel(p, c, 1);
  BOOST_TEST(p.num_params == 8030261248);
  BOOST_TEST(p.next_tp == 2);
  set_tensor_parallel(p, c, 2);
  // Everything split in two but the replicated norms (65 x 4096 weights).
  BOOST_TEST(p.num_params == (8030261248 - 65 * 4096) / 2 + 65 * 4096);
  BOOST_TEST(p.next_tp == 4);
  set_tensor_parallel(p, c, 8);  // 16 would divide the model, but a tp group stays inside a node
  BOOST_TEST(p.next_tp == 0);
  BOOST_CHECK_THROW(set_tensor_parallel(p, c, 3), hone::UserError);
}

BOOST_AUTO_TEST_CASE(a_run_refused_at_tp_1_fits_at_tp_2) {
  // One H200 per rank, no data parallelism, no reference model: the bf16 weights of the shard and the CUDA
  // context come off the device before the plan is counted.
  const hone::ModelConfig c = llama_8b_shape();
  auto plan_at = [&](int tp) {
    auto p = llama_8b(1, false);
    p.kv_cache = 0;
    set_tensor_parallel(p, c, tp);
    return p;
  };
  auto free_at = [](const hone::rl::DeviceMemoryPlan& p) { return 143771.0 * (1 << 20) - 2.0 * double(p.num_params) - 0.6 * GiB; };

  const auto one = plan_at(1);
  const std::string m = device_memory_refusal(one, free_at(one));
  BOOST_TEST_INFO(m);
  BOOST_TEST(has(m, "89.7 GiB for the fp32 master weights and Adam moments, whole on every rank"));
  BOOST_TEST(has(m, "parallel.tp = 2 (splits the weights, gradients and optimizer state over 2 GPUs"));

  const auto two = plan_at(2);
  BOOST_TEST(two.optimizer_state() < 0.51 * one.optimizer_state());
  BOOST_TEST(two.gradients() < 0.51 * one.gradients());
  BOOST_TEST(device_memory_refusal(two, free_at(two)).empty());

  // Refused at tp = 2 on a smaller device: the message speaks of the shard and offers tp = 4.
  const std::string m2 = device_memory_refusal(two, 40 * GiB);
  BOOST_TEST_INFO(m2);
  BOOST_TEST(has(m2, "of this rank's 1/2 tensor-parallel shard (4015263744 parameters)"));
  BOOST_TEST(has(m2, "parallel.tp = 4"));
}

BOOST_AUTO_TEST_CASE(a_model_that_allows_no_larger_tp_is_not_offered_one) {
  hone::ModelConfig c = llama_8b_shape();
  c.num_attention_heads = 6;  // divisible by 1, 2, 3, 6; the intermediate size 14336 rules out 3 and 6
  c.num_key_value_heads = 2;
  hone::rl::DeviceMemoryPlan p;
  p.activations = 1;
  set_tensor_parallel(p, c, 2);
  BOOST_TEST(p.next_tp == 0);
  BOOST_TEST(!has(device_memory_refusal(p, 1.0), "parallel.tp"));
}

// A long sequence of the Qwen3-1.7B shape on one 80 GB GPU: 2,031,739,904 parameters (31 GiB of optimizer state and
// gradients); per token of activations (illustrative counts of the planner's arithmetic, not measurements): none
// 2.2 MB, selective 1.6 MB, full 0.2 MB. At 32k tokens only full fits, and the refusal names it as the cheapest
// change; at 24k selective does; at 256k nothing on one GPU does, and context parallelism is the cheapest change.
BOOST_AUTO_TEST_CASE(a_long_sequence_names_the_cheapest_recompute_that_fits) {
  hone::rl::DeviceMemoryPlan p;
  p.num_params = 2031739904;
  const double MB = 1e6;
  const double free_b = 76 * GiB;
  auto plan_for = [&](int64_t tokens, int cp) {
    p.microbatch_tokens = tokens;
    p.cp = cp;
    const int64_t local = 2 * ((tokens + 2 * cp - 1) / (2 * cp));
    p.set_activations({2.2 * MB * double(local), 1.6 * MB * double(local), 0.2 * MB * double(local)}, local);
    return device_memory_refusal(p, free_b);
  };
  const std::string m32 = plan_for(32768, 1);
  BOOST_TEST_INFO(m32);
  BOOST_TEST(has(m32, "To fit: train.recompute = \"full\" (reruns each layer's forward in backward), the cheapest"));
  BOOST_TEST(has(m32, "with train.recompute = \"none\""));
  BOOST_TEST(has(m32, "parallel.cp = 2"));
  const std::string m24 = plan_for(24576, 1);
  BOOST_TEST_INFO(m24);
  BOOST_TEST(has(m24, "To fit: train.recompute = \"selective\""));
  BOOST_TEST(plan_for(16384, 1).empty());
  p.recompute = hone::Recompute::full;
  BOOST_TEST(plan_for(32768, 1).empty());
  const std::string m128 = plan_for(262144, 1);
  BOOST_TEST_INFO(m128);
  BOOST_TEST(has(m128, "To fit: parallel.cp = 2 (splits each sequence's activations over 2 GPUs), the cheapest"));
  BOOST_TEST(!has(m128, "train.recompute = \"selective\""));  // nothing beyond full to suggest
  BOOST_TEST(plan_for(262144, 2).empty());
}

// Llama-3.1-70B at tp 4 x pp 4 with generation at tp 4: every stage's shard counted (the first and last hold the
// embedding and the LM head: the largest), the generation copy (a quarter of every layer in bf16) in both phases,
// and train.offload_during_generation taking the Adam moments and the training copy off the device for generation.
BOOST_AUTO_TEST_CASE(pipeline_stages_and_a_generation_copy) {
  hone::ModelConfig c = llama_8b_shape();
  c.hidden_size = 8192;
  c.intermediate_size = 28672;
  c.num_hidden_layers = 80;
  c.num_attention_heads = 64;
  c.num_key_value_heads = 8;
  c.head_dim = 128;
  c.rope.head_dim = 128;
  BOOST_TEST(c.num_parameters() == 70553706496);
  const hone::PipelineLayout pipe = hone::PipelineLayout::of(80, 4);
  hone::rl::DeviceMemoryPlan p;
  set_tensor_parallel(p, c, 4, &pipe);
  BOOST_TEST(p.num_params == 4541194240);  // the last stage: 20 layers, the final norm, the LM head
  set_generation_layout(p, c, 4, /*same_as_training=*/true);
  BOOST_TEST(p.generation_copy == 0.0);
  set_generation_layout(p, c, 4, /*same_as_training=*/false);
  BOOST_TEST(p.generation_copy >= 2.0 * 17639415808);  // 35.3 GB of bf16, and the refit's staging
  BOOST_TEST(p.generation_copy < 2.0 * 17639415808 + 2 * GiB);
  p.dp = 4;
  p.distributed = true;
  p.activations = 10 * GiB;
  p.microbatch_tokens = 16384;
  p.kv_cache = 20 * GiB;
  const double gen = p.generation(), train = p.training();
  BOOST_TEST(train == p.optimizer_state() + p.gradients() + p.activations + p.generation_copy);
  p.offload_during_generation = true;
  BOOST_TEST(gen - p.generation() == p.optimizer_state() * 2 / 3 + p.training_weights);
  // Refused where it cannot fit: the message names the generation copy and the keys that shrink it.
  p.offload_during_generation = false;
  const std::string m = device_memory_refusal(p, 60 * GiB);
  BOOST_TEST_INFO(m);
  BOOST_TEST(has(m, "for generation's own copy of the weights at generation.tp = 4"));
  BOOST_TEST(has(m, "generation.tp = 5") == false);  // 5 does not divide the 64 heads: never offered
  BOOST_TEST(has(m, "generation.tp = 8"));
}

BOOST_AUTO_TEST_CASE(a_replica_of_every_expert_is_offered_back_as_split_generation) {
  // The Qwen3-30B-A3B shape at ep = 2: generation's replica of every expert is the whole model in bf16 (61 GB);
  // with the experts split in generation, or at ep = 1, there is none.
  const hone::ModelConfig c = hone::bench_shape("qwen3-30b-a3b");
  hone::rl::DeviceMemoryPlan p;
  set_tensor_parallel(p, c, 1, nullptr, 2);
  set_expert_replica(p, c, 1, 1, true);
  BOOST_TEST(p.expert_replica == 0.0);
  set_expert_replica(p, c, 1, 2, false);
  BOOST_TEST(p.expert_replica == 0.0);
  set_expert_replica(p, c, 1, 2, true);
  BOOST_TEST(p.expert_replica == 2.0 * double(c.num_parameters()));
  set_expert_replica(p, c, 4, 2, true);  // a tensor-parallel rank's copy: a quarter of the experts' width
  BOOST_TEST(p.expert_replica < 0.3 * 2.0 * double(c.num_parameters()));
  // Refused for training memory: the split generation is offered, with what it leaves.
  set_expert_replica(p, c, 1, 2, true);
  p.dp = 2;
  p.distributed = true;
  p.activations = 10 * GiB;
  p.microbatch_tokens = 16384;
  const std::string m = device_memory_refusal(p, p.training() - 1 * GiB);
  BOOST_TEST_INFO(m);
  BOOST_TEST(has(m, "generation.experts = \"parallel\""));
  BOOST_TEST(has(m, "the cheapest change that fits"));
}

BOOST_AUTO_TEST_SUITE_END()
