// Resource failures from deep inside a library (std::bad_alloc, std::length_error) become one user-error line that
// says what hone was doing (runtime/activity.h), in run_guarded and in agreed().
#include <boost/test/unit_test.hpp>

#include <functional>
#include <new>
#include <stdexcept>
#include <vector>

#include "runtime/activity.h"
#include "runtime/agree.h"

using hone::Activity;

namespace {
std::string message_of(const std::function<void()>& f) {
  try {
    f();
  } catch (const std::exception& e) {
    return hone::resource_failure_message(e);
  }
  return "(nothing thrown)";
}
}  // namespace

BOOST_AUTO_TEST_SUITE(runtime_activity)

BOOST_AUTO_TEST_CASE(bad_alloc_names_the_innermost_activity_even_after_unwinding) {
  const Activity outer("setting up the run");
  const std::string m = message_of([] {
    const Activity inner("reading the prompts in p.jsonl");
    throw std::bad_alloc();
  });
  BOOST_TEST(m.rfind("out of host memory while reading the prompts in p.jsonl: ", 0) == 0, m);
  BOOST_TEST(m.find('\n') == std::string::npos);
  // A later activity forgets the earlier exception's.
  const Activity next("running GRPO step 3");
  BOOST_TEST(message_of([] { throw std::bad_alloc(); }).rfind("out of host memory while running GRPO step 3:", 0) == 0);
}

BOOST_AUTO_TEST_CASE(length_error_is_a_resource_failure_and_others_are_not) {
  const std::string m = message_of([] {
    std::vector<char> v;
    v.resize(v.max_size() + 1);  // vector::_M_default_append
  });
  BOOST_TEST(m.rfind("a size too large to hold (vector::_M_default_append)", 0) == 0, m);
  BOOST_TEST(message_of([] { throw std::runtime_error("x"); }) == "");
}

BOOST_AUTO_TEST_CASE(agreed_turns_bad_alloc_into_a_user_error) {
  try {
    hone::agreed([] {
      const Activity a("reading the tokenizer");
      throw std::bad_alloc();
    });
    BOOST_FAIL("no error");
  } catch (const hone::AgreedError& e) {
    BOOST_TEST(e.exit_code() == int(hone::kExitUserError));
    BOOST_TEST(std::string(e.what()).rfind("out of host memory while reading the tokenizer:", 0) == 0, e.what());
  }
}

BOOST_AUTO_TEST_SUITE_END()
