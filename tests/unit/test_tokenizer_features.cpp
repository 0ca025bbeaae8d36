// tokenizer.json features that the two real files do not use, on a tiny hand-made file: added tokens with
// lstrip/rstrip/single_word/normalized, an added token that is also a vocabulary entry, ids reassigned on load,
// NFKC, a String Split with behaviour Removed, ByteLevel with add_prefix_space and the GPT-2 regex, and a
// TemplateProcessing with a suffix, the ByteFallback decoder. The expected ids and texts are what HF tokenizers
// 0.23.3 gives for the same files.
#include <boost/test/unit_test.hpp>

#include <deque>
#include <fstream>
#include <nlohmann/json.hpp>

#include "common/paths.h"
#include "runtime/error.h"
#include "tokenizer/byte_level.h"
#include "tokenizer/pre_tokenizer.h"
#include "tokenizer/tokenizer.h"

namespace {

nlohmann::json added(int id, const std::string& content, bool special, bool lstrip = false, bool rstrip = false,
                     bool single_word = false, bool normalized = false) {
  return {{"id", id}, {"content", content}, {"single_word", single_word}, {"lstrip", lstrip},
          {"rstrip", rstrip}, {"normalized", normalized}, {"special", special}};
}

nlohmann::json tiny_tokenizer_json() {
  using nlohmann::json;
  const auto& alphabet = hone::tok::byte_level_alphabet();
  json vocab = json::object();
  for (int b = 0; b < 256; ++b) vocab[alphabet.char_of(static_cast<unsigned char>(b))] = b;
  const std::vector<std::pair<std::string, std::string>> merges = {
      {"h", "e"}, {"l", "l"}, {"he", "ll"}, {"hell", "o"}, {"Ġ", "w"}, {"o", "r"}, {"Ġw", "or"}, {"Ġ", "h"}, {"Ġh", "e"}};
  json merge_list = json::array();
  int next = 256;
  for (const auto& [a, b] : merges) {
    if (!vocab.contains(a + b)) vocab[a + b] = next++;
    merge_list.push_back(a + " " + b);
  }
  json tj;
  // The "id" fields are deliberately off: loading assigns [M]=265, <s>=266, </s>=267, he=256 (vocabulary), cat=268.
  tj["added_tokens"] = {added(302, "[M]", false, true, true), added(300, "<s>", true), added(301, "</s>", true),
                        added(5, "he", true), added(303, "cat", false, false, false, true, true)};
  tj["normalizer"] = {{"type", "Sequence"}, {"normalizers", {{{"type", "NFKC"}}}}};
  tj["pre_tokenizer"] = {
      {"type", "Sequence"},
      {"pretokenizers",
       {{{"type", "Split"}, {"pattern", {{"String", "|"}}}, {"behavior", "Removed"}, {"invert", false}},
        {{"type", "ByteLevel"}, {"add_prefix_space", true}, {"trim_offsets", true}, {"use_regex", true}}}}};
  tj["post_processor"] = {
      {"type", "TemplateProcessing"},
      {"single", {{{"SpecialToken", {{"id", "<s>"}, {"type_id", 0}}}}, {{"Sequence", {{"id", "A"}, {"type_id", 0}}}},
                  {{"SpecialToken", {{"id", "</s>"}, {"type_id", 0}}}}}},
      {"special_tokens", {{"<s>", {{"id", "<s>"}, {"ids", {300}}, {"tokens", {"<s>"}}}},
                          {"</s>", {{"id", "</s>"}, {"ids", {301}}, {"tokens", {"</s>"}}}}}}};
  tj["decoder"] = {{"type", "ByteLevel"}, {"add_prefix_space", true}, {"trim_offsets", true}, {"use_regex", true}};
  tj["model"] = {{"type", "BPE"}, {"dropout", nullptr}, {"unk_token", nullptr}, {"continuing_subword_prefix", nullptr},
                 {"end_of_word_suffix", nullptr}, {"fuse_unk", false}, {"byte_fallback", false},
                 {"ignore_merges", false}, {"vocab", vocab}, {"merges", merge_list}};
  return tj;
}

std::string write_tokenizer(const std::string& tag, const nlohmann::json& tj) {
  const std::string dir = test::temp_dir(tag);
  std::ofstream(dir + "/tokenizer.json") << tj.dump();
  return dir;
}

using Ids = std::vector<int32_t>;

}  // namespace

BOOST_AUTO_TEST_SUITE(tokenizer_features)

