// The per-rank device memory count of `hone run` on the GPU: the optimizer state it keeps (whole or a 1/dp shard),
// which phase is the larger, and a refusal that names the numbers and the keys that make the run fit. The numbers
// are those of the Llama-3.1-8B shape on 141 GB GPUs (input/bench-grpo-llama-3.1-8b.toml).
#include <boost/test/unit_test.hpp>

#include <string>

#include "rl/device_memory_plan.h"

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
  BOOST_TEST(has(m, "train.activation_recompute"));
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

BOOST_AUTO_TEST_SUITE_END()
