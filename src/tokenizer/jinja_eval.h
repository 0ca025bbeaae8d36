// Renders a parsed chat template (jinja_ast.h) with the given variables, with jinja2's scoping (a for loop's
// iteration is its own scope; if is not) and its default Undefined.
#pragma once

#include <string>

#include "tokenizer/jinja_ast.h"

namespace hone::jinja {

// Throws TemplateError naming the template line of the failing construct.
std::string render(const Body& body, const Dict& variables);

}  // namespace hone::jinja
