// `hone ranks`: the hone executable alone is one rank; under mpirun it sees every rank and its grid place; a grid
// that does not fit the ranks is one user error (exit 2), printed once.
#include <boost/test/unit_test.hpp>

#include <string>

#include <cstdlib>

#include "common/paths.h"
#include "runtime/runtime.h"

namespace {
const std::string kMpirun = "timeout 60 mpirun -np 2 --oversubscribe --allow-run-as-root ";
size_t count(const std::string& text, const std::string& what) {
  size_t n = 0;
  for (size_t at = text.find(what); at != std::string::npos; at = text.find(what, at + 1)) ++n;
  return n;
}
}  // namespace

BOOST_AUTO_TEST_SUITE(runtime_command)

BOOST_AUTO_TEST_CASE(hone_without_mpirun_is_one_rank) {
  std::string out;
  BOOST_TEST(test::run_command(test::hone_exe() + " ranks", &out) == 0);
  BOOST_TEST(out.find("1 ranks: dp 1 x tp 1 x pp 1\nrank 0: host ") == 0u);
  BOOST_TEST(out.find("local rank 0 of 1, dp 0 tp 0 pp 0, tp group [0], dp group [0]\n") != std::string::npos);
  BOOST_TEST(out.find("pp group") == std::string::npos);  // only when pp > 1
}

BOOST_AUTO_TEST_CASE(hone_under_mpirun_places_ranks_in_the_grid) {
  std::string out;
  BOOST_TEST(test::run_command(kMpirun + test::hone_exe() + " ranks parallel.tp=2", &out) == 0);
  BOOST_TEST(count(out, "2 ranks: dp 1 x tp 2 x pp 1") == 1u);
  BOOST_TEST(out.find("local rank 0 of 2, dp 0 tp 0 pp 0") != std::string::npos);
  BOOST_TEST(out.find("local rank 1 of 2, dp 0 tp 1 pp 0") != std::string::npos);
  BOOST_TEST(count(out, "tp group [0 1], dp group [0]\n") == 1u);
  BOOST_TEST(count(out, "tp group [0 1], dp group [1]\n") == 1u);
}

BOOST_AUTO_TEST_CASE(each_rank_shows_its_tp_and_dp_group) {
  std::string out;
  BOOST_TEST(test::run_command(kMpirun + test::hone_exe() + " ranks", &out) == 0);
  BOOST_TEST(count(out, "2 ranks: dp 2 x tp 1 x pp 1") == 1u);
  BOOST_TEST(out.find("dp 0 tp 0 pp 0, tp group [0], dp group [0 1]\n") != std::string::npos);
  BOOST_TEST(out.find("dp 1 tp 0 pp 0, tp group [1], dp group [0 1]\n") != std::string::npos);
  BOOST_TEST(test::run_command(kMpirun + test::hone_exe() + " ranks parallel.pp=2", &out) == 0);
  BOOST_TEST(out.find("dp 0 tp 0 pp 1, tp group [1], dp group [1], pp group [0 1]\n") != std::string::npos);
}

BOOST_AUTO_TEST_CASE(grid_that_does_not_fit_is_one_user_error) {
  std::string out;
  BOOST_TEST(test::run_command(kMpirun + test::hone_exe() + " ranks parallel.pp=3", &out) == 2);
  BOOST_TEST(count(out, "is not divisible by parallel.tp * parallel.pp = 1 * 3 = 3") == 1u);
  BOOST_TEST(test::run_command(test::hone_exe() + " ranks parallel.tp=x", &out) == 2);
  BOOST_TEST(out.find("parallel.tp = 'x' must be a positive integer") != std::string::npos);
}

BOOST_AUTO_TEST_CASE(unknown_command_under_mpirun_is_reported_once) {
  std::string out;
  BOOST_TEST(test::run_command(kMpirun + test::hone_exe() + " frobnicate", &out) == 2);
  BOOST_TEST(count(out, "unknown command 'frobnicate'") == 1u);
}

BOOST_AUTO_TEST_CASE(launcher_rank_comes_from_the_environment) {
  const char* before = std::getenv("OMPI_COMM_WORLD_RANK");
  const std::string saved = before ? before : "";
  setenv("OMPI_COMM_WORLD_RANK", "5", 1);
  BOOST_TEST(hone::launcher_rank() == 5);
  if (before)
    setenv("OMPI_COMM_WORLD_RANK", saved.c_str(), 1);
  else
    unsetenv("OMPI_COMM_WORLD_RANK");
  BOOST_TEST(hone::world_rank() == 0);  // MPI is not running in this process
  BOOST_TEST(hone::world_size() == 1);
}

BOOST_AUTO_TEST_SUITE_END()
