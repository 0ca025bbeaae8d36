// The per-rank host memory count of `hone run` on the CPU (rl/host_memory_plan.h): the fp32 copies and AdamW state a
// rank keeps, the writer's checkpoint gather, ranks sharing a host, a refusal naming the numbers and the keys, the
// reading of /proc/meminfo; and the count against what a real run takes (never above it: a refusal is certain).
#include <boost/test/unit_test.hpp>

#include <string>

#include "model/model_config.h"
#include "rl/host_memory_plan.h"
#include "runtime/host_memory.h"
#include "test_grpo_util.h"

namespace {

constexpr double GiB = double(int64_t(1) << 30);

bool has(const std::string& s, const std::string& part) { return s.find(part) != std::string::npos; }

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

}  // namespace

BOOST_AUTO_TEST_SUITE(host_memory_plan)

BOOST_AUTO_TEST_CASE(a_rank_keeps_two_to_four_copies_and_the_adamw_state) {
  hone::rl::HostMemoryPlan p;
  p.num_params = p.whole_params = 10;
  BOOST_TEST(p.steps() == 2 * 40.0 + 80.0);  // training (generation's too), gradients; two moments
  p.generation_copy = true;
  BOOST_TEST(p.steps() == 3 * 40.0 + 80.0);  // and generation's own
  p.reference = true;
  BOOST_TEST(p.steps() == 4 * 40.0 + 80.0);
  p.dp = 3;
  BOOST_TEST(p.optimizer_state() == 80.0);  // plain: whole on every rank
  p.distributed = true;
  BOOST_TEST(p.optimizer_state() == 12.0 * 4 + 8.0);  // ceil(10 / 3) = 4 of master and moments; 2 of padding
  p.activations = 5, p.reference_activations = 2, p.kv_cache = 3;
  BOOST_TEST(p.steps() == 4 * 40.0 + 56.0 + 10.0);
  BOOST_TEST(p.setup() == 4 * 40.0 + 56.0 + 40.0);  // the initial weights, no arenas yet
  p.random_init = true, p.tp = 2;
  BOOST_TEST(p.setup() == 4 * 40.0 + 56.0 + 40.0 + 40.0);  // and the whole model drawn before slicing
}

BOOST_AUTO_TEST_CASE(the_writer_gathers_the_whole_state_and_ranks_of_a_host_add_up) {
  hone::rl::HostMemoryPlan p;
  p.num_params = 5, p.whole_params = 10, p.tp = 2;
  p.generation_copy = true;
  const double steps = 3 * 20.0 + 40.0;
  BOOST_TEST(p.peak(false) == std::max(steps, p.setup()));
  BOOST_TEST(p.peak(true) == steps + 3 * 40.0);  // whole weights and both moments, in fp32
  p.ranks_on_host = 4;
  BOOST_TEST(p.host_need() == 4 * p.peak(false));
  p.writer_on_host = true;
  BOOST_TEST(p.host_need() == p.peak(true) + 3 * p.peak(false));
  p.resume = true;  // resuming reads the whole state on every rank
  BOOST_TEST(p.host_need() == 4 * p.peak(true));
}

