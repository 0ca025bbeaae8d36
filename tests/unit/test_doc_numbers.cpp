// Results that do not depend on the thread count, and docs whose numbers are the runs': the demo at 1, 2 and 4
// OpenMP threads writes bitwise the same /steps and /validation (the CPU ops reduce in a fixed order: ops/cpu/gemm.h,
// the gradient norm's fixed chunks); every number doc/quickstart.md and doc/report.md quote from demo runs is what
// fresh runs give (mk/demo-numbers.py --check; --write regenerates them).
#include <boost/test/unit_test.hpp>

#include <string>

#include "../common/paths.h"

namespace {

boost::test_tools::assertion_result has_h5py(boost::unit_test::test_unit_id) {
  const int rc = test::run_command("/usr/bin/python3 -c 'import h5py, numpy'");
  boost::test_tools::assertion_result r(rc == 0);
  if (rc != 0) r.message() << "skipped: /usr/bin/python3 cannot import h5py and numpy (make deps)";
  return r;
}

}  // namespace

BOOST_AUTO_TEST_SUITE(doc_numbers, *boost::unit_test::precondition(has_h5py))

BOOST_AUTO_TEST_CASE(the_thread_count_does_not_change_the_results) {
  const std::string dir = test::temp_dir("thread-count");
  std::string files;
  for (int threads : {1, 2, 4}) {
    std::string out;
    const std::string name = "t" + std::to_string(threads);
    const int rc = test::run_command("OMP_NUM_THREADS=" + std::to_string(threads) + " " + test::hone_exe() +
                                         " run input/demo.toml run.max_steps=12 validation.every=4 run.name=" + name +
                                         " output.dir=" + dir + " checkpoint.dir=" + dir + "/ck-" + name,
                                     &out);
    BOOST_TEST_REQUIRE(rc == 0, out);
    files += " " + dir + "/" + name + ".h5";
  }
  std::string out;
  BOOST_TEST(test::run_command("/usr/bin/python3 tests/data/same_steps.py" + files, &out) == 0, out);
  BOOST_TEST(out.find("same: ") == 0, out);
}

BOOST_AUTO_TEST_CASE(the_docs_quote_what_the_demo_runs_give) {
  std::string out;
  const int rc = test::run_command("/usr/bin/python3 mk/demo-numbers.py --check --hone " + test::hone_exe() +
                                       " --dir " + test::temp_dir("demo-numbers"),
                                   &out);
  BOOST_TEST(rc == 0, out);
}

BOOST_AUTO_TEST_SUITE_END()
