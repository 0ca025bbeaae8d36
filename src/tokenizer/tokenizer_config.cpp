// Reading the special-token names of tokenizer_config.json and special_tokens_map.json.
#include "tokenizer/tokenizer_config.h"

#include <filesystem>
#include <fstream>
#include <sstream>

#include <nlohmann/json.hpp>

#include "io/json_nesting.h"
#include "runtime/error.h"

namespace hone::tok {

namespace {

const char* const kKeys[] = {"bos_token", "eos_token", "unk_token", "sep_token", "pad_token", "cls_token", "mask_token"};

}  // namespace

const std::string* SpecialTokenNames::find(const std::string& key) const {
  for (const auto& [k, v] : names)
    if (k == key) return &v;
  return nullptr;
}

std::string special_token_text(const nlohmann::json& value) {
  if (value.is_string()) return value.get<std::string>();
  if (value.is_object()) {
    const auto it = value.find("content");
    if (it != value.end() && it->is_string()) return it->get<std::string>();
  }
  return "";
}

nlohmann::json read_folder_json(const std::string& path) {
  if (!std::filesystem::is_regular_file(path)) return nullptr;
  std::ifstream in(path, std::ios::binary);
  HONE_USER_CHECK(in, "cannot open ", path);
  std::stringstream ss;
  ss << in.rdbuf();
  check_json_nesting(ss.str(), path);
  try {
    return nlohmann::json::parse(ss.str());
  } catch (const nlohmann::json::exception& e) {
    throw UserError(cat(path, ": not valid JSON: ", e.what()));
  }
}

SpecialTokenNames read_special_token_names(const std::string& dir) {
  SpecialTokenNames out;
  if (dir.empty()) return out;
  const nlohmann::json config = read_folder_json(dir + "/tokenizer_config.json");
  const nlohmann::json map = read_folder_json(dir + "/special_tokens_map.json");
  for (const char* key : kKeys) {
    std::string text;
    bool present = false;
    for (const nlohmann::json* j : {&config, &map}) {
      if (!j->is_object()) continue;
      const auto it = j->find(key);
      if (it == j->end()) continue;
      const std::string t = special_token_text(*it);
      if (!t.empty()) {
        text = t;
        present = true;
      } else if (it->is_null() && j == &config) {
        present = false;  // null in tokenizer_config.json: none (special_tokens_map.json may still name one)
      }
    }
    if (present) out.names.emplace_back(key, text);
  }
  return out;
}

}  // namespace hone::tok