BOOST_AUTO_TEST_CASE(a_run_that_cannot_fit_is_refused_with_the_numbers_and_the_keys) {
  hone::rl::HostMemoryPlan p;
  hone::rl::set_host_tensor_parallel(p, llama_8b_shape(), 1);
  BOOST_TEST(p.num_params == 8030261248);
  BOOST_TEST(p.next_tp == 2);
  p.reference = true, p.generation_copy = true, p.writer_on_host = true, p.microbatch_tokens = 1024,
  p.activations = 2 * GiB;
  const std::string limit = "MemAvailable + SwapFree of /proc/meminfo";
  BOOST_TEST(hone::rl::host_memory_refusal(p, 1024 * GiB, limit).empty());  // fits a 1 TiB host
  BOOST_TEST(hone::rl::host_memory_refusal(p, -1, limit).empty());           // unknown: nothing said
  const std::string m = hone::rl::host_memory_refusal(p, 200.5 * GiB, limit);
  BOOST_TEST_MESSAGE(m);
  BOOST_TEST(m.find("host memory cannot hold this run: 200 GiB available (MemAvailable + SwapFree of /proc/meminfo), "
                    "at least 271.2 GiB needed: 4 fp32 copies of the model's 8030261248 parameters (training, "
                    "generation, gradients, reference) = 119.7 GiB, 59.8 GiB of AdamW moments, 2.0 GiB of "
                    "activations for a 1024-token micro-batch, 0.0 GiB of KV cache and 0.0 GiB for 0 rollouts of a step "
                    "(grpo.num_prompts_per_step x grpo.num_generations_per_prompt), at least their records (181.5 GiB "
                    "from the first step "
                    "on); writing a checkpoint, rank 0 also gathers the whole model's weights and moments (89.7 GiB)") == 0u);
  BOOST_TEST(has(m, "To fit: parallel.tp = 2 (splits the weights, gradients and optimizer state over 2 ranks), "));
  BOOST_TEST(has(m, "more ranks with train.distributed_optimizer = true, "));
  BOOST_TEST(has(m, "loss.kl_coef = 0 (no reference copy), "));
  BOOST_TEST(has(m, "train.recompute = \"full\" or a smaller train.max_tokens_per_microbatch"));
  BOOST_TEST(m.find('\n') == std::string::npos);
  // Two ranks of tp 2 on one host, with ZeRO over dp 2: each rank's shard, and the suggestion follows.
  hone::rl::set_host_tensor_parallel(p, llama_8b_shape(), 2);
  p.dp = 2, p.distributed = true, p.ranks_on_host = 4;
  const std::string m2 = hone::rl::host_memory_refusal(p, 100 * GiB, limit);
  BOOST_TEST_MESSAGE(m2);
  BOOST_TEST(has(m2, " needed by the 4 ranks on this host: each rank holds 4 fp32 copies of its 1/2 tensor-parallel shard of 4015263744 parameters ("));
  BOOST_TEST(has(m2, " of AdamW state (a 1/2 shard), "));
  BOOST_TEST(has(m2, "To fit: parallel.tp = 4 "));
  BOOST_TEST(!has(m2, "distributed_optimizer"));
  BOOST_TEST(has(m2, "fewer ranks per host, "));
}

// The samples a rank holds (a step's rollouts, a validation's problems and completions) count at least their
// records: 1e9 rollouts or 2e12 validation completions were an out-of-memory kill or a set-up without end.
BOOST_AUTO_TEST_CASE(the_samples_of_a_step_and_of_a_validation_are_counted) {
  hone::rl::HostMemoryPlan p;
  p.num_params = p.whole_params = 10;
  const double base = p.steps();
  p.step_samples = 1000;
  const double per_rollout = (p.steps() - base) / 1000;
  BOOST_TEST(per_rollout > 100.0);  // the request, the rollout and the sample: each a few vectors
  hone::rl::set_host_validation(p, 10, 4, 2);  // 10 problems, 4 completions each, over 2 replicas: 20 here
  BOOST_TEST(p.validation_problems == 10);
  BOOST_TEST(p.validation_samples == 20);
  BOOST_TEST(p.validation_bytes() > 20 * 100.0);
  p.step_samples = 4000000000;
  const std::string m = hone::rl::host_memory_refusal(p, 16 * GiB, "MemAvailable + SwapFree");
  BOOST_TEST(has(m, " for 4000000000 rollouts of a step (grpo.num_prompts_per_step x grpo.num_generations_per_prompt) "
                    "and 10 validation problems with 20 completions (validation.max_samples x validation.num_generations), "
                    "at least their records"), m);
  BOOST_TEST(has(m, "fewer prompts per step or validation problems, "), m);
  // On the GPU the host holds the initial weights and the samples only.
  p.gpu = true;
  BOOST_TEST(p.steps() == p.samples());
  BOOST_TEST(p.setup() == p.weights());
  const std::string g = hone::rl::host_memory_refusal(p, 16 * GiB, "MemAvailable + SwapFree");
  BOOST_TEST(has(g, ": the initial fp32 weights of the model's 10 parameters while the engine is built ("), g);
  BOOST_TEST(!has(g, "AdamW"), g);
}

