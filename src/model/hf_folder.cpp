// The files of a ready Hugging Face model folder besides the weights (see hf_folder.h).
#include "model/hf_folder.h"

#include <filesystem>
#include <nlohmann/json.hpp>

#include "io/atomic_file.h"
#include "runtime/error.h"

namespace hone {

namespace fs = std::filesystem;

int copy_tokenizer_files(const std::string& from, const std::string& to) {
  static const char* const kFiles[] = {"tokenizer.json",    "tokenizer_config.json", "special_tokens_map.json",
                                       "added_tokens.json", "chat_template.jinja",   "chat_template.json",
                                       "vocab.json",        "merges.txt",            "tokenizer.model"};
  int copied = 0;
  for (const char* f : kFiles) {
    const fs::path src = fs::path(from) / f;
    if (!fs::is_regular_file(src)) continue;
    std::error_code ec;
    fs::copy_file(src, fs::path(to) / f, fs::copy_options::overwrite_existing, ec);
    HONE_USER_CHECK(!ec, "cannot copy ", src.string(), " to ", to, ": ", ec.message());
    ++copied;
  }
  return copied;
}

void write_generation_config(const std::string& model_dir, const ModelConfig& c, int eos_id, const std::string& to) {
  const fs::path own = fs::path(model_dir) / "generation_config.json";
  if (!model_dir.empty() && fs::is_regular_file(own)) {
    std::error_code ec;
    fs::copy_file(own, fs::path(to) / "generation_config.json", fs::copy_options::overwrite_existing, ec);
    HONE_USER_CHECK(!ec, "cannot copy ", own.string(), " to ", to, ": ", ec.message());
    return;
  }
  nlohmann::json g;
  if (c.bos_token_id >= 0) g["bos_token_id"] = c.bos_token_id;
  if (c.eos_token_ids.size() == 1) g["eos_token_id"] = c.eos_token_ids[0];
  else if (!c.eos_token_ids.empty()) g["eos_token_id"] = c.eos_token_ids;
  else if (eos_id >= 0) g["eos_token_id"] = eos_id;
  write_file_atomic((fs::path(to) / "generation_config.json").string(), g.dump(2) + "\n");
}

void write_hf_side_files(const std::string& dir, const ModelConfig& c, const std::string& model_dir,
                         const std::string& tokenizer_dir, int eos_id) {
  write_generation_config(model_dir, c, eos_id, dir);
  if (!tokenizer_dir.empty()) copy_tokenizer_files(tokenizer_dir, dir);
}

}  // namespace hone
