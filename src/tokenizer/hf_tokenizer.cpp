// Loading tokenizer.json and the encode/decode pipeline of a Hugging Face BPE tokenizer.
#include "tokenizer/hf_tokenizer.h"

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <sstream>

#include <nlohmann/json.hpp>

#include "runtime/error.h"

namespace hone::tok {

namespace {

nlohmann::json read_json(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  HONE_USER_CHECK(in, "cannot open ", path);
  std::stringstream ss;
  ss << in.rdbuf();
  try {
    return nlohmann::json::parse(ss.str());
  } catch (const nlohmann::json::exception& e) {
    throw UserError(cat(path, ": not valid JSON: ", e.what()));
  }
}

nlohmann::json member(const nlohmann::json& j, const char* key) {
  const auto it = j.find(key);
  return it == j.end() ? nlohmann::json() : *it;
}

// "<0x0A>" -> 0x0A (the tokens of byte_fallback); -1 otherwise.
int byte_fallback_value(const std::string& t) {
  if (t.size() != 6 || t.compare(0, 3, "<0x") != 0 || t[5] != '>') return -1;
  int v = 0;
  for (int k = 3; k < 5; ++k) {
    const char c = t[static_cast<size_t>(k)];
    v *= 16;
    if (c >= '0' && c <= '9') v += c - '0';
    else if (c >= 'A' && c <= 'F') v += c - 'A' + 10;
    else if (c >= 'a' && c <= 'f') v += c - 'a' + 10;
    else return -1;
  }
  return v;
}

}  // namespace

HfTokenizer::HfTokenizer(const std::string& dir) {
  const std::string path = dir + "/tokenizer.json";
  HONE_USER_CHECK(std::filesystem::is_regular_file(path), "tokenizer: ", path, " not found");
  try {
    const nlohmann::json j = read_json(path);
    model_ = std::make_unique<BpeModel>(j.at("model"));
    vocab_size_ = model_->size();
    // Ids of added tokens are assigned as `tokenizers` assigns them when it loads the file (the "id" field is
    // only checked there): a token already in the model vocabulary keeps that id, any other takes the next id
    // after the model vocabulary and the added tokens before it. The real files agree with their "id" fields.
    TokenId max_added = -1;
    for (const auto& a : member(j, "added_tokens")) {
      AddedToken t;
      t.content = a.at("content").get<std::string>();
      if (t.content.empty() || added_by_content_.count(t.content)) continue;
      t.id = model_->token_to_id(t.content);
      if (t.id < 0) t.id = max_added >= model_->entry_count() ? max_added + 1 : model_->entry_count();
      max_added = std::max(max_added, t.id);
      t.special = a.value("special", false);
      t.lstrip = a.value("lstrip", false);
      t.rstrip = a.value("rstrip", false);
      t.single_word = a.value("single_word", false);
      t.normalized = a.value("normalized", !t.special);
      (t.normalized ? normalized_added_ : raw_added_).add(t);
      added_by_content_[t.content] = t.id;
      vocab_size_ = std::max(vocab_size_, t.id + 1);
      added_by_id_[t.id] = std::move(t);
    }
    load_normalizer(member(j, "normalizer"));
    pre_tokenizer_ = std::make_unique<PreTokenizer>(member(j, "pre_tokenizer"));
    load_post_processor(member(j, "post_processor"));
    load_decoder(member(j, "decoder"));
  } catch (const nlohmann::json::exception& e) {
    throw UserError(cat(path, ": unexpected structure: ", e.what()));
  }
  load_config(dir + "/tokenizer_config.json");
}

void HfTokenizer::load_normalizer(const nlohmann::json& spec) {
  if (spec.is_null()) return;
  const std::string type = spec.value("type", "");
  if (type == "Sequence") {
    for (const auto& s : spec.at("normalizers")) load_normalizer(s);
  } else if (type == "NFC") {
    normalizers_.push_back(NormalForm::NFC);
  } else if (type == "NFD") {
    normalizers_.push_back(NormalForm::NFD);
  } else if (type == "NFKC") {
    normalizers_.push_back(NormalForm::NFKC);
  } else if (type == "NFKD") {
    normalizers_.push_back(NormalForm::NFKD);
  } else {
    throw UserError(cat("tokenizer.json: unsupported normalizer '", type, "' (supported: NFC, NFD, NFKC, NFKD, Sequence)"));
  }
}

void HfTokenizer::load_post_processor(const nlohmann::json& spec) {
  if (spec.is_null()) return;
  const std::string type = spec.value("type", "");
  if (type == "Sequence") {
    for (const auto& s : spec.at("processors")) load_post_processor(s);
  } else if (type == "ByteLevel") {
    // Changes offsets only.
  } else if (type == "TemplateProcessing") {
    const auto& special = spec.at("special_tokens");
    bool seen_sequence = false;
    for (const auto& item : spec.at("single")) {
      if (item.contains("Sequence")) {
        seen_sequence = true;
        continue;
      }
      const std::string name = item.at("SpecialToken").at("id").get<std::string>();
      HONE_USER_CHECK(special.contains(name), "tokenizer.json: template token '", name, "' has no special_tokens entry");
      for (const auto& id : special.at(name).at("ids")) (seen_sequence ? suffix_ : prefix_).push_back(id.get<TokenId>());
    }
  } else if (type == "RobertaProcessing" || type == "BertProcessing") {
    prefix_.push_back(spec.at("cls").at(1).get<TokenId>());
    suffix_.push_back(spec.at("sep").at(1).get<TokenId>());
  } else {
    throw UserError(cat("tokenizer.json: unsupported post-processor '", type, "'"));
  }
}

void HfTokenizer::load_decoder(const nlohmann::json& spec) {
  if (spec.is_null()) {
    decoder_ = Decoder::None;
    return;
  }
  const std::string type = spec.value("type", "");
  if (type == "ByteLevel") {
    decoder_ = Decoder::ByteLevel;
  } else if (type == "Sequence") {
    // Only the byte-fallback family: ByteFallback + Fuse (+ Replace/Strip of the SentencePiece space) is
    // recognized as "tokens as text, <0xNN> as bytes".
    bool byte_fallback = false;
    for (const auto& d : spec.at("decoders")) {
      const std::string t = d.value("type", "");
      if (t == "ByteFallback") byte_fallback = true;
      else if (t != "Fuse") throw UserError(cat("tokenizer.json: unsupported decoder '", t, "' in a Sequence"));
    }
    HONE_USER_CHECK(byte_fallback, "tokenizer.json: unsupported decoder Sequence");
    decoder_ = Decoder::ByteFallbackThenText;
  } else if (type == "ByteFallback") {
    decoder_ = Decoder::ByteFallbackThenText;
  } else {
    throw UserError(cat("tokenizer.json: unsupported decoder '", type, "' (supported: ByteLevel, ByteFallback)"));
  }
}

void HfTokenizer::load_config(const std::string& path) {
  if (!std::filesystem::is_regular_file(path)) return;
  const nlohmann::json c = read_json(path);
  auto token_id = [&](const char* key) -> TokenId {
    const nlohmann::json v = member(c, key);
    std::string s;
    if (v.is_string()) s = v.get<std::string>();
    else if (v.is_object() && v.contains("content")) s = v.at("content").get<std::string>();
    else return -1;
    const TokenId id = token_to_id(s);
    HONE_USER_CHECK(id >= 0, path, ": ", key, " '", s, "' is not a token of tokenizer.json");
    return id;
  };
  bos_ = token_id("bos_token");
  eos_ = token_id("eos_token");
  pad_ = token_id("pad_token");
}

void HfTokenizer::encode_ordinary(std::string_view text, std::vector<TokenId>& ids) const {
  thread_local std::vector<std::string_view> pieces;
  thread_local std::deque<std::string> arena;
  pieces.clear();
  arena.clear();
  pre_tokenizer_->split(text, pieces, arena);
  for (std::string_view p : pieces) model_->encode_piece(p, ids);
}

void HfTokenizer::encode_normalized(std::string_view text, std::vector<TokenId>& ids) const {
  std::string normalized;
  if (!normalizers_.empty()) {
    normalized.assign(text);
    for (NormalForm f : normalizers_) normalized = normalize(normalized, f);
    text = normalized;
  }
  if (normalized_added_.empty()) {
    encode_ordinary(text, ids);
    return;
  }
  for (const TextPiece& p : normalized_added_.split(text)) {
    if (p.id >= 0) ids.push_back(p.id);
    else encode_ordinary(text.substr(p.begin, p.end - p.begin), ids);
  }
}

std::vector<TokenId> HfTokenizer::encode(std::string_view input, bool add_special) const {
  std::string repaired;
  if (!utf8_valid(input)) {
    repaired = utf8_lossy(input);
    input = repaired;
  }
  std::vector<TokenId> ids;
  ids.reserve(input.size() / 3 + 4);
  if (add_special) ids.insert(ids.end(), prefix_.begin(), prefix_.end());
  for (const TextPiece& p : raw_added_.split(input)) {
    if (p.id >= 0) ids.push_back(p.id);
    else encode_normalized(input.substr(p.begin, p.end - p.begin), ids);
  }
  if (add_special) ids.insert(ids.end(), suffix_.begin(), suffix_.end());
  return ids;
}

void HfTokenizer::decode_chunk(std::span<const TokenId> ids, std::string& out) const {
  if (decoder_ == Decoder::ByteFallbackThenText) {
    // As the ByteFallback decoder: a run of <0xNN> tokens becomes its bytes when they are valid UTF-8, else one
    // U+FFFD per byte; other tokens are their text.
    std::string run;
    auto flush = [&] {
      if (utf8_valid(run)) out += run;
      else for (size_t k = 0; k < run.size(); ++k) out += "\xEF\xBF\xBD";
      run.clear();
    };
    for (TokenId id : ids) {
      const int b = byte_fallback_value(model_->token_of(id));
      if (b >= 0) {
        run += static_cast<char>(b);
      } else {
        flush();
        out += model_->token_of(id);
      }
    }
    flush();
    return;
  }
  std::string bytes;
  for (size_t k = 0; k < ids.size(); ++k) {
    if (decoder_ == Decoder::ByteLevel) {
      bytes += model_->bytes_of(ids[k]);
    } else {  // no decoder: the tokens joined with spaces
      if (k) bytes += ' ';
      bytes += model_->token_of(ids[k]);
    }
  }
  out += utf8_lossy(bytes);
}

std::string HfTokenizer::decode(std::span<const TokenId> ids, bool skip_special) const {
  // Runs of model tokens are decoded together; an added token is written as its content between runs.
  std::string out;
  std::vector<TokenId> run;
  for (TokenId id : ids) {
    const auto it = added_by_id_.find(id);
    if (it != added_by_id_.end()) {
      if (skip_special && it->second.special) continue;
      if (!run.empty()) {
        decode_chunk(run, out);
        run.clear();
      }
      out += it->second.content;
    } else if (model_->has_id(id)) {
      run.push_back(id);
    }
  }
  if (!run.empty()) decode_chunk(run, out);
  return out;
}

std::string HfTokenizer::token_bytes(TokenId id) const {
  const auto it = added_by_id_.find(id);
  if (it != added_by_id_.end()) return it->second.content;
  if (!model_->has_id(id)) return "";
  if (decoder_ == Decoder::ByteLevel) return model_->bytes_of(id);
  const int b = decoder_ == Decoder::ByteFallbackThenText ? byte_fallback_value(model_->token_of(id)) : -1;
  return b >= 0 ? std::string(1, static_cast<char>(b)) : model_->token_of(id);
}

TokenId HfTokenizer::token_to_id(std::string_view token) const {
  const auto it = added_by_content_.find(std::string(token));
  if (it != added_by_content_.end()) return it->second;
  return model_->token_to_id(token);
}

std::string HfTokenizer::id_to_token(TokenId id) const {
  const auto it = added_by_id_.find(id);
  if (it != added_by_id_.end()) return it->second.content;
  return model_->has_id(id) ? model_->token_of(id) : std::string();
}

std::vector<TokenId> HfTokenizer::special_ids() const {
  std::vector<TokenId> out;
  for (const auto& [id, t] : added_by_id_)
    if (t.special) out.push_back(id);
  std::sort(out.begin(), out.end());
  return out;
}

bool HfTokenizer::is_special(TokenId id) const {
  const auto it = added_by_id_.find(id);
  return it != added_by_id_.end() && it->second.special;
}

}  // namespace hone::tok