// hone logprobs and hone convert weigh one fp32 copy of the model (two with gradients) from its config alone.
BOOST_AUTO_TEST_CASE(a_command_holding_the_whole_model_is_weighed_from_its_config) {
  const hone::ModelConfig c = llama_8b_shape();
  const double params = c.parameter_count_bound();
  BOOST_TEST(params == double(c.num_parameters()));
  BOOST_TEST(hone::rl::model_host_memory_refusal(c, 1, "hone logprobs", 4 * params + 1, "x").empty());
  BOOST_TEST(hone::rl::model_host_memory_refusal(c, 1, "hone logprobs", -1, "x").empty());
  const std::string m = hone::rl::model_host_memory_refusal(c, 2, "hone logprobs", 4 * params, "ulimit -v");
  BOOST_TEST(has(m, "hone logprobs: host memory cannot hold the model: 29 GiB available (ulimit -v), at least 59.8 GiB "
                    "needed for 2 fp32 copies of its 8.03e+09 parameters (the weights and their gradients)"), m);
}

BOOST_AUTO_TEST_CASE(meminfo_and_cgroup_files_are_read) {
  const std::string meminfo = "MemTotal:       24000000 kB\nMemFree:  100 kB\nMemAvailable:   2000 kB\nSwapFree: 1000 kB\n";
  BOOST_TEST(hone::detail::meminfo_available_bytes(meminfo) == 3000.0 * 1024);
  BOOST_TEST(hone::detail::meminfo_available_bytes("MemTotal: 5 kB\n") == -1.0);
  BOOST_TEST(hone::detail::cgroup_number("max\n") == -1.0);
  BOOST_TEST(hone::detail::cgroup_number("") == -1.0);
  BOOST_TEST(hone::detail::cgroup_number("1073741824\n") == 1073741824.0);
  const hone::HostMemory here = hone::available_host_memory();
  BOOST_TEST(here.bytes > 0);  // this machine has /proc/meminfo
  BOOST_TEST(!here.limit.empty());
}

// The planner's count for a larger random-init model (hidden 512, 4 layers, KL on: every part of the count is there)
// against the peak resident memory of two steps and the checkpoint at exit: the count must stay below what the run
// really takes, and not far below (it counts what matters).
BOOST_AUTO_TEST_CASE(the_count_is_below_what_a_run_takes) {
  const std::string dir = test::temp_dir("host-memory-count");
  const std::string deck = test_grpo::write_deck(dir);
  const std::string args = "run.max_steps=2 model.hidden_size=512 model.intermediate_size=1024 model.num_layers=4 "
                           "loss.kl_coef=0.01 run.log_level=debug";
  std::string out;
  BOOST_REQUIRE_EQUAL(test_grpo::hone_run(deck, args, &out, "/usr/bin/time -f maxrss=%M "), 0);
  const size_t rss_at = out.rfind("maxrss="), plan_at = out.find("host memory: at least ");
  BOOST_REQUIRE(rss_at != std::string::npos);
  BOOST_REQUIRE(plan_at != std::string::npos);
  const double peak_rss = std::stod(out.substr(rss_at + 7)) * 1024.0;
  const double planned = std::stod(out.substr(plan_at + 22));  // bytes
  BOOST_TEST_MESSAGE(out.substr(plan_at, out.find('\n', plan_at) - plan_at) << "; peak resident " << peak_rss << " bytes");
  BOOST_TEST(planned < peak_rss);
  BOOST_TEST(planned > 0.5 * peak_rss);
}

BOOST_AUTO_TEST_SUITE_END()
