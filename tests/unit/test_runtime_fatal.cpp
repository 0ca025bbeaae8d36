// The fatal-error path under two ranks (tests/programs/fatal_error.cpp run by mpirun): one message, the right
// exit code, no hang; and the message merging it relies on.
#include <boost/test/unit_test.hpp>

#include <chrono>
#include <string>

#include "common/paths.h"
#include "runtime/runtime.h"

namespace {

struct Run {
  int status = -1;
  std::string output;
  double seconds = 0;
};

// mpirun_options: e.g. "-x HONE_ERROR_GRACE_S=1" (passes the variable to every rank).
Run run_program(const std::string& scenario, int ranks, const std::string& mpirun_options = "") {
  const std::string exe = test::build_dir() + "/tests/programs/fatal_error " + scenario;
  const std::string cmd = ranks == 1 ? exe
                                     : "timeout 60 mpirun -np " + std::to_string(ranks) +
                                           " --oversubscribe --allow-run-as-root " + mpirun_options + " " + exe;
  Run r;
  const auto t0 = std::chrono::steady_clock::now();
  r.status = test::run_command(cmd, &r.output);
  r.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  BOOST_TEST_MESSAGE(scenario << " (" << ranks << " ranks): status " << r.status << " in " << r.seconds << " s\n"
                              << r.output);
  return r;
}

size_t count(const std::string& text, const std::string& what) {
  size_t n = 0;
  for (size_t at = text.find(what); at != std::string::npos; at = text.find(what, at + 1)) ++n;
  return n;
}

}  // namespace

BOOST_AUTO_TEST_SUITE(runtime_fatal)

BOOST_AUTO_TEST_CASE(error_on_one_rank_aborts_all_ranks_with_one_message) {
  const Run r = run_program("one-rank-error", 2);
  BOOST_TEST(r.status == 1);  // 124 would be the timeout: rank 0 left hanging in its barrier
  BOOST_TEST(r.seconds < 30.0);
  BOOST_TEST(count(r.output, "rank 1 lost its device (test)") == 1u);
  BOOST_TEST(count(r.output, "[rank 1] hone: error: rank 1 lost its device (test)") == 1u);
  BOOST_TEST(count(r.output, "passed the barrier") == 0u);
  BOOST_TEST(count(r.output, "MPI_ABORT was invoked") == 0u);  // Open MPI's banner is turned off
}

BOOST_AUTO_TEST_CASE(user_error_on_one_rank_aborts_with_exit_two) {
  const Run r = run_program("one-rank-user-error", 2, "-x HONE_ERROR_GRACE_S=1");  // a shorter wait, same outcome
  BOOST_TEST(r.status == 2);
  BOOST_TEST(r.seconds < 30.0);
  BOOST_TEST(count(r.output, "rank 1 cannot read shard 1 (test)") == 1u);
}

BOOST_AUTO_TEST_CASE(same_user_error_on_every_rank_prints_once_and_exits_two) {
  const Run r = run_program("all-ranks-user-error", 2);
  BOOST_TEST(r.status == 2);
  BOOST_TEST(r.seconds < 30.0);
  BOOST_TEST(count(r.output, "deck.toml:3:1: unknown key 'foo' (test)") == 1u);
  BOOST_TEST(count(r.output, "hone: error: deck.toml:3:1") == 1u);  // no [rank r]: every rank had it
  BOOST_TEST(count(r.output, "[rank") == 0u);
}

BOOST_AUTO_TEST_CASE(different_errors_on_every_rank_print_once_each) {
  const Run r = run_program("all-ranks-different", 2);
  BOOST_TEST(r.status == 1);
  BOOST_TEST(count(r.output, "[rank 0] rank 0 failed its own way (test)") == 1u);
  BOOST_TEST(count(r.output, "[rank 1] rank 1 failed its own way (test)") == 1u);
  BOOST_TEST(count(r.output, "hone: error:") == 1u);
}

BOOST_AUTO_TEST_CASE(agreed_error_of_one_rank_ends_every_rank_cleanly) {
  const Run r = run_program("agreed-one-rank", 2);
  BOOST_TEST(r.status == 2);
  BOOST_TEST(count(r.output, "hone: error: [rank 1] missing input file (test)") == 1u);
  BOOST_TEST(count(r.output, "passed the agreement") == 0u);
}

