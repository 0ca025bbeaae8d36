// Loading tokenizer.json and the encode/decode pipeline of a Hugging Face BPE tokenizer.
#include "tokenizer/hf_tokenizer.h"

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <sstream>

#include <nlohmann/json.hpp>

#include "runtime/error.h"
#include "runtime/one_line.h"
#include "tokenizer/byte_level.h"
#include "tokenizer/tokenizer_config.h"

namespace hone::tok {

namespace {

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

// The String of a {"String": ...} pattern; UserError for a Regex one (what names it).
std::string string_pattern(const nlohmann::json& pattern, const char* what) {
  if (pattern.is_object() && pattern.contains("String")) return pattern.at("String").get<std::string>();
  throw UserError(cat("tokenizer.json: unsupported ", what, " pattern ", pattern.dump(), " (only String patterns)"));
}

std::string replace_all(std::string_view s, const std::string& from, const std::string& to) {
  if (from.empty()) return std::string(s);
  std::string out;
  size_t pos = 0;
  while (true) {
    const size_t at = s.find(from, pos);
    if (at == std::string_view::npos) break;
    out.append(s.substr(pos, at - pos));
    out += to;
    pos = at + from.size();
  }
  out.append(s.substr(pos));
  return out;
}

const char* const kReplacementChar = "\xEF\xBF\xBD";

}  // namespace

HfTokenizer::HfTokenizer(const std::string& dir) {
  const std::string path = dir + "/tokenizer.json";
  HONE_USER_CHECK(std::filesystem::is_regular_file(path), "tokenizer: ", path, " not found");
  try {
    const nlohmann::json j = read_folder_json(path);
    pre_tokenizer_ = std::make_unique<PreTokenizer>(member(j, "pre_tokenizer"));
    model_ = std::make_unique<BpeModel>(j.at("model"), pre_tokenizer_->byte_level());
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
    load_post_processor(member(j, "post_processor"));
    const nlohmann::json decoder = member(j, "decoder");
    has_decoder_ = !decoder.is_null();
    if (has_decoder_) load_decoder(decoder);
    byte_level_decode_ = decoders_.size() == 1 && decoders_[0].kind == Decoder::Kind::ByteLevel;
  } catch (const nlohmann::json::exception& e) {
    throw UserError(cat(path, ": unexpected structure: ", e.what()));
  }
  load_config(dir);
}

void HfTokenizer::load_normalizer(const nlohmann::json& spec) {
  if (spec.is_null()) return;
  const std::string type = spec.value("type", "");
  Normalizer n;
  if (type == "Sequence") {
    for (const auto& s : spec.at("normalizers")) load_normalizer(s);
    return;
  } else if (type == "NFC") {
    n.form = NormalForm::NFC;
  } else if (type == "NFD") {
    n.form = NormalForm::NFD;
  } else if (type == "NFKC") {
    n.form = NormalForm::NFKC;
  } else if (type == "NFKD") {
    n.form = NormalForm::NFKD;
  } else if (type == "Prepend") {
    n.kind = Normalizer::Kind::Prepend;
    n.a = spec.at("prepend").get<std::string>();
  } else if (type == "Replace") {
    n.kind = Normalizer::Kind::Replace;
    n.a = string_pattern(spec.at("pattern"), "Replace normalizer");
    n.b = spec.at("content").get<std::string>();
  } else {
    throw UserError(cat("tokenizer.json: unsupported normalizer '", type,
                        "' (supported: NFC, NFD, NFKC, NFKD, Prepend, Replace, Sequence)"));
  }
  normalize_steps_.push_back(std::move(n));
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
  const std::string type = spec.value("type", "");
  Decoder d;
  if (type == "Sequence") {
    for (const auto& s : spec.at("decoders")) load_decoder(s);
    return;
  } else if (type == "ByteLevel") {
    d.kind = Decoder::Kind::ByteLevel;
  } else if (type == "ByteFallback") {
    d.kind = Decoder::Kind::ByteFallback;
    byte_fallback_decode_ = true;
  } else if (type == "Fuse") {
    d.kind = Decoder::Kind::Fuse;
  } else if (type == "Replace") {
    d.kind = Decoder::Kind::Replace;
    d.a = string_pattern(spec.at("pattern"), "Replace decoder");
    d.b = spec.at("content").get<std::string>();
  } else if (type == "Strip") {
    d.kind = Decoder::Kind::Strip;
    d.a = spec.at("content").get<std::string>();
    size_t n = 0;
    utf8_next(d.a, n);
    HONE_USER_CHECK(!d.a.empty() && n == d.a.size(), "tokenizer.json: Strip decoder content '", d.a,
                    "' is not one character");
    d.start = spec.value("start", size_t{0});
    d.stop = spec.value("stop", size_t{0});
  } else if (type == "Metaspace") {
    d.kind = Decoder::Kind::Metaspace;
    d.a = spec.value("replacement", "\u2581");
    std::string scheme = spec.value("prepend_scheme", "");
    if (scheme.empty()) scheme = spec.value("add_prefix_space", true) ? "always" : "never";
    d.prepend = scheme != "never";
  } else {
    throw UserError(cat("tokenizer.json: unsupported decoder '", type,
                        "' (supported: ByteLevel, ByteFallback, Fuse, Replace, Strip, Metaspace, Sequence)"));
  }
  decoders_.push_back(std::move(d));
}

void HfTokenizer::load_config(const std::string& dir) {
  const SpecialTokenNames names = read_special_token_names(dir);
  auto token_id = [&](const char* key) -> TokenId {
    const std::string* s = names.find(key);
    if (!s) return -1;
    const TokenId id = token_to_id(*s);
    HONE_USER_CHECK(id >= 0, dir, ": ", key, " '", one_line_excerpt(*s), "' (tokenizer_config.json or special_tokens_map.json) is not a token of tokenizer.json");
    return id;
  };
  bos_ = token_id("bos_token");
  eos_ = token_id("eos_token");
  pad_ = token_id("pad_token");
}

void HfTokenizer::encode_ordinary(std::string_view text, bool at_start, std::vector<TokenId>& ids) const {
  thread_local std::vector<std::string_view> pieces;
  thread_local std::deque<std::string> arena;
  pieces.clear();
  arena.clear();
  pre_tokenizer_->split(text, pieces, arena, at_start);
  for (std::string_view p : pieces) model_->encode_piece(p, ids);
}

std::string HfTokenizer::normalize_text(std::string_view text) const {
  std::string s(text);
  for (const Normalizer& n : normalize_steps_) {
    switch (n.kind) {
      case Normalizer::Kind::Form: s = normalize(s, n.form); break;
      case Normalizer::Kind::Prepend: if (!s.empty()) s.insert(0, n.a); break;
      case Normalizer::Kind::Replace: s = replace_all(s, n.a, n.b); break;
    }
  }
  return s;
}

void HfTokenizer::encode_normalized(std::string_view text, bool at_start, std::vector<TokenId>& ids) const {
  std::string normalized;
  if (!normalize_steps_.empty()) {
    normalized = normalize_text(text);
    text = normalized;
  }
  if (normalized_added_.empty()) {
    encode_ordinary(text, at_start, ids);
    return;
  }
  for (const TextPiece& p : normalized_added_.split(text)) {
    if (p.id >= 0) ids.push_back(p.id);
    else encode_ordinary(text.substr(p.begin, p.end - p.begin), at_start && p.begin == 0, ids);
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
    else encode_normalized(input.substr(p.begin, p.end - p.begin), p.begin == 0, ids);
  }
  if (add_special) ids.insert(ids.end(), suffix_.begin(), suffix_.end());
  return ids;
}

// The decoders of `tokenizers` over the token texts, in order; the results joined.
std::string HfTokenizer::decode_pipeline(std::vector<std::string> tokens) const {
  if (!has_decoder_) {
    std::string out;
    for (size_t k = 0; k < tokens.size(); ++k) {
      if (k) out += ' ';
      out += tokens[k];
    }
    return out;
  }
  const ByteLevelAlphabet& alphabet = byte_level_alphabet();
  std::vector<std::string> next;
  for (const Decoder& d : decoders_) {
    next.clear();
    switch (d.kind) {
      case Decoder::Kind::ByteLevel: {
        std::string bytes, raw;
        for (const std::string& t : tokens) bytes += alphabet.to_bytes(t, &raw) ? raw : t;
        next.push_back(utf8_lossy(bytes));
        break;
      }
      case Decoder::Kind::ByteFallback: {
        // A run of <0xNN> tokens becomes its bytes when they are valid UTF-8, else one U+FFFD per byte.
        std::string run;
        auto flush = [&] {
          if (run.empty()) return;
          if (utf8_valid(run)) next.push_back(run);
          else for (size_t k = 0; k < run.size(); ++k) next.push_back(kReplacementChar);
          run.clear();
        };
        for (std::string& t : tokens) {
          const int b = byte_fallback_value(t);
          if (b >= 0) {
            run += static_cast<char>(b);
          } else {
            flush();
            next.push_back(std::move(t));
          }
        }
        flush();
        break;
      }
      case Decoder::Kind::Fuse: {
        std::string all;
        for (const std::string& t : tokens) all += t;
        next.push_back(std::move(all));
        break;
      }
      case Decoder::Kind::Replace:
        for (const std::string& t : tokens) next.push_back(replace_all(t, d.a, d.b));
        break;
      case Decoder::Kind::Strip:
        // Up to `start` leading and `stop` trailing copies of the character, per token.
        for (std::string& t : tokens) {
          size_t b = 0, e = t.size();
          for (size_t k = 0; k < d.start && t.compare(b, d.a.size(), d.a) == 0 && b + d.a.size() <= e; ++k) b += d.a.size();
          for (size_t k = 0; k < d.stop && e >= b + d.a.size() && t.compare(e - d.a.size(), d.a.size(), d.a) == 0; ++k)
            e -= d.a.size();
          next.push_back(t.substr(b, e - b));
        }
        break;
      case Decoder::Kind::Metaspace:
        // The replacement is a space again, except in the first token, where it is dropped (prepend_scheme).
        for (size_t k = 0; k < tokens.size(); ++k)
          next.push_back(replace_all(tokens[k], d.a, k == 0 && d.prepend ? std::string() : std::string(" ")));
        break;
    }
    tokens.swap(next);
  }
  std::string out;
  for (const std::string& t : tokens) out += t;
  return out;
}

std::string HfTokenizer::decode(std::span<const TokenId> ids, bool skip_special) const {
  if (byte_level_decode_) {
    // The fast path of the ByteLevel decoder: every token's bytes (an added token's content mapped through the
    // byte alphabet where it can be), then one lossy UTF-8 repair.
    std::string bytes;
    for (TokenId id : ids) {
      const auto it = added_by_id_.find(id);
      if (it != added_by_id_.end()) {
        if (skip_special && it->second.special) continue;
        bytes += token_bytes(id);
      } else if (model_->has_id(id)) {
        bytes += model_->bytes_of(id);
      }
    }
    return utf8_lossy(bytes);
  }
  std::vector<std::string> tokens;
  tokens.reserve(ids.size());
  for (TokenId id : ids) {
    const auto it = added_by_id_.find(id);
    if (it != added_by_id_.end()) {
      if (skip_special && it->second.special) continue;
      tokens.push_back(it->second.content);
    } else if (model_->has_id(id)) {
      tokens.push_back(model_->token_of(id));
    }
  }
  return utf8_lossy(decode_pipeline(std::move(tokens)));
}

std::string HfTokenizer::token_bytes(TokenId id) const {
  const auto it = added_by_id_.find(id);
  const bool added = it != added_by_id_.end();
  if (!added && !model_->has_id(id)) return "";
  const std::string& text = added ? it->second.content : model_->token_of(id);
  if (byte_level_decode_) {
    if (!added) return model_->bytes_of(id);
    std::string raw;
    return byte_level_alphabet().to_bytes(text, &raw) ? raw : text;
  }
  // Out of context: a <0xNN> token is its byte, a ByteLevel token its bytes, the Replace and Metaspace decoders
  // turn their pattern into its replacement (Strip and the first token's Metaspace prefix need the whole text).
  if (byte_fallback_decode_) {
    const int b = byte_fallback_value(text);
    if (b >= 0) return std::string(1, static_cast<char>(b));
  }
  std::string s = text;
  for (const Decoder& d : decoders_) {
    if (d.kind == Decoder::Kind::Replace) s = replace_all(s, d.a, d.b);
    else if (d.kind == Decoder::Kind::Metaspace) s = replace_all(s, d.a, " ");
    else if (d.kind == Decoder::Kind::ByteLevel) {
      std::string raw;
      if (byte_level_alphabet().to_bytes(s, &raw)) s = raw;
    }
  }
  return s;
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
