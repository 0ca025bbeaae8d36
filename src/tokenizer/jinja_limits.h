// The bounds a chat template is parsed and rendered within: how deep its statements, expressions and values may
// nest (the parser, the evaluator and Python's str()/json.dumps of a value recurse, so nesting is what bounds
// their stack), how much work one rendering may do and how large a string or list it may build. A template past
// one of them is a TemplateError naming the limit; real chat templates stay far below every one
// (doc/tokenizer.md, "Limits").
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>

namespace hone::jinja {

// Statements inside statements, expressions inside expressions (a chain of 200 `+` or `.attr` counts as 200
// levels), lists and dicts inside lists and dicts.
inline constexpr int kMaxNesting = 200;
// Work units of one rendering: one per statement run, expression evaluated, loop iteration or value visited by a
// comparison or a conversion to text, and one per 256 bytes of text or 8 list items an expression builds.
inline constexpr int64_t kMaxRenderWork = 2'000'000;
// Bytes of any one string a template builds, its rendered text included.
inline constexpr size_t kMaxStringBytes = size_t(64) << 20;
// Items of any one list a template builds (range() stops earlier, at 100,000).
inline constexpr size_t kMaxListItems = size_t(1) << 20;

// The work budget in force: kMaxRenderWork, unless lowered (the fuzz drivers lower it, so that a template that
// spends its whole budget ends well within their hang timeout under the sanitizers).
int64_t render_work_limit();
void set_render_work_limit(int64_t units);

// The messages of the limits, for TemplateError.
std::string nesting_limit_message();
std::string string_limit_message();

// Throws TemplateError (line 0: the evaluator adds the line of the expression) past the string limit.
[[noreturn]] void throw_string_limit();
inline void check_string_size(size_t bytes) {
  if (bytes > kMaxStringBytes) throw_string_limit();
}

// The work budget of the rendering running on this thread. A RenderBudget installs itself for its lifetime (one
// rendering: renderings nest only through separate threads); charge() outside one does nothing.
class RenderBudget {
 public:
  RenderBudget();
  ~RenderBudget();
  RenderBudget(const RenderBudget&) = delete;
  RenderBudget& operator=(const RenderBudget&) = delete;

  // Adds units to the current rendering's work; throws TemplateError (line 0) past kMaxRenderWork.
  static void charge(int64_t units);

 private:
  int64_t used_ = 0;
  RenderBudget* outer_;
};

}  // namespace hone::jinja
