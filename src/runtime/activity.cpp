// The activity stack (see activity.h). An exception unwinds the Activity objects before the top-level handler
// runs, so the innermost activity at the moment of the throw is remembered when it is popped during unwinding.
#include "runtime/activity.h"

#include <exception>
#include <new>
#include <stdexcept>
#include <vector>

namespace hone {

namespace {
thread_local std::vector<std::string> g_stack;
thread_local std::string g_unwound;  // the innermost activity left while an exception was in flight
}  // namespace

// A new activity starts after any earlier exception was dealt with: what that one unwound is forgotten.
Activity::Activity(std::string what) {
  g_unwound.clear();
  g_stack.push_back(std::move(what));
}

Activity::~Activity() {
  if (std::uncaught_exceptions() > 0 && g_unwound.empty()) g_unwound = g_stack.back();
  g_stack.pop_back();
}

std::string current_activity() {
  if (!g_unwound.empty()) return g_unwound;  // where the exception being handled was thrown: the most precise
  return g_stack.empty() ? std::string() : g_stack.back();
}

std::string resource_failure_message(const std::exception& e) {
  std::string what;
  if (dynamic_cast<const std::bad_alloc*>(&e)) what = "out of host memory";
  else if (dynamic_cast<const std::length_error*>(&e)) what = std::string("a size too large to hold (") + e.what() + ")";
  else return "";
  const std::string activity = current_activity();
  if (!activity.empty()) what += " while " + activity;
  return what + ": the input or the deck asks for more than this machine has (lower the sizes: model, "
                "grpo.num_prompts_per_step, generation lengths, prompt lengths)";
}

}  // namespace hone
