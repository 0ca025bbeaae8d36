// Tokenizer files built from GGUF metadata (tokenizer/gguf_tokenizer.h): a small synthetic byte-level vocabulary
// for each supported tokenizer.ggml.pre, loaded back by the "hf" tokenizer, and the refusals.
#include <boost/test/unit_test.hpp>

#include <fstream>
#include <nlohmann/json.hpp>

#include "common/paths.h"
#include "runtime/error.h"
#include "tokenizer/byte_level.h"
#include "tokenizer/chat_template.h"
#include "tokenizer/gguf_tokenizer.h"
#include "tokenizer/tokenizer.h"

namespace {

using hone::tok::GgufVocab;
using Ids = std::vector<int32_t>;

// Control tokens 0-2, the byte alphabet (without the bytes in `missing`), then the merged tokens of `merges`.
GgufVocab small_vocab(const std::string& pre, const std::vector<int>& missing = {}) {
  GgufVocab v;
  v.model = "gpt2";
  v.pre = pre;
  for (const char* t : {"<|endoftext|>", "<|im_start|>", "<|im_end|>"}) {
    v.tokens.push_back(t);
    v.token_types.push_back(3);
  }
  const auto& alphabet = hone::tok::byte_level_alphabet();
  for (int b = 0; b < 256; ++b) {
    if (std::find(missing.begin(), missing.end(), b) != missing.end()) continue;
    v.tokens.push_back(alphabet.char_of(static_cast<unsigned char>(b)));
    v.token_types.push_back(1);
  }
  for (const char* m : {"h e", "l l", "he ll", "hell o", "\xC4\xA0 w", "o r", "\xC4\xA0w or", "1 2", "12 3", "4 5",
                        "\xC4\xA0 1"}) {
    const std::string s = m;
    const size_t sp = s.find(' ');
    v.merges.push_back(s);
    v.tokens.push_back(s.substr(0, sp) + s.substr(sp + 1));
    v.token_types.push_back(1);
  }
  v.tokens.push_back("<think>");
  v.token_types.push_back(4);
  v.bos = 1;
  v.eos = 2;
  v.unk = 0;
  v.pad = 2;
  v.add_bos = false;
  v.chat_template = "{% for m in messages %}<|im_start|>{{ m.role }}\n{{ m.content }}<|im_end|>\n{% endfor %}";
  return v;
}

std::string write_files(const std::string& tag, const GgufVocab& v) {
  const auto files = hone::tok::tokenizer_files_from_gguf(v);
  const std::string dir = test::temp_dir(tag);
  std::ofstream(dir + "/tokenizer.json", std::ios::binary) << files.tokenizer_json;
  std::ofstream(dir + "/tokenizer_config.json", std::ios::binary) << files.tokenizer_config_json;
  return dir;
}

// The ids of tokens by their text in v.
Ids ids_of(const GgufVocab& v, std::initializer_list<std::string> tokens) {
  Ids out;
  for (const std::string& t : tokens)
    out.push_back(static_cast<int32_t>(std::find(v.tokens.begin(), v.tokens.end(), t) - v.tokens.begin()));
  return out;
}

std::string error_of(const GgufVocab& v) {
  try {
    hone::tok::tokenizer_files_from_gguf(v);
  } catch (const hone::UserError& e) {
    return e.what();
  }
  return "";
}

}  // namespace

BOOST_AUTO_TEST_SUITE(tokenizer_gguf)

