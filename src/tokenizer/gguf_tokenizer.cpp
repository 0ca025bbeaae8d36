// tokenizer.json and tokenizer_config.json from GGUF tokenizer metadata.
#include "tokenizer/gguf_tokenizer.h"

#include <algorithm>
#include <string_view>
#include <unordered_map>
#include <unordered_set>

#include <nlohmann/json.hpp>

#include "runtime/error.h"
#include "tokenizer/utf8.h"

namespace hone::tok {

namespace {

using ojson = nlohmann::ordered_json;

enum TokenType : int32_t { kNormal = 1, kUnknown = 2, kControl = 3, kUserDefined = 4, kUnused = 5, kByte = 6 };

// The Split regexes of Hugging Face's tokenizer.json for Llama 3 and Qwen2 (the same text as those files).
const char* const kLlama3Pattern =
    R"((?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+)";
const char* const kQwen2Pattern =
    R"((?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+)";

ojson byte_level(bool add_prefix_space, bool trim_offsets, bool use_regex) {
  return {{"type", "ByteLevel"}, {"add_prefix_space", add_prefix_space}, {"trim_offsets", trim_offsets},
          {"use_regex", use_regex}};
}

ojson split_regex(const char* pattern) {
  return {{"type", "Split"}, {"pattern", {{"Regex", pattern}}}, {"behavior", "Isolated"}, {"invert", false}};
}

struct Family {
  ojson normalizer, pre_tokenizer;
  bool ignore_merges = false;
  bool trim_offsets = true;  // of the ByteLevel post-processor and decoder
};

Family family_of(const std::string& pre) {
  Family f;
  if (pre == "smollm" || pre == "starcoder") {
    f.pre_tokenizer = {{"type", "Sequence"},
                       {"pretokenizers",
                        {{{"type", "Digits"}, {"individual_digits", true}}, byte_level(false, true, true)}}};
  } else if (pre == "gpt-2" || pre == "default") {
    f.pre_tokenizer = byte_level(false, true, true);
  } else if (pre == "llama-bpe" || pre == "llama3") {
    f.pre_tokenizer = {{"type", "Sequence"}, {"pretokenizers", {split_regex(kLlama3Pattern), byte_level(false, true, false)}}};
    f.ignore_merges = true;
  } else if (pre == "qwen2") {
    f.normalizer = {{"type", "NFC"}};
    f.pre_tokenizer = {{"type", "Sequence"}, {"pretokenizers", {split_regex(kQwen2Pattern), byte_level(false, false, false)}}};
    f.trim_offsets = false;
  } else if (pre.empty()) {
    throw UserError(cat("GGUF tokenizer: tokenizer.ggml.pre is absent, so the pre-tokenizer is unknown (supported: ",
                        gguf_supported_pre_types(), ")"));
  } else {
    throw UserError(cat("GGUF tokenizer: unsupported tokenizer.ggml.pre '", pre, "' (supported: ",
                        gguf_supported_pre_types(), ")"));
  }
  return f;
}

// A JSON string literal; UserError when the text is not valid UTF-8.
std::string quoted(const std::string& s, const char* what, size_t index) {
  try {
    return nlohmann::json(s).dump();
  } catch (const nlohmann::json::exception&) {
    throw UserError(cat("GGUF tokenizer: ", what, " ", index, " is not valid UTF-8"));
  }
}

// The merges of a SentencePiece vocabulary, derived from the tokens and their scores the way Hugging Face's
// converters derive them: every split of a token into two tokens (at character boundaries) is a merge; a token's
// splits are ordered by the scores of their left, then right part, highest first, and all merges by the score of
// the token they make, highest first (ties keep token order).
std::vector<std::pair<std::string, std::string>> merges_from_scores(const GgufVocab& v) {
  std::unordered_map<std::string_view, float> score;
  score.reserve(v.tokens.size());
  for (size_t i = 0; i < v.tokens.size(); ++i) score[v.tokens[i]] = v.scores[i];  // a repeated token: the last score
  struct Merge {
    float score, left, right;
    size_t token, split;
  };
  std::vector<Merge> all;
  std::unordered_set<std::string_view> seen;
  for (size_t t = 0; t < v.tokens.size(); ++t) {
    const std::string& tok = v.tokens[t];
    if (!seen.insert(tok).second) continue;
    const size_t first = all.size();
    size_t i = 0;
    utf8_next(tok, i);
    while (i < tok.size()) {
      const std::string_view l(tok.data(), i), r(tok.data() + i, tok.size() - i);
      const auto il = score.find(l), ir = score.find(r);
      if (il != score.end() && ir != score.end()) all.push_back({score.at(tok), il->second, ir->second, t, i});
      utf8_next(tok, i);
    }
    std::stable_sort(all.begin() + static_cast<std::ptrdiff_t>(first), all.end(), [](const Merge& a, const Merge& b) {
      return a.left != b.left ? a.left > b.left : a.right > b.right;
    });
  }
  std::stable_sort(all.begin(), all.end(), [](const Merge& a, const Merge& b) { return a.score > b.score; });
  std::vector<std::pair<std::string, std::string>> out;
  out.reserve(all.size());
  for (const Merge& m : all) {
    const std::string& tok = v.tokens[m.token];
    out.emplace_back(tok.substr(0, m.split), tok.substr(m.split));
  }
  return out;
}

}  // namespace

const char* gguf_supported_pre_types() { return "smollm, starcoder, gpt-2, default, llama-bpe, llama3, qwen2"; }

TokenizerFiles tokenizer_files_from_gguf(const GgufVocab& v) {
  HONE_USER_CHECK(v.model == "gpt2" || v.model == "llama", "GGUF tokenizer: unsupported tokenizer.ggml.model '",
                  v.model, "' (supported: gpt2, llama)");
  const bool spm = v.model == "llama";
  const Family family = spm ? Family{} : family_of(v.pre);
  const auto n = static_cast<int32_t>(v.tokens.size());
  HONE_USER_CHECK(n > 0, "GGUF tokenizer: tokenizer.ggml.tokens is empty");
  HONE_USER_CHECK(v.token_types.empty() || v.token_types.size() == v.tokens.size(), "GGUF tokenizer: ",
                  v.token_types.size(), " token types for ", v.tokens.size(), " tokens");
  auto check_id = [&](int32_t id, const char* key) {
    HONE_USER_CHECK(id >= -1 && id < n, "GGUF tokenizer: tokenizer.ggml.", key, " = ", id, " is not a token id (",
                    n, " tokens)");
  };
  check_id(v.bos, "bos_token_id");
  check_id(v.eos, "eos_token_id");
  check_id(v.unk, "unknown_token_id");
  check_id(v.pad, "padding_token_id");
  check_id(v.eot, "eot_token_id");
  // SentencePiece models add BOS unless told otherwise (llama.cpp and transformers' Llama tokenizer agree).
  const bool add_bos = v.add_bos.value_or(spm), add_eos = v.add_eos.value_or(false);
  HONE_USER_CHECK(!add_bos || v.bos >= 0, "GGUF tokenizer: add_bos_token is true but there is no bos_token_id");
  HONE_USER_CHECK(!add_eos || v.eos >= 0, "GGUF tokenizer: add_eos_token is true but there is no eos_token_id");

  // The vocabulary: token -> id, every token of the GGUF (a repeated text keeps its first id).
  std::unordered_map<std::string_view, int32_t> id_of;
  id_of.reserve(v.tokens.size());
  std::string vocab = "{";
  for (int32_t id = 0; id < n; ++id) {
    const std::string& t = v.tokens[static_cast<size_t>(id)];
    HONE_USER_CHECK(!t.empty(), "GGUF tokenizer: token ", id, " is empty");
    if (!id_of.emplace(t, id).second) continue;
    if (vocab.size() > 1) vocab += ',';
    vocab += quoted(t, "token", static_cast<size_t>(id));
    vocab += ':';
    vocab += std::to_string(id);
  }
  vocab += '}';
  HONE_USER_CHECK(!spm || v.scores.size() == v.tokens.size(), "GGUF tokenizer: a SentencePiece vocabulary needs "
                  "tokenizer.ggml.scores (", v.scores.size(), " scores for ", v.tokens.size(), " tokens)");
  std::string merges = "[";
  if (spm && v.merges.empty()) {
    // Derived merges are written as pairs: a SentencePiece token may hold a space.
    const auto pairs = merges_from_scores(v);
    for (size_t k = 0; k < pairs.size(); ++k) {
      if (k) merges += ',';
      merges += '[' + quoted(pairs[k].first, "token", k) + ',' + quoted(pairs[k].second, "token", k) + ']';
    }
  } else {
    for (size_t k = 0; k < v.merges.size(); ++k) {
      const std::string& m = v.merges[k];
      const size_t sp = m.find(' ', 1);
      HONE_USER_CHECK(sp != std::string::npos && sp + 1 < m.size(), "GGUF tokenizer: merge ", k, " '", m,
                      "' is not two tokens separated by a space");
      const std::string a = m.substr(0, sp), b = m.substr(sp + 1);
      HONE_USER_CHECK(id_of.count(a) && id_of.count(b) && id_of.count(a + b), "GGUF tokenizer: merge ", k, " '", m,
                      "' names a token missing from the vocabulary");
      if (k) merges += ',';
      merges += quoted(m, "merge", k);
    }
  }
  merges += ']';

  // Added tokens: control and unknown tokens are special, user-defined ones are not.
  ojson added = ojson::array(), decoder_entries = ojson::object();
  for (int32_t id = 0; id < n; ++id) {
    const int32_t type = v.token_types.empty() ? kNormal : v.token_types[static_cast<size_t>(id)];
    if (type != kControl && type != kUnknown && type != kUserDefined) continue;
    const std::string& t = v.tokens[static_cast<size_t>(id)];
    if (id_of.at(t) != id) continue;
    const bool special = type != kUserDefined;
    added.push_back({{"id", id}, {"content", t}, {"single_word", false}, {"lstrip", false}, {"rstrip", false},
                     {"normalized", !special}, {"special", special}});
    decoder_entries[std::to_string(id)] = {{"content", t}, {"lstrip", false}, {"normalized", !special},
                                           {"rstrip", false}, {"single_word", false}, {"special", special}};
  }

  ojson post = spm ? ojson(nullptr) : byte_level(true, false, true);
  if (add_bos || add_eos) {
    auto piece = [](const std::string& id, int type_id) { return ojson{{"SpecialToken", {{"id", id}, {"type_id", type_id}}}}; };
    auto seq = [](const char* id, int type_id) { return ojson{{"Sequence", {{"id", id}, {"type_id", type_id}}}}; };
    const std::string bos = add_bos ? v.tokens[static_cast<size_t>(v.bos)] : std::string();
    const std::string eos = add_eos ? v.tokens[static_cast<size_t>(v.eos)] : std::string();
    ojson single = ojson::array(), pair = ojson::array(), special = ojson::object();
    if (add_bos) {
      single.push_back(piece(bos, 0));
      pair.push_back(piece(bos, 0));
      special[bos] = {{"id", bos}, {"ids", {v.bos}}, {"tokens", {bos}}};
    }
    single.push_back(seq("A", 0));
    pair.push_back(seq("A", 0));
    if (add_eos) {
      single.push_back(piece(eos, 0));
      pair.push_back(piece(eos, 0));
      special[eos] = {{"id", eos}, {"ids", {v.eos}}, {"tokens", {eos}}};
    }
    if (add_bos) pair.push_back(piece(bos, 1));
    pair.push_back(seq("B", 1));
    if (add_eos) pair.push_back(piece(eos, 1));
    const ojson templ = {{"type", "TemplateProcessing"}, {"single", single}, {"pair", pair}, {"special_tokens", special}};
    post = spm ? templ : ojson{{"type", "Sequence"}, {"processors", {byte_level(true, false, true), templ}}};
  }

  ojson tj;
  tj["version"] = "1.0";
  tj["truncation"] = nullptr;
  tj["padding"] = nullptr;
  tj["added_tokens"] = added;
  if (spm) {
    // As Llama 2's tokenizer.json: "▁" for spaces, prepended unless add_space_prefix is false; characters
    // missing from the vocabulary fall back to <0xNN> tokens, else <unk>.
    const bool prefix = v.add_space_prefix.value_or(true);
    ojson norm = ojson::array();
    if (prefix) norm.push_back({{"type", "Prepend"}, {"prepend", "\u2581"}});
    norm.push_back({{"type", "Replace"}, {"pattern", {{"String", " "}}}, {"content", "\u2581"}});
    tj["normalizer"] = {{"type", "Sequence"}, {"normalizers", norm}};
    tj["pre_tokenizer"] = nullptr;
    tj["post_processor"] = post;
    ojson dec = {{{"type", "Replace"}, {"pattern", {{"String", "\u2581"}}}, {"content", " "}},
                 {{"type", "ByteFallback"}}, {{"type", "Fuse"}}};
    if (prefix) dec.push_back({{"type", "Strip"}, {"content", " "}, {"start", 1}, {"stop", 0}});
    tj["decoder"] = {{"type", "Sequence"}, {"decoders", dec}};
    tj["model"] = {{"type", "BPE"}, {"dropout", nullptr}, {"unk_token", v.unk >= 0 ? ojson(v.tokens[size_t(v.unk)]) : ojson(nullptr)},
                   {"continuing_subword_prefix", nullptr}, {"end_of_word_suffix", nullptr}, {"fuse_unk", true},
                   {"byte_fallback", true}, {"ignore_merges", false}, {"vocab", "@VOCAB@"}, {"merges", "@MERGES@"}};
  } else {
    tj["normalizer"] = family.normalizer;
    tj["pre_tokenizer"] = family.pre_tokenizer;
    tj["post_processor"] = post;
    tj["decoder"] = byte_level(true, true, true);
    // Byte-level BPE has no unk_token in Hugging Face's files (every byte has a token, or a missing one is dropped).
    tj["model"] = {{"type", "BPE"}, {"dropout", nullptr}, {"unk_token", nullptr}, {"continuing_subword_prefix", nullptr},
                   {"end_of_word_suffix", nullptr}, {"fuse_unk", false}, {"byte_fallback", false},
                   {"ignore_merges", family.ignore_merges}, {"vocab", "@VOCAB@"}, {"merges", "@MERGES@"}};
  }
  std::string text = tj.dump(2);
  for (const auto& [key, value] : {std::pair<std::string, const std::string*>{"\"@VOCAB@\"", &vocab},
                                   std::pair<std::string, const std::string*>{"\"@MERGES@\"", &merges}}) {
    const size_t at = text.rfind(key);
    text.replace(at, key.size(), *value);
  }

  ojson config;
  config["add_bos_token"] = add_bos;
  config["add_eos_token"] = add_eos;
  config["added_tokens_decoder"] = decoder_entries;
  auto name = [&](int32_t id) { return id >= 0 ? ojson(v.tokens[static_cast<size_t>(id)]) : ojson(nullptr); };
  config["bos_token"] = name(v.bos);
  if (!v.chat_template.empty()) config["chat_template"] = v.chat_template;
  config["clean_up_tokenization_spaces"] = false;
  config["eos_token"] = name(v.eos >= 0 ? v.eos : v.eot);
  config["pad_token"] = name(v.pad);
  config["tokenizer_class"] = "PreTrainedTokenizerFast";
  config["unk_token"] = name(v.unk);
  try {
    return {std::move(text), config.dump(2)};
  } catch (const nlohmann::json::exception&) {
    throw UserError("GGUF tokenizer: the chat template or a special token is not valid UTF-8");
  }
}

}  // namespace hone::tok
