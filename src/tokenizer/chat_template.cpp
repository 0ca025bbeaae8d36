// Loading a tokenizer folder's chat template and rendering conversations with it.
#include "tokenizer/chat_template.h"

#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>

#include "io/json_nesting.h"
#include "runtime/error.h"
#include "runtime/one_line.h"
#include "tokenizer/jinja_error.h"
#include "tokenizer/jinja_eval.h"
#include "tokenizer/jinja_parser.h"
#include "tokenizer/tokenizer.h"
#include "tokenizer/tokenizer_config.h"

namespace hone {

namespace fs = std::filesystem;

namespace {

std::string read_file(const fs::path& path) {
  std::ifstream in(path, std::ios::binary);
  HONE_USER_CHECK(in, path.string(), ": cannot be read");
  std::ostringstream s;
  s << in.rdbuf();
  return s.str();
}

[[noreturn]] void template_failed(const std::string& origin, const jinja::TemplateError& e) {
  // The message may quote the template's own text (a name, a raise_exception message): one line still.
  throw UserError(cat(origin, ": chat template line ", e.line(), ": ", one_line(e.message()),
                      " (hone renders the jinja subset of doc/tokenizer.md; tokenizer.chat_format = \"chatml\", "
                      "\"llama3\" or \"none\" does without the template)"));
}

}  // namespace

ChatTemplate::ChatTemplate(const std::string& source, std::string origin, jinja::Dict special_tokens)
    : origin_(std::move(origin)), special_tokens_(std::move(special_tokens)) {
  try {
    body_ = jinja::parse_template(source);
  } catch (const jinja::TemplateError& e) {
    template_failed(origin_, e);
  }
}

std::unique_ptr<ChatTemplate> ChatTemplate::load(const std::string& dir) {
  if (dir.empty()) return nullptr;
  const fs::path config_path = fs::path(dir) / "tokenizer_config.json";
  nlohmann::json config;
  if (fs::exists(config_path)) {
    try {
      const std::string text = read_file(config_path);
      check_json_nesting(text, config_path.string());
      config = nlohmann::json::parse(text);
    } catch (const nlohmann::json::exception& e) {
      throw UserError(cat(config_path.string(), ": not valid JSON: ", e.what()));
    }
  }
  // The special tokens transformers passes to the template: those set to a string (or {"content": ...}), from
  // tokenizer_config.json or special_tokens_map.json.
  jinja::Dict special;
  for (const auto& [key, text] : tok::read_special_token_names(dir).names) special.emplace_back(key, jinja::Value::string(text));
  const fs::path jinja_path = fs::path(dir) / "chat_template.jinja";
  if (fs::exists(jinja_path)) return std::make_unique<ChatTemplate>(read_file(jinja_path), jinja_path.string(), special);
  if (!config.is_object() || !config.contains("chat_template")) {
    // Older processors of transformers 4.x write {"chat_template": "..."} to chat_template.json.
    const fs::path json_path = fs::path(dir) / "chat_template.json";
    const nlohmann::json j = tok::read_folder_json(json_path.string());
    if (j.is_null()) return nullptr;
    HONE_USER_CHECK(j.is_object() && j.contains("chat_template") && j["chat_template"].is_string(), json_path.string(),
                    ": has no \"chat_template\" string");
    return std::make_unique<ChatTemplate>(j["chat_template"].get<std::string>(), json_path.string(), special);
  }
  const auto& entry = config["chat_template"];
  const std::string origin = config_path.string();
  if (entry.is_string()) return std::make_unique<ChatTemplate>(entry.get<std::string>(), origin, special);
  if (entry.is_array()) {
    for (const auto& named : entry)
      if (named.is_object() && named.value("name", "") == "default" && named.contains("template") && named["template"].is_string())
        return std::make_unique<ChatTemplate>(named["template"].get<std::string>(), origin, special);
    throw UserError(cat(origin, ": chat_template is a list without a \"default\" template"));
  }
  if (entry.is_null()) return nullptr;
  throw UserError(cat(origin, ": chat_template is neither a string nor a list of named templates"));
}

std::string ChatTemplate::render(const std::vector<ChatMessage>& messages, const ChatOptions& options,
                                 const jinja::Dict& extra_variables) const {
  HONE_USER_CHECK(!messages.empty(), "a chat needs at least one message");
  jinja::List list;
  for (const ChatMessage& m : messages)
    list.push_back(jinja::Value::dict({{"role", jinja::Value::string(m.role)}, {"content", jinja::Value::string(m.content)}}));
  jinja::Dict vars = special_tokens_;
  vars.emplace_back("messages", jinja::Value::list(std::move(list)));
  vars.emplace_back("add_generation_prompt", jinja::Value::boolean(options.add_generation_prompt));
  if (options.enable_thinking.has_value()) vars.emplace_back("enable_thinking", jinja::Value::boolean(*options.enable_thinking));
  for (const auto& kv : extra_variables) {
    bool replaced = false;
    for (auto& v : vars)
      if (v.first == kv.first) {
        v.second = kv.second;
        replaced = true;
      }
    if (!replaced) vars.push_back(kv);
  }
  try {
    return jinja::render(body_, vars);
  } catch (const jinja::TemplateError& e) {
    template_failed(origin_, e);
  }
}

std::string ChatTemplate::end_of_turn(const Tokenizer& tok) const {
  static const std::string probe = "hone end of turn probe";
  std::string text;
  try {
    ChatOptions opt;
    opt.add_generation_prompt = false;
    text = render({{"user", "hello"}, {"assistant", probe}}, opt);
  } catch (const UserError&) {
    return "";
  }
  const size_t at = text.rfind(probe);
  if (at == std::string::npos) return "";
  const std::string_view after = std::string_view(text).substr(at + probe.size());
  std::string best;
  for (TokenId id : tok.special_ids()) {
    const std::string t = tok.id_to_token(id);
    if (!t.empty() && t.size() > best.size() && after.substr(0, t.size()) == t) best = t;
  }
  return best;
}

}  // namespace hone