// kill -STOP of a rank used to leave the others waiting in MPI forever, without a word. The watchdog (timeout 1 s
// here) ends the job: one message naming the operation and the group, exit 1, the stopped rank ended too.
BOOST_AUTO_TEST_CASE(a_rank_that_stops_answering_ends_every_rank_with_one_message_naming_the_collective) {
  Run r = run_program("peer-stops", 2, "-x HONE_ERROR_GRACE_S=1");
  BOOST_TEST(r.status == 1);  // 124: rank 0 left waiting for the stopped rank
  BOOST_TEST(r.seconds < 30.0);
  BOOST_TEST(count(r.output, "hone: error:") == 1u);
  BOOST_TEST(count(r.output, "[rank 0] hone: error: MPI all_reduce_sum of 4 bytes (1 x f32) on the world group "
                             "(world ranks 0-1) did not complete within 1 s (parallel.collective_timeout_s)") == 1u);
  BOOST_TEST(count(r.output, "passed the collective") == 0u);
  r = run_program("peer-stops-agree", 2, "-x HONE_ERROR_GRACE_S=1");  // the agreement every deck check goes through
  BOOST_TEST(r.status == 1);
  BOOST_TEST(r.seconds < 30.0);
  BOOST_TEST(count(r.output, "hone: error:") == 1u);
  BOOST_TEST(count(r.output, "MPI agreement on errors") == 1u);
}

BOOST_AUTO_TEST_CASE(a_failure_noted_by_another_thread_is_the_one_reported) {
  const Run r = run_program("background-cause", 2);
  BOOST_TEST(r.status == 1);
  BOOST_TEST(r.seconds < 30.0);
  BOOST_TEST(count(r.output, "hone: error: NCCL all_reduce_sum timed out (test)") == 1u);
  BOOST_TEST(count(r.output, "non-finite values") == 0u);
}

BOOST_AUTO_TEST_CASE(a_background_failure_ends_the_run_when_the_main_thread_is_stuck) {
  const Run r = run_program("background-stuck", 2);
  BOOST_TEST(r.status == 1);
  BOOST_TEST(r.seconds < 30.0);
  BOOST_TEST(count(r.output, "[rank 1] hone: error: NCCL all_gather timed out (test)") == 1u);
  BOOST_TEST(count(r.output, "passed the barrier") == 0u);
}

BOOST_AUTO_TEST_CASE(without_mpirun_the_program_is_one_rank) {
  Run r = run_program("ok", 1);
  BOOST_TEST(r.status == 0);
  BOOST_TEST(r.output.find("rank 0 of 1, local rank 0 of 1") != std::string::npos);
  r = run_program("all-ranks-user-error", 1);
  BOOST_TEST(r.status == 2);
  BOOST_TEST(count(r.output, "hone: error: deck.toml:3:1: unknown key 'foo' (test)") == 1u);
}

BOOST_AUTO_TEST_CASE(two_ranks_know_their_world_and_local_places) {
  const Run r = run_program("ok", 2);
  BOOST_TEST(r.status == 0);
  BOOST_TEST(r.output.find("rank 0 of 2, local rank 0 of 2") != std::string::npos);
  BOOST_TEST(r.output.find("rank 1 of 2, local rank 1 of 2") != std::string::npos);
}

BOOST_AUTO_TEST_CASE(rank_ranges_compress_runs) {
  BOOST_TEST(hone::detail::rank_ranges({0, 1, 2, 3, 5, 7, 8}) == "0-3,5,7-8");
  BOOST_TEST(hone::detail::rank_ranges({4}) == "4");
  BOOST_TEST(hone::detail::rank_ranges({}) == "");
}

BOOST_AUTO_TEST_CASE(merge_rank_messages_groups_identical_messages) {
  using hone::detail::merge_rank_messages;
  BOOST_TEST(merge_rank_messages({0, 1, 2, 3}, {"bad key", "bad key", "bad key", "bad key"}, 4) == "bad key");
  BOOST_TEST(merge_rank_messages({1, 2}, {"no file", "no file"}, 4) == "[ranks 1-2] no file");
  BOOST_TEST(merge_rank_messages({0, 1, 3}, {"a", "b", "a"}, 4) == "[ranks 0,3] a\n[rank 1] b");
  BOOST_TEST(merge_rank_messages({2}, {"x"}, 1) == "x");
}

BOOST_AUTO_TEST_SUITE_END()