BOOST_AUTO_TEST_CASE(tiny_tokenizer_matches_hf) {
  const auto tok = hone::load_tokenizer("hf", write_tokenizer("tiny-tokenizer", tiny_tokenizer_json()));
  BOOST_TEST(tok->token_to_id("[M]") == 265);
  BOOST_TEST(tok->token_to_id("cat") == 268);
  BOOST_TEST(tok->token_to_id("he") == 256);
  BOOST_TEST(tok->is_special(256));
  struct Case {
    std::string text;
    Ids ids;
    std::string decoded;
  };
  const std::vector<Case> cases = {
      {"hello world", {256, 32, 257, 111, 262, 108, 100}, "he llo world"},
      {"a|b||c hello|world", {32, 97, 32, 98, 32, 99, 32, 256, 32, 257, 111, 262, 108, 100}, " a b c he llo world"},
      {"x [M] y", {32, 120, 265, 32, 121}, " x[M] y"},
      {"x[M]y", {32, 120, 265, 32, 121}, " x[M] y"},
      {"x\xE3\x80\x80[M]\xE2\x80\xA8\ty", {32, 120, 265, 32, 121}, " x[M] y"},  // lstrip/rstrip: Unicode spaces
      {"x \x1C[M]\x1C y", {32, 120, 32, 28, 265, 32, 28, 32, 121}, " x \x1C[M] \x1C y"},  // U+001C is no space
      {"cat concat cats cat. cat",
       {268, 32, 99, 111, 110, 99, 97, 116, 32, 99, 97, 116, 115, 32, 268, 32, 46, 32, 268},
       "cat concat cats cat . cat"},
      {"\xEF\xBD\x88\xEF\xBD\x85\xEF\xBD\x8C\xEF\xBD\x8C\xEF\xBD\x8F \xEF\xBC\xB7\xEF\xBC\xAF\xEF\xBC\xB2\xEF\xBC\xAC\xEF\xBC\xA4",
       {32, 259, 32, 87, 79, 82, 76, 68}, " hello WORLD"},  // full-width letters, NFKC
      {"<s>hello</s>", {266, 256, 32, 257, 111, 267}, "<s>he llo</s>"},
      {"\xD9\xA1" "cat \xC2\xB7" "cat", {32, 217, 161, 99, 97, 116, 32, 194, 183, 268},
       " \xD9\xA1" "cat \xC2\xB7" "cat"},  // single_word: an Arabic-Indic digit is a word character, U+00B7 is not
      {"\xC3\xA9" "cat cat\xE4\xB8\xAD cat\xC2\xB2",
       {32, 195, 169, 99, 97, 116, 32, 99, 97, 116, 228, 184, 173, 32, 99, 97, 116, 50},
       " \xC3\xA9" "cat cat\xE4\xB8\xAD cat2"},  // NFKC turns the superscript 2 into 2 before matching
      {"  hello", {32, 32, 256, 32, 257, 111}, "  he llo"},
  };
  for (const auto& c : cases) {
    BOOST_TEST(tok->encode(c.text) == c.ids, "encode " << c.text);
    BOOST_TEST(tok->decode(c.ids) == c.decoded, "decode " << c.text);
    Ids with = c.ids;
    with.insert(with.begin(), 300);
    with.push_back(301);
    BOOST_TEST(tok->encode(c.text, true) == with, "add_special " << c.text);
  }
}

BOOST_AUTO_TEST_CASE(byte_fallback_decoder_matches_hf) {
  nlohmann::json tj = tiny_tokenizer_json();
  for (const char* t : {"<0xE4>", "<0xB8>", "<0xAD>", "<0x41>", "<0xe4>"}) tj["model"]["vocab"][t] = tj["model"]["vocab"].size();
  tj["decoder"] = {{"type", "Sequence"}, {"decoders", {{{"type", "ByteFallback"}}, {{"type", "Fuse"}}}}};
  const auto tok = hone::load_tokenizer("hf", write_tokenizer("byte-fallback", tj));
  auto ids = [&](std::initializer_list<const char*> tokens) {
    Ids out;
    for (const char* t : tokens) out.push_back(tok->token_to_id(t));
    return out;
  };
  const std::string r = "\xEF\xBF\xBD";
  BOOST_TEST(tok->decode(ids({"<0xE4>", "<0xB8>", "<0xAD>"})) == "\xE4\xB8\xAD");
  BOOST_TEST(tok->decode(ids({"<0xE4>", "<0xB8>"})) == r + r);  // invalid run: one U+FFFD per byte
  BOOST_TEST(tok->decode(ids({"h", "<0xE4>", "<0xB8>", "\xC4\xA0", "<0x41>"})) == "h" + r + r + "\xC4\xA0" "A");
  BOOST_TEST(tok->decode(ids({"<0xe4>", "<0xB8>", "<0xAD>", "hello"})) == "\xE4\xB8\xAD" "hello");
  BOOST_TEST(tok->decode(ids({"<0xAD>"})) == r);
}