BOOST_AUTO_TEST_CASE(smollm_digits_and_missing_bytes) {
  const GgufVocab v = small_vocab("smollm", {4, 6, 0xA9});
  const std::string dir = write_files("gguf-smollm", v);
  const auto tok = hone::load_tokenizer("hf", dir);
  BOOST_TEST(tok->vocab_size() == static_cast<int32_t>(v.tokens.size()));
  BOOST_TEST(tok->bos_id() == 1);
  BOOST_TEST(tok->eos_id() == 2);
  BOOST_TEST(tok->pad_id() == 2);
  BOOST_TEST(tok->is_special(1));
  BOOST_TEST(!tok->is_special(tok->token_to_id("<think>")));
  // Digits are split one by one before the GPT-2 regex: no "12" or "123" although they are merges.
  BOOST_TEST(tok->encode("12345") == ids_of(v, {"1", "2", "3", "4", "5"}));
  BOOST_TEST(tok->encode("hello world") == ids_of(v, {"hello", "\xC4\xA0wor", "l", "d"}));
  // Bytes 4, 6 and 0xA9 have no token: dropped (the regex has cut "he", "\x04", "ll", "\x06", "o").
  BOOST_TEST(tok->encode("he\x04ll\x06o") == ids_of(v, {"he", "ll", "o"}));
  BOOST_TEST(tok->encode("h\xC3\xA9llo") == ids_of(v, {"h", "\xC3\x83", "ll", "o"}));  // e-acute is C3 A9
  BOOST_TEST(tok->encode("<|im_start|>hello<|im_end|>") == (Ids{1, ids_of(v, {"hello"})[0], 2}));
  BOOST_TEST(tok->encode("hello", true) == tok->encode("hello"));  // add_bos false
  BOOST_TEST(tok->decode(tok->encode("hello world 12")) == "hello world 12");
  const auto tpl = hone::ChatTemplate::load(dir);
  BOOST_REQUIRE(tpl);
  BOOST_TEST(tpl->render({{"user", "hi"}}) == "<|im_start|>user\nhi<|im_end|>\n");
  const auto config = nlohmann::json::parse(hone::tok::tokenizer_files_from_gguf(v).tokenizer_config_json);
  BOOST_TEST(config.at("unk_token") == "<|endoftext|>");
  BOOST_TEST(config.at("tokenizer_class") == "PreTrainedTokenizerFast");
  BOOST_TEST(!config.contains("model_max_length"));
  BOOST_TEST(config.at("added_tokens_decoder").at("1").at("special") == true);
  const auto tj = nlohmann::json::parse(hone::tok::tokenizer_files_from_gguf(v).tokenizer_json);
  BOOST_TEST(tj.at("model").at("unk_token").is_null());
  BOOST_TEST(tj.at("model").at("merges").size() == v.merges.size());
}

BOOST_AUTO_TEST_CASE(gpt2_and_default_use_the_byte_level_regex) {
  for (const char* pre : {"gpt-2", "default"}) {
    const GgufVocab v = small_vocab(pre);
    const auto tok = hone::load_tokenizer("hf", write_files("gguf-gpt2", v));
    BOOST_TEST(tok->encode("12345") == ids_of(v, {"123", "45"}), pre);  // the GPT-2 regex keeps digits together
    BOOST_TEST(tok->encode("hello 1") == ids_of(v, {"hello", "\xC4\xA0" "1"}), pre);
  }
}

BOOST_AUTO_TEST_CASE(llama3_splits_digits_by_three_and_adds_bos) {
  for (const char* pre : {"llama-bpe", "llama3"}) {
    GgufVocab v = small_vocab(pre);
    v.add_bos = true;
    const auto tok = hone::load_tokenizer("hf", write_files("gguf-llama3", v));
    BOOST_TEST(tok->encode("12345") == ids_of(v, {"123", "45"}), pre);
    BOOST_TEST(tok->encode("1234") == ids_of(v, {"123", "4"}), pre);
    BOOST_TEST(tok->encode("hello 1") == ids_of(v, {"hello", "\xC4\xA0", "1"}), pre);  // \p{N}{1,3} alone
    Ids with{1};
    for (int32_t id : tok->encode("hello")) with.push_back(id);
    BOOST_TEST(tok->encode("hello", true) == with, pre);
  }
}

