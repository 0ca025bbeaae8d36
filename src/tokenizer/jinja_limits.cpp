// The limits of a chat template's rendering (see jinja_limits.h).
#include "tokenizer/jinja_limits.h"

#include <atomic>

#include "tokenizer/jinja_error.h"

namespace hone::jinja {

namespace {
thread_local RenderBudget* current = nullptr;
std::atomic<int64_t> work_limit{kMaxRenderWork};
}  // namespace

int64_t render_work_limit() { return work_limit.load(); }
void set_render_work_limit(int64_t units) { work_limit.store(units); }

std::string nesting_limit_message() {
  return "the template nests deeper than " + std::to_string(kMaxNesting) + " levels (hone's limit)";
}

std::string string_limit_message() {
  return "the template builds a string longer than " + std::to_string(kMaxStringBytes >> 20) + " MiB (hone's limit)";
}

void throw_string_limit() { throw TemplateError(0, string_limit_message()); }

RenderBudget::RenderBudget() : outer_(current) { current = this; }
RenderBudget::~RenderBudget() { current = outer_; }

void RenderBudget::charge(int64_t units) {
  RenderBudget* b = current;
  if (!b) return;
  b->used_ += units;
  const int64_t limit = work_limit.load(std::memory_order_relaxed);
  if (b->used_ > limit)
    throw TemplateError(0, "the template does more than " +
                               (limit % 1000000 == 0 ? std::to_string(limit / 1000000) + " million"
                                                     : std::to_string(limit)) +
                               " steps of work for one conversation (hone's limit): a loop without bound?");
}

}  // namespace hone::jinja
