// What hone is busy with, for the few errors that cannot say it themselves: an allocation that fails
// (std::bad_alloc) or a size a container refuses (std::length_error) deep inside a library. The top-level handler
// (runtime/fatal.cpp) names the innermost activity of the thread that threw, so the user reads
// "out of host memory while reading the prompts in data.jsonl" instead of "std::bad_alloc".
#pragma once

#include <exception>
#include <string>

namespace hone {

// Scoped: the activity lasts as long as the object. Nested activities are kept; the innermost is reported.
class Activity {
 public:
  explicit Activity(std::string what);
  ~Activity();
  Activity(const Activity&) = delete;
  Activity& operator=(const Activity&) = delete;
};

// The innermost activity when the exception being handled was thrown (the activities it unwound included), else
// the innermost one of this thread; "" when none.
std::string current_activity();

// For std::bad_alloc and std::length_error: a one-line message saying what failed, while doing what, and what to
// change; "" for any other exception.
std::string resource_failure_message(const std::exception& e);

}  // namespace hone
