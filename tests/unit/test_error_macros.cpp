// HONE_CHECK / HONE_USER_CHECK messages and the shared "<MACRO>(<call>) failed: ... at file:line" format of the
// library-call checks (MPI_CHECK in tests/mpi, CUDA_CHECK and friends in tests/gpu).
#include <boost/test/unit_test.hpp>

#include <string>

#include "runtime/error.h"

namespace {
std::string message_of(void (*fn)()) {
  try {
    fn();
  } catch (const hone::Error& e) {
    return e.what();
  } catch (const hone::UserError& e) {
    return std::string("user: ") + e.what();
  }
  return "no exception";
}
}  // namespace

BOOST_AUTO_TEST_SUITE(error_macros)

BOOST_AUTO_TEST_CASE(hone_check_names_expression_file_line_and_detail) {
  int line = 0;
  std::string msg;
  try {
    const int n = 3;
    line = __LINE__ + 1;
    HONE_CHECK(n % 2 == 0, "n = ", n, " must be even");
  } catch (const hone::Error& e) {
    msg = e.what();
  }
  BOOST_TEST(msg == "check failed: n % 2 == 0 at " + std::string(__FILE__) + ":" + std::to_string(line) +
                        ": n = 3 must be even");
}

BOOST_AUTO_TEST_CASE(hone_check_passes_silently_and_evaluates_once) {
  int calls = 0;
  auto next = [&] { return ++calls; };
  HONE_CHECK(next() == 1, "never shown");
  BOOST_TEST(calls == 1);
}

BOOST_AUTO_TEST_CASE(hone_user_check_is_a_user_error_with_just_the_message) {
  const std::string msg = message_of([] { HONE_USER_CHECK(1 + 1 == 3, "grpo.num_generations_per_prompt = ", 0); });
  BOOST_TEST(msg == "user: grpo.num_generations_per_prompt = 0");
}

BOOST_AUTO_TEST_CASE(call_failed_formats_library_failures) {
  const std::string msg = message_of([] {
    hone::detail::call_failed("CUDA_CHECK", "cudaMalloc(&p, n)", "out of memory (cudaErrorMemoryAllocation)",
                              "cuda/x.cu", 12);
  });
  BOOST_TEST(msg == "CUDA_CHECK(cudaMalloc(&p, n)) failed: out of memory (cudaErrorMemoryAllocation) at cuda/x.cu:12");
}


// what() is read as a C string (by the fatal path's printing, by every `<< e.what()`): a NUL byte from the user's
// text inside a message used to end it there. It is written as \x00 and the rest of the message is kept.
BOOST_AUTO_TEST_CASE(a_nul_byte_in_a_message_is_escaped_not_cutting_it) {
  const std::string key("a\0b", 3);
  const hone::UserError user(hone::cat("reply key '", key, "' is not a number"));
  BOOST_TEST(std::string(user.what()) == "reply key 'a\\x00b' is not a number");
  const hone::Error internal(std::string("x\0\0y", 4));
  BOOST_TEST(std::string(internal.what()) == "x\\x00\\x00y");
  BOOST_TEST(message_of([] { HONE_USER_CHECK(false, std::string("p\0q", 3), " end"); }) == "user: p\\x00q end");
}

BOOST_AUTO_TEST_SUITE_END()
