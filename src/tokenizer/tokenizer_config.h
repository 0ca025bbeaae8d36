// The special-token names of a Hugging Face tokenizer folder, as transformers 4.x and 5.x write them:
// tokenizer_config.json ("eos_token": "<|im_end|>", an AddedToken object {"content": ...}, or null) and
// special_tokens_map.json (same forms; where both name a token, special_tokens_map.json wins, as transformers
// reads them). Keys absent from both files are absent here.
#pragma once

#include <string>
#include <utility>
#include <vector>

#include <nlohmann/json_fwd.hpp>

namespace hone::tok {

// The keys read: bos_token, eos_token, unk_token, sep_token, pad_token, cls_token, mask_token.
struct SpecialTokenNames {
  std::vector<std::pair<std::string, std::string>> names;  // key -> token text, in key order
  const std::string* find(const std::string& key) const;
};

// The text of one entry: a string, or an object's "content"; "" for null and anything else.
std::string special_token_text(const nlohmann::json& value);

SpecialTokenNames read_special_token_names(const std::string& dir);

// A JSON file of the folder, null when the file does not exist; UserError naming the file when it is not JSON.
nlohmann::json read_folder_json(const std::string& path);

}  // namespace hone::tok
