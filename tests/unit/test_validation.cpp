// Validation of `hone run` ([validation], rl/validation.h) on the tiny deck:
//   * a run with validation trains exactly as one without (every step metric and the final weights bit for bit):
//     validation draws on its own problems and random stream;
//   * /validation holds one row per validation (at the start and every N steps) with consistent metrics, and
//     stdout a line for each;
//   * the same weights give the same validation (greedy, and sampled: the same random numbers every time);
//   * two data-parallel ranks give the same validation as one;
//   * a resumed run keeps the validations up to its checkpoint and does not repeat them;
//   * a JSONL file of held-out problems; the deck errors name the keys.
#include <boost/test/unit_test.hpp>

#include <cmath>
#include <fstream>
#include <vector>

#include "test_grpo_util.h"

using namespace test_grpo;

namespace {

const std::string kMpi = "timeout 120 mpirun -np 2 --oversubscribe --allow-run-as-root ";
const std::string kValidate = "validation.every=2 validation.at_start=true validation.max_samples=6 "
                              "validation.num_generations=3 validation.temperature=1.0 ";

std::string tail(const std::string& s) { return s.substr(s.size() > 2000 ? s.size() - 2000 : 0); }

std::string run_in(const std::string& name, const std::string& args, const std::string& prefix = "") {
  const std::string dir = test::temp_dir(name);
  std::string out;
  const int rc = hone_run(write_deck(dir), args, &out, prefix);
  BOOST_TEST_INFO(tail(out));
  BOOST_REQUIRE_EQUAL(rc, 0);
  std::ofstream(dir + "/stdout.txt") << out;
  return dir;
}

std::vector<double> vmetric(const std::string& h5, const std::string& name) {
  test_h5::File f(h5);
  if (f.id < 0 || !test_h5::link_exists(f.id, "/validation/" + name)) return {};
  return test_h5::doubles(f.id, "/validation/" + name);
}
std::vector<int64_t> vsteps(const std::string& h5) {
  test_h5::File f(h5);
  if (f.id < 0 || !test_h5::link_exists(f.id, "/validation/step")) return {};
  return test_h5::int64s(f.id, "/validation/step");
}

// Equal element by element, NaN equal to NaN.
bool same(const std::vector<double>& a, const std::vector<double>& b) {
  if (a.size() != b.size()) return false;
  for (size_t i = 0; i < a.size(); ++i)
    if (!(a[i] == b[i] || (std::isnan(a[i]) && std::isnan(b[i])))) return false;
  return true;
}

const std::vector<std::string> kValidationMetrics = {"accuracy", "pass_at_k", "reward/mean", "generated_tokens/mean",
                                                     "generated_tokens/max", "truncation_rate", "problems", "samples"};

}  // namespace

BOOST_AUTO_TEST_SUITE(validation)

BOOST_AUTO_TEST_CASE(validation_leaves_training_unchanged) {
  // The entropy bonus moves the weights every step, whatever the rewards.
  const std::string args = "run.max_steps=4 loss.entropy_coef=0.01 ";
  const std::string plain = run_in("val-off", args), with = run_in("val-on", args + kValidate);
  const std::string h1 = plain + "/out/t.h5", h2 = with + "/out/t.h5";
  for (const std::string& m : deterministic_metrics()) {
    BOOST_TEST_INFO(m);
    BOOST_TEST(metric(h1, m).size() == 4u);
    BOOST_TEST(same(metric(h1, m), metric(h2, m)));
  }
  BOOST_TEST(max_weight_diff(plain + "/ck/step_00000004/model.safetensors",
                             with + "/ck/step_00000004/model.safetensors") == 0.0);

  BOOST_TEST(vsteps(h1).empty());
  BOOST_TEST((vsteps(h2) == std::vector<int64_t>{0, 2, 4}));
  const auto acc = vmetric(h2, "accuracy"), pass = vmetric(h2, "pass_at_k"), reward = vmetric(h2, "reward/mean");
  BOOST_REQUIRE_EQUAL(acc.size(), 3u);
  for (size_t i = 0; i < 3; ++i) {
    BOOST_TEST(acc[i] >= 0.0);
    BOOST_TEST(acc[i] <= pass[i]);  // a problem counted in accuracy has a correct sample
    BOOST_TEST(pass[i] <= 1.0);
    BOOST_TEST(reward[i] == acc[i]);  // the reverse task's reward is its correctness
    BOOST_TEST(vmetric(h2, "problems")[i] == 6.0);
    BOOST_TEST(vmetric(h2, "samples")[i] == 18.0);
    BOOST_TEST(vmetric(h2, "time/validation")[i] > 0.0);
    BOOST_TEST(vmetric(h2, "generated_tokens/max")[i] >= vmetric(h2, "generated_tokens/mean")[i]);
  }
  const std::string out = file_bytes(with + "/stdout.txt");
  for (const char* line : {"validation at step 0: accuracy ", "validation at step 2: accuracy ",
                           "validation at step 4: accuracy "})
    BOOST_TEST(out.find(line) != std::string::npos, line);
  BOOST_TEST(out.find(", pass@3 ") != std::string::npos);
  BOOST_TEST(out.find("; 6 problems x 3 in ") != std::string::npos);
  // The validation line follows its step's line.
  BOOST_TEST(out.find("validation at step 2:") > out.find("\n       2 "));
  BOOST_TEST(out.find("validation at step 2:") < out.find("\n       3 "));
}

