// The tools around input/smollm2-arithmetic.toml: the committed problem files are what
// tools/make_arithmetic_data.py writes; tools/reference_grpo.py's reward (its port of the math checker), group
// advantages and prompt order pass their self-test (no torch needed for it); tools/plot_learning_curves.py draws a
// hone output file and a reference log into one PNG.
#include <boost/test/unit_test.hpp>

#include <fstream>
#include <string>

#include "../common/paths.h"

namespace {

boost::test_tools::assertion_result python_has_plot_modules(boost::unit_test::test_unit_id) {
  const int rc = test::run_command("/usr/bin/python3 -c 'import h5py, numpy, matplotlib'");
  boost::test_tools::assertion_result r(rc == 0);
  if (rc != 0) r.message() << "skipped: /usr/bin/python3 cannot import h5py, numpy and matplotlib (make deps)";
  return r;
}

std::string tool(const char* name) { return test::source_dir() + "/tools/" + name; }

}  // namespace

BOOST_AUTO_TEST_SUITE(reference_tools)

BOOST_AUTO_TEST_CASE(arithmetic_files_are_what_the_generator_writes) {
  std::string out;
  const int rc = test::run_command("python3 " + tool("make_arithmetic_data.py") + " --check --out-dir " +
                                       test::source_dir() + "/input/data",
                                   &out);
  BOOST_TEST(rc == 0, out);
}

BOOST_AUTO_TEST_CASE(reference_reward_advantages_and_order_pass_their_self_test) {
  std::string out;
  const int rc = test::run_command("python3 " + tool("reference_grpo.py") + " --self-test", &out);
  BOOST_TEST(rc == 0, out);
  BOOST_TEST(out.find("self-test: ok") != std::string::npos, out);
}

BOOST_AUTO_TEST_CASE(learning_curves_png, *boost::unit_test::precondition(python_has_plot_modules)) {
  const std::string dir = test::temp_dir("learning_curves");
  {
    std::ofstream ref(dir + "/ref.jsonl");
    ref << "{\"step\": 0, \"validation_accuracy\": 0.25}\n"
        << "{\"step\": 1, \"reward_mean\": 0.3}\n"
        << "{\"step\": 2, \"reward_mean\": 0.5, \"validation_accuracy\": 0.5}\n";
  }
  std::string out;
  const int made = test::run_command(
      "/usr/bin/python3 -c \"import h5py, numpy as np; f = h5py.File('" + dir +
          "/run.h5', 'w'); f['steps/step'] = np.arange(1, 3); f['steps/reward/mean'] = [0.2, 0.4]; "
          "f['validation/step'] = [0, 2]; f['validation/accuracy'] = [0.2, 0.6]; f.close()\"",
      &out);
  BOOST_TEST_REQUIRE(made == 0, out);
  const int rc = test::run_command(tool("plot_learning_curves.py") + " hone=" + dir + "/run.h5 reference=" + dir +
                                       "/ref.jsonl -o " + dir + "/curves.png",
                                   &out);
  BOOST_TEST_REQUIRE(rc == 0, out);
  std::ifstream png(dir + "/curves.png", std::ios::binary);
  std::string magic(8, '\0');
  png.read(magic.data(), 8);
  BOOST_TEST(magic == std::string("\x89PNG\r\n\x1a\n", 8));
}

BOOST_AUTO_TEST_SUITE_END()
