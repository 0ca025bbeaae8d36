// The filters, tests, global functions and str/dict methods a chat template may call, with Python's behaviour
// where the result is text (str.split, str.strip, json.dumps ...).
#pragma once

#include <string>
#include <utility>
#include <vector>

#include "tokenizer/jinja_value.h"

namespace hone::jinja {

struct CallArgs {
  std::vector<Value> positional;
  std::vector<std::pair<std::string, Value>> keyword;
  int line = 0;

  // Argument i (0-based, after the operand) given by position or by name; nullptr when absent.
  const Value* get(size_t i, const char* name) const;
};

Value apply_filter(const std::string& name, const Value& operand, const CallArgs& args);
bool apply_test(const std::string& name, const Value& operand, const CallArgs& args);
// raise_exception, namespace, dict, range, strftime_now.
bool is_global_function(const std::string& name);
Value call_global(const std::string& name, const CallArgs& args);
// obj.name(args) for str, dict and list objects; throws TemplateError for an unknown method.
Value call_method(const Value& obj, const std::string& name, const CallArgs& args);

}  // namespace hone::jinja