BOOST_AUTO_TEST_CASE(same_weights_same_validation) {
  // learning_rate 0: the weights never change, so neither does any validation, greedy or sampled.
  for (const std::string& sampling : {std::string("validation.temperature=0"), std::string("validation.temperature=1.0")}) {
    const std::string dir = run_in("val-repeat", "run.max_steps=3 train.learning_rate=0 validation.every=1 "
                                                 "validation.at_start=true validation.max_samples=8 "
                                                 "validation.num_generations=2 " + sampling);
    const std::string h5 = dir + "/out/t.h5";
    BOOST_TEST((vsteps(h5) == std::vector<int64_t>{0, 1, 2, 3}));
    for (const std::string& m : kValidationMetrics) {
      const auto v = vmetric(h5, m);
      BOOST_REQUIRE_EQUAL(v.size(), 4u);
      for (double x : v) BOOST_TEST(x == v[0], sampling << " " << m);
    }
  }
}

BOOST_AUTO_TEST_CASE(two_ranks_validate_as_one) {
  // 5 problems: the shards differ in size (3 and 2).
  const std::string args = "run.max_steps=2 validation.every=1 validation.max_samples=5 validation.num_generations=2 "
                           "validation.temperature=1.0";
  const std::string one = run_in("val-dp1", args), two = run_in("val-dp2", args, kMpi);
  BOOST_TEST(file_bytes(two + "/stdout.txt").find("2 data-parallel ranks") != std::string::npos);
  for (const std::string& m : kValidationMetrics) {
    BOOST_TEST_INFO(m);
    BOOST_TEST(vmetric(one + "/out/t.h5", m).size() == 2u);
    BOOST_TEST(same(vmetric(one + "/out/t.h5", m), vmetric(two + "/out/t.h5", m)));
  }
}

BOOST_AUTO_TEST_CASE(resume_keeps_the_validations_of_its_checkpoint) {
  const std::string args = "validation.every=1 validation.at_start=true validation.max_samples=4 ";
  const std::string whole = run_in("val-whole", args + "run.max_steps=4");
  const std::string dir = test::temp_dir("val-resume");
  const std::string deck = write_deck(dir);
  std::string out;
  BOOST_REQUIRE_EQUAL(hone_run(deck, args + "run.max_steps=2", &out), 0);
  BOOST_REQUIRE_EQUAL(hone_run(deck, args + "run.max_steps=4 run.resume=auto", &out), 0);
  BOOST_TEST_INFO(tail(out));
  BOOST_TEST(out.find("validation at step 0:") == std::string::npos);  // not again after a resume
  BOOST_TEST((vsteps(dir + "/out/t.h5") == std::vector<int64_t>{0, 1, 2, 3, 4}));
  for (const std::string& m : kValidationMetrics)
    BOOST_TEST(same(vmetric(dir + "/out/t.h5", m), vmetric(whole + "/out/t.h5", m)), m);
}

BOOST_AUTO_TEST_CASE(jsonl_problems_and_deck_errors) {
  const std::string dir = test::temp_dir("val-jsonl");
  std::ofstream(dir + "/held_out.jsonl") << "{\"prompt\": \"rev:12=\", \"answer\": \"21\"}\n"
                                            "{\"prompt\": \"rev:345=\", \"answer\": \"543\"}\n"
                                            "{\"prompt\": \"rev:7=\", \"answer\": \"7\"}\n";
  const std::string deck = write_deck(dir);
  std::string out;
  BOOST_REQUIRE_EQUAL(hone_run(deck, "run.max_steps=1 validation.every=1 validation.max_samples=0 validation.path=" +
                                         dir + "/held_out.jsonl", &out), 0);
  BOOST_TEST_INFO(tail(out));
  BOOST_TEST(vmetric(dir + "/out/t.h5", "problems") == std::vector<double>{3.0});
  BOOST_TEST(out.find("validation: 3 problems x 1, greedy, from " + dir + "/held_out.jsonl") != std::string::npos);

  // A JSONL training set needs a file of held-out problems.
  BOOST_TEST(hone_run(deck, "output.overwrite=true checkpoint.overwrite=true data.task=jsonl data.path=" + dir +
                                "/held_out.jsonl validation.every=5", &out) == 2);
  BOOST_TEST(out.find("override 'validation.every=5': missing required key 'validation.path'") != std::string::npos, out);
  // Synthetic problems are endless: a count is needed.
  BOOST_TEST(hone_run(deck, "output.overwrite=true checkpoint.overwrite=true validation.at_start=true validation.max_samples=0", &out) == 2);
  BOOST_TEST(out.find("validation.max_samples") != std::string::npos, out);
  BOOST_TEST(hone_run(deck, "output.overwrite=true checkpoint.overwrite=true validation.every=1 validation.path=" + dir + "/nothing.jsonl",
                      &out) == 2);
  BOOST_TEST(out.find("validation.path = \"" + dir + "/nothing.jsonl\": no such file") != std::string::npos, out);
  // The pre-flight finds it too, before a job is queued.
  BOOST_TEST(test::run_command(test::hone_exe() + " check " + deck + " validation.every=1 validation.path=" + dir +
                               "/nothing.jsonl", &out) == 2);
  BOOST_TEST(out.find("validation.path = \"" + dir + "/nothing.jsonl\": no such file") != std::string::npos, out);
  BOOST_TEST(hone_run(deck, "output.overwrite=true checkpoint.overwrite=true validation.every=1 validation.top_p=0.9", &out) == 2);
  BOOST_TEST(out.find("temperature 0 is greedy decoding") != std::string::npos, out);
}

BOOST_AUTO_TEST_SUITE_END()
