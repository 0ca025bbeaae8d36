// output.rollouts: "all" keeps every rollout of every step (read here through the output file's external links, as
// h5py reads them), agreeing with the step's metrics and /samples, the same under two data-parallel ranks as under
// one; a resumed run drops and rewrites the steps after its checkpoint; "none" keeps no samples; and
// tools/hone-rollouts reads them back.
#include <boost/test/unit_test.hpp>

#include <cmath>
#include <filesystem>
#include <nlohmann/json.hpp>
#include <numeric>
#include <sstream>

#include "test_grpo_util.h"

using namespace test_grpo;
namespace fs = std::filesystem;

namespace {

std::string tail(const std::string& s) { return s.substr(s.size() > 2000 ? s.size() - 2000 : 0); }
std::string plugin() { return "reward.library=" + test::build_dir() + "/examples/libexact_match_reward.so"; }
std::string mpi(int n) { return "timeout 240 mpirun -np " + std::to_string(n) + " --oversubscribe --allow-run-as-root "; }

std::string run_in(const std::string& dir, const std::string& args, int ranks = 1) {
  std::string out;
  const int rc = hone_run(write_deck(dir), args, &out, ranks > 1 ? mpi(ranks) : "");
  BOOST_TEST_INFO(tail(out));
  BOOST_REQUIRE_EQUAL(rc, 0);
  return dir + "/out/t.h5";
}

// A step's rollouts, read through /rollouts/step_<N> of the output file.
struct StepRollouts {
  std::vector<double> reward, logprob_sum, chars;
  std::vector<int64_t> group, completion_tokens;
  std::vector<int8_t> finish_reason;
  std::vector<std::string> prompt, completion, answer;
};

std::vector<std::string> texts(hid_t f, const std::string& base) {
  const auto offsets = test_h5::int64s(f, base + "_offsets");
  const auto bytes = test_h5::read<uint8_t>(f, base + "_bytes", H5T_NATIVE_UINT8);
  std::vector<std::string> out;
  for (size_t i = 0; i + 1 < offsets.size(); ++i)
    out.emplace_back(bytes.begin() + offsets[i], bytes.begin() + offsets[i + 1]);
  return out;
}

StepRollouts rollouts(const std::string& h5, int64_t step) {
  test_h5::File f(h5);
  char name[64];
  std::snprintf(name, sizeof name, "/rollouts/step_%08lld", static_cast<long long>(step));
  const std::string g = name;
  BOOST_REQUIRE(test_h5::link_exists(f.id, g));
  {  // the group opened first: HDF5 1.10 reads attributes by name through an external link from the wrong file
    const hid_t group = H5Gopen2(f.id, g.c_str(), H5P_DEFAULT);
    BOOST_REQUIRE(group >= 0);
    BOOST_TEST(test_h5::string_attr(group, ".", "format") == "hone-rollouts 1");
    BOOST_TEST(test_h5::int_attr(group, ".", "step") == step);
    H5Gclose(group);
  }
  StepRollouts r;
  r.reward = test_h5::doubles(f.id, g + "/reward");
  r.logprob_sum = test_h5::doubles(f.id, g + "/generation_logprob_sum");
  if (test_h5::link_exists(f.id, g + "/scores")) r.chars = test_h5::doubles(f.id, g + "/scores/chars");
  r.group = test_h5::int64s(f.id, g + "/group");
  r.completion_tokens = test_h5::int64s(f.id, g + "/completion_tokens");
  r.finish_reason = test_h5::read<int8_t>(f.id, g + "/finish_reason", H5T_NATIVE_INT8);
  r.prompt = texts(f.id, g + "/prompt");
  r.completion = texts(f.id, g + "/completion");
  r.answer = texts(f.id, g + "/answer");
  return r;
}

double mean(const std::vector<double>& v) { return std::accumulate(v.begin(), v.end(), 0.0) / double(v.size()); }

}  // namespace

BOOST_AUTO_TEST_SUITE(grpo_rollouts)

BOOST_AUTO_TEST_CASE(all_keeps_every_rollout_of_every_step_whatever_the_rank_count) {
  const std::string args = "run.max_steps=3 output.rollouts=all output.sample_every=1 output.num_samples=16 " + plugin();
  const std::string h5 = run_in(test::temp_dir("rollouts-all"), args);
  const auto rmean = metric(h5, "reward/mean"), gen = metric(h5, "generated_tokens/mean");
  const auto trunc = metric(h5, "truncation_rate"), chars = metric(h5, "scores/chars");
  test_h5::File f(h5);
  const auto sample_completions = test_h5::strings(f.id, "/samples/completion");
  const auto sample_prompts = test_h5::strings(f.id, "/samples/prompt");
  const auto sample_rewards = test_h5::doubles(f.id, "/samples/reward");
  BOOST_REQUIRE_EQUAL(sample_completions.size(), 48u);
  for (int64_t step = 1; step <= 3; ++step) {
    BOOST_TEST_INFO("step " << step);
    const StepRollouts r = rollouts(h5, step);
    BOOST_REQUIRE_EQUAL(r.reward.size(), 16u);  // 4 prompts x 4 generations
    BOOST_TEST(std::fabs(mean(r.reward) - rmean[size_t(step - 1)]) < 1e-12);
    std::vector<double> tokens(r.completion_tokens.begin(), r.completion_tokens.end());
    BOOST_TEST(std::fabs(mean(tokens) - gen[size_t(step - 1)]) < 1e-12);
    std::vector<double> truncated(r.finish_reason.begin(), r.finish_reason.end());
    BOOST_TEST(std::fabs(mean(truncated) - trunc[size_t(step - 1)]) < 1e-12);
    BOOST_TEST(std::fabs(mean(r.chars) - chars[size_t(step - 1)]) < 1e-12);
    for (size_t i = 0; i < 16; ++i) {
      const size_t k = size_t(step - 1) * 16 + i;  // the step's samples are every rollout, in the same order
      BOOST_TEST(r.completion[i] == sample_completions[k]);
      BOOST_TEST(r.prompt[i] == sample_prompts[k]);
      BOOST_TEST(r.reward[i] == sample_rewards[k]);
      BOOST_TEST(r.group[i] == int64_t(i / 4));
      BOOST_TEST(r.logprob_sum[i] < 0.0);
      BOOST_TEST(r.chars[i] == double(r.completion[i].size()));
      BOOST_TEST(!r.answer[i].empty());
    }
  }
  BOOST_TEST(fs::exists(fs::path(h5).parent_path() / "t.rollouts" / "step_00000003.h5"));

  // Two data-parallel ranks: the same rollouts in the same order.
  const std::string h5dp = run_in(test::temp_dir("rollouts-dp2"), args, 2);
  for (int64_t step = 1; step <= 3; ++step) {
    const StepRollouts a = rollouts(h5, step), b = rollouts(h5dp, step);
    BOOST_TEST(a.completion == b.completion);
    BOOST_TEST(a.reward == b.reward);
    BOOST_TEST(a.group == b.group);
  }
}

