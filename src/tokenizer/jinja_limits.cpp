// The limits of a chat template's rendering (see jinja_limits.h).
#include "tokenizer/jinja_limits.h"

#include "tokenizer/jinja_error.h"

namespace hone::jinja {

namespace {
thread_local RenderBudget* current = nullptr;
}

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
  if (b->used_ > kMaxRenderWork)
    throw TemplateError(0, "the template does more than " + std::to_string(kMaxRenderWork / 1000000) +
                               " million steps of work for one conversation (hone's limit): a loop without bound?");
}

}  // namespace hone::jinja
