// Parses a chat template into statements (jinja_ast.h), with jinja2's operator precedence. Anything outside the
// subset hone renders (macros, includes, unknown filters or tests ...) is a TemplateError naming the line.
#pragma once

#include <string>

#include "tokenizer/jinja_ast.h"

namespace hone::jinja {

Body parse_template(const std::string& source);

// The filters and tests the evaluator knows (jinja_builtins.cpp): the parser refuses others up front.
bool known_filter(const std::string& name);
bool known_test(const std::string& name);

}  // namespace hone::jinja