BOOST_AUTO_TEST_CASE(unsupported_parts_are_user_errors) {
  const nlohmann::json good = tiny_tokenizer_json();
  auto load_with = [&](const std::string& key, const nlohmann::json& value) {
    nlohmann::json tj = good;
    tj[key] = value;
    return hone::load_tokenizer("hf", write_tokenizer("bad-tokenizer", tj));
  };
  BOOST_CHECK_NO_THROW(load_with("normalizer", nullptr));
  BOOST_CHECK_THROW(load_with("model", {{"type", "WordPiece"}, {"vocab", nlohmann::json::object()}}), hone::UserError);
  // A byte-level vocabulary without most bytes loads (as in HF tokenizers): the missing ones are dropped.
  BOOST_TEST(load_with("model", {{"type", "BPE"}, {"vocab", {{"a", 0}}}, {"merges", nlohmann::json::array()}})
                 ->encode("banana") == (Ids{0, 0, 0}));
  BOOST_CHECK_THROW(load_with("model", {{"type", "BPE"}, {"vocab", {{"a", 0}}}, {"unk_token", "<unk>"},
                                        {"merges", nlohmann::json::array()}}),
                    hone::UserError);  // unk_token not in the vocabulary
  // Vocabulary ids that are not small integers (a float once reached an int conversion; found by fuzzing).
  for (const nlohmann::json& id : {nlohmann::json(2e46), nlohmann::json(int64_t(1) << 40), nlohmann::json(-1),
                                   nlohmann::json("7")}) {
    nlohmann::json bad_id = good["model"];
    bad_id["vocab"]["zz"] = id;
    BOOST_CHECK_THROW(load_with("model", bad_id), hone::UserError);
  }
  nlohmann::json bad_merge = good["model"];
  bad_merge["merges"].push_back("x zz");
  BOOST_CHECK_THROW(load_with("model", bad_merge), hone::UserError);
  // A special token name not in the vocabulary is named, not echoed whole (a 1 MB bos_token was).
  {
    const std::string dir = write_tokenizer("huge-bos", good);
    std::ofstream(dir + "/tokenizer_config.json") << nlohmann::json{{"bos_token", std::string(1 << 20, 'b')}}.dump();
    std::string msg;
    try {
      hone::load_tokenizer("hf", dir);
    } catch (const hone::UserError& e) {
      msg = e.what();
    }
    BOOST_TEST(msg.find("bos_token '" + std::string(120, 'b') + "... (1048576 bytes in all)' (tokenizer_config.json") !=
                   std::string::npos);
    BOOST_TEST(msg.size() < 400u);
  }
  BOOST_CHECK_THROW(load_with("normalizer", {{"type", "Lowercase"}}), hone::UserError);
  BOOST_CHECK_THROW(load_with("pre_tokenizer", {{"type", "Whitespace"}}), hone::UserError);
  BOOST_CHECK_THROW(load_with("pre_tokenizer", {{"type", "Split"}, {"pattern", {{"Regex", "(("}}}}), hone::UserError);
  BOOST_CHECK_THROW(load_with("decoder", {{"type", "WordPiece"}}), hone::UserError);
  BOOST_CHECK_THROW(load_with("decoder", {{"type", "Replace"}, {"pattern", {{"Regex", " +"}}}, {"content", " "}}),
                    hone::UserError);
  BOOST_CHECK_THROW(load_with("normalizer", {{"type", "Replace"}, {"pattern", {{"Regex", " +"}}}, {"content", " "}}),
                    hone::UserError);
  BOOST_CHECK_THROW(load_with("pre_tokenizer", {{"type", "Metaspace"}, {"prepend_scheme", "sometimes"}}), hone::UserError);
  const std::string dir = test::temp_dir("not-json");
  std::ofstream(dir + "/tokenizer.json") << "{not json";
  BOOST_CHECK_THROW(hone::load_tokenizer("hf", dir), hone::UserError);
}

// Qwen3's pre-tokenizer pattern on 12 M spaces: PCRE2's default match limit (10 million steps) stopped it with
// "PCRE2 match failed with code -47"; the limit now grows with the text. The pre-tokenizer alone is timed here (the
// byte-level BPE of a 12 M-byte piece takes half a minute); the small tokenizer of the fuzz data has Qwen3's.
BOOST_AUTO_TEST_CASE(very_long_whitespace_is_split) {
  std::ifstream in(test::source_dir() + "/tests/fuzz/data/tokenizer/tokenizer.json");
  const nlohmann::json tj = nlohmann::json::parse(in);
  const hone::tok::PreTokenizer pre(tj.at("pre_tokenizer"));
  const std::string text = std::string(12000000, ' ') + "x";
  std::vector<std::string_view> pieces;
  std::deque<std::string> arena;
  pre.split(text, pieces, arena);
  size_t total = 0;
  for (const auto& p : pieces) total += p.size();
  BOOST_TEST(total == text.size());
  BOOST_TEST(pieces.size() == 2u);  // the spaces but the last, then " x"
}

BOOST_AUTO_TEST_SUITE_END()