BOOST_AUTO_TEST_CASE(qwen2_normalizes_nfc_and_splits_digits) {
  const GgufVocab v = small_vocab("qwen2");
  const auto tok = hone::load_tokenizer("hf", write_files("gguf-qwen2", v));
  BOOST_TEST(tok->encode("12345") == ids_of(v, {"1", "2", "3", "4", "5"}));
  BOOST_TEST(tok->encode("e\xCC\x81") == tok->encode("\xC3\xA9"));  // NFC
}

// A SentencePiece vocabulary: <unk>, <s>, </s>, the 256 byte tokens, then pieces with falling scores. The merges
// are derived from the scores (a higher score merges first), characters missing from the vocabulary fall back to
// their bytes, BOS is added by default and the leading "▁" is stripped on decode.
BOOST_AUTO_TEST_CASE(llama_sentencepiece_vocabulary) {
  GgufVocab v;
  v.model = "llama";
  v.pre = "default";
  auto add = [&](const std::string& t, int32_t type, float score) {
    v.tokens.push_back(t);
    v.token_types.push_back(type);
    v.scores.push_back(score);
  };
  add("<unk>", 2, 0);
  add("<s>", 3, 0);
  add("</s>", 3, 0);
  static const char* const hex = "0123456789ABCDEF";
  for (int b = 0; b < 256; ++b) add(std::string("<0x") + hex[b >> 4] + hex[b & 15] + ">", 6, 0);
  const std::string sp = "\xE2\x96\x81";  // U+2581
  float score = -1;
  for (const std::string& t : {sp, std::string("a"), std::string("b"), std::string("c"), "a" + std::string("b"),
                               sp + "ab", sp + "a", "ab" + std::string("c")})
    add(t, 1, score--);
  v.unk = 0;
  v.bos = 1;
  v.eos = 2;
  const std::string dir = write_files("gguf-llama", v);
  const auto tok = hone::load_tokenizer("hf", dir);
  // "ab" (-5) merges before "▁a" (-7), so " abc" is ▁ab + c although ▁a and abc are tokens too.
  BOOST_TEST(tok->encode("abc ab") == ids_of(v, {sp + "ab", "c", sp + "ab"}));
  BOOST_TEST(tok->encode("a\xC3\xA9") == ids_of(v, {sp + "a", "<0xC3>", "<0xA9>"}));  // byte fallback
  BOOST_TEST(tok->encode("ab", true) == ids_of(v, {"<s>", sp + "ab"}));
  BOOST_TEST(tok->decode(tok->encode("abc ab c\xC3\xA9", true), true) == "abc ab c\xC3\xA9");
  BOOST_TEST(tok->bos_id() == 1);
  BOOST_TEST(tok->eos_id() == 2);
  BOOST_TEST(tok->is_special(1));
  v.add_space_prefix = false;
  BOOST_TEST(hone::load_tokenizer("hf", write_files("gguf-llama-noprefix", v))->encode("ab ab") ==
             ids_of(v, {"ab", sp + "ab"}));
}

BOOST_AUTO_TEST_CASE(refusals_name_the_value) {
  GgufVocab v = small_vocab("smollm");
  v.model = "bert";
  BOOST_TEST(error_of(v).find("'bert'") != std::string::npos);
  v.model = "llama";
  v.scores.clear();
  BOOST_TEST(error_of(v).find("tokenizer.ggml.scores") != std::string::npos);
  v = small_vocab("falcon");
  const std::string e = error_of(v);
  BOOST_TEST(e.find("'falcon'") != std::string::npos);
  BOOST_TEST(e.find("smollm, starcoder") != std::string::npos);
  BOOST_TEST(e.find('\n') == std::string::npos);
  v = small_vocab("");
  BOOST_TEST(error_of(v).find("tokenizer.ggml.pre is absent") != std::string::npos);
  v = small_vocab("smollm");
  v.merges.push_back("zz qq");
  BOOST_TEST(error_of(v).find("'zz qq'") != std::string::npos);
  v = small_vocab("smollm");
  v.eos = 100000;
  BOOST_TEST(error_of(v).find("eos_token_id") != std::string::npos);
}

BOOST_AUTO_TEST_SUITE_END()