BOOST_AUTO_TEST_CASE(resume_rewrites_the_steps_after_the_checkpoint_and_none_keeps_nothing) {
  const std::string dir = test::temp_dir("rollouts-resume");
  const std::string base = "output.rollouts=all checkpoint.every=2 checkpoint.save_at_exit=false ";
  const std::string h5 = run_in(dir, base + "run.max_steps=3");
  const StepRollouts first3 = rollouts(h5, 3);
  run_in(dir, base + "run.max_steps=4 run.resume=auto");  // from the step-2 checkpoint: steps 3 and 4 again
  test_h5::File f(h5);
  for (const char* s : {"/rollouts/step_00000001", "/rollouts/step_00000004"}) BOOST_TEST(test_h5::link_exists(f.id, s));
  BOOST_TEST(steps(h5) == std::vector<int64_t>({1, 2, 3, 4}));
  BOOST_TEST(rollouts(h5, 3).completion == first3.completion);  // the same step again (a deterministic run)

  // A fresh run that keeps no rollouts removes the old run's files, and "none" keeps no samples either.
  run_in(dir, "run.max_steps=2 output.rollouts=none output.overwrite=true checkpoint.overwrite=true");
  test_h5::File g(h5);
  BOOST_TEST(!test_h5::link_exists(g.id, "/rollouts"));
  BOOST_TEST(test_h5::strings(g.id, "/samples/completion").empty());
  BOOST_TEST(fs::is_empty(dir + "/out/t.rollouts"));
}

BOOST_AUTO_TEST_CASE(the_reader_tool_lists_and_dumps_them,
                     *boost::unit_test::precondition([](boost::unit_test::test_unit_id) {
                       boost::test_tools::assertion_result r(
                           test::run_command("/usr/bin/python3 -c 'import h5py, numpy'") == 0);
                       if (!r) r.message() << "skipped: /usr/bin/python3 cannot import h5py and numpy (make deps)";
                       return r;
                     })) {
  const std::string dir = test::temp_dir("rollouts-tool");
  const std::string h5 = run_in(dir, "run.max_steps=2 output.rollouts=all " + plugin());
  const std::string tool = test::source_dir() + "/tools/hone-rollouts";
  std::string out;
  // From another folder: the links resolve next to the output file, not in the working folder.
  BOOST_REQUIRE_EQUAL(test::run_command("cd / && " + tool + " " + h5 + " --jsonl", &out), 0);
  std::istringstream lines(out);
  std::string line;
  std::vector<nlohmann::json> rows;
  while (std::getline(lines, line)) rows.push_back(nlohmann::json::parse(line));
  BOOST_REQUIRE_EQUAL(rows.size(), 32u);
  const StepRollouts r2 = rollouts(h5, 2);
  BOOST_TEST(rows[16]["step"] == 2);
  BOOST_TEST(rows[16]["completion"] == r2.completion[0]);
  BOOST_TEST(rows[16]["reward"] == r2.reward[0]);
  BOOST_TEST(rows[16]["scores"]["chars"] == r2.chars[0]);
  BOOST_TEST((rows[16]["finish_reason"] == "stop" || rows[16]["finish_reason"] == "length"));
  BOOST_REQUIRE_EQUAL(test::run_command(tool + " " + h5 + " --steps 2", &out), 0);
  BOOST_TEST(out.find("scores/chars") != std::string::npos);
  BOOST_TEST(std::count(out.begin(), out.end(), '\n') == 2);  // the header and step 2
  BOOST_TEST(test::run_command(tool + " " + h5 + " --steps 7", &out) == 2);
  BOOST_TEST(out.find("no rollouts of steps 7") != std::string::npos);
  const std::string plain = run_in(test::temp_dir("rollouts-tool-none"), "run.max_steps=1");
  BOOST_TEST(test::run_command(tool + " " + plain, &out) == 2);
  BOOST_TEST(out.find("output.rollouts = \"all\"") != std::string::npos);
}

BOOST_AUTO_TEST_SUITE_END()
