// Parity of the "hf" tokenizer with Hugging Face `tokenizers` on the real tokenizer files (Qwen3, Llama 3.1, and
// SmolLM2's, converted from its GGUF in the model cache) and on the synthetic fixtures of
// tests/data/tokenizer/fixtures (tools/tokenizer_fixtures.py: byte-level vocabularies missing bytes, with and
// without unk_token, and SentencePiece-style byte-fallback BPE): for every entry of corpus.jsonl the encoded ids,
// the decoded text (with and without special tokens) and the round trip must be identical to the golden files
// written by tools/tokenizer_reference.py.
#include <boost/test/unit_test.hpp>

#include <cstdlib>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>

#include "common/paths.h"
#include "common/real_model.h"
#include "tokenizer/tokenizer.h"
#include "tokenizer/utf8.h"

namespace {

std::vector<nlohmann::json> read_jsonl(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  BOOST_REQUIRE_MESSAGE(in, "cannot open " << path);
  std::vector<nlohmann::json> out;
  std::string line;
  while (std::getline(in, line))
    if (!line.empty()) out.push_back(nlohmann::json::parse(line));
  return out;
}

std::vector<int32_t> varint_base64(const std::string& b64) {
  static const std::string alphabet = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
  std::string bytes;
  uint32_t acc = 0;
  int bits = 0;
  for (char c : b64) {
    if (c == '=') break;
    const size_t v = alphabet.find(c);
    BOOST_REQUIRE(v != std::string::npos);
    acc = (acc << 6) | static_cast<uint32_t>(v);
    bits += 6;
    if (bits >= 8) {
      bits -= 8;
      bytes += static_cast<char>((acc >> bits) & 0xFF);
    }
  }
  std::vector<int32_t> ids;
  uint32_t value = 0;
  int shift = 0;
  for (char c : bytes) {
    const auto b = static_cast<unsigned char>(c);
    value |= static_cast<uint32_t>(b & 0x7F) << shift;
    shift += 7;
    if (!(b & 0x80)) {
      ids.push_back(static_cast<int32_t>(value));
      value = 0;
      shift = 0;
    }
  }
  return ids;
}

std::string hex_bytes(const std::string& hex) {
  std::string out;
  for (size_t i = 0; i + 1 < hex.size(); i += 2) out += static_cast<char>(std::stoi(hex.substr(i, 2), nullptr, 16));
  return out;
}

std::string show_ids(const std::vector<int32_t>& ids, size_t from) {
  std::ostringstream os;
  for (size_t i = from; i < ids.size() && i < from + 8; ++i) os << ids[i] << ' ';
  return os.str();
}

// Compares one tokenizer with its golden file entry by entry; reports the count and the first differences.
// A golden file may hold a subset of the corpus: then each line names its entry ("entry").
void check_parity(const std::string& name, const std::string& dir, const std::string& golden_path,
                  bool sentencepiece = false) {
  const auto tok = hone::load_tokenizer("hf", dir);
  const auto all = read_jsonl(test::source_dir() + "/tests/data/tokenizer/corpus.jsonl");
  auto golden = read_jsonl(golden_path);
  std::vector<nlohmann::json> corpus;
  size_t lines = 1;
  while (lines < golden.size() && golden[lines].contains("ids")) {
    const size_t entry = golden[lines].contains("entry") ? golden[lines].at("entry").get<size_t>() : lines - 1;
    BOOST_REQUIRE(entry < all.size());
    corpus.push_back(all[entry]);
    ++lines;
  }
  BOOST_REQUIRE(corpus.size() > 150u);
  const auto& header = golden[0];
  BOOST_TEST(tok->vocab_size() == header.at("vocab_size").get<int32_t>());

  int mismatches = 0, checks = 0;
  std::string first_diffs;
  auto fail = [&](const std::string& what) {
    if (mismatches++ < 5) first_diffs += "\n  " + what;
  };
  size_t tokens = 0;
  for (size_t k = 0; k < corpus.size(); ++k) {
    const auto& e = corpus[k];
    const auto& g = golden[k + 1];
    const std::string input = e.contains("text") ? e.at("text").get<std::string>() : hex_bytes(e.at("hex").get<std::string>());
    const std::string text = hone::tok::utf8_lossy(input);  // what HF receives
    const auto want = varint_base64(g.at("ids").get<std::string>());
    const auto got = tok->encode(input);
    tokens += want.size();
    ++checks;
    if (got != want) {
      size_t at = 0;
      while (at < got.size() && at < want.size() && got[at] == want[at]) ++at;
      fail("entry " + std::to_string(k) + ": ids differ at token " + std::to_string(at) + ": got [" +
           show_ids(got, at) + "] want [" + show_ids(want, at) + "]");
    }
    std::string decoded = text;
    if (g.contains("decoded")) {
      decoded = g.at("decoded").get<std::string>();
      if (decoded == "=NFC") decoded = hone::tok::normalize(text, hone::tok::NormalForm::NFC);
    }
    const std::string decoded_skip = g.contains("decoded_skip") ? g.at("decoded_skip").get<std::string>() : decoded;
    ++checks;
    if (tok->decode(want) != decoded) fail("entry " + std::to_string(k) + ": decode(golden ids) differs");
    ++checks;
    if (tok->decode(want, true) != decoded_skip) fail("entry " + std::to_string(k) + ": decode(skip_special) differs");
    ++checks;
    if (tok->decode(got) != decoded) fail("entry " + std::to_string(k) + ": decode(encode(x)) differs");
    std::string bytes;
    for (int32_t id : want) bytes += tok->token_bytes(id);
    ++checks;
    // A SentencePiece decoder drops the leading space of the whole text (Strip, Metaspace), which token_bytes of
    // the first token cannot know.
    const std::string joined = hone::tok::utf8_lossy(bytes);
    if (joined != decoded && !(sentencepiece && joined == " " + decoded))
      fail("entry " + std::to_string(k) + ": token_bytes differ from decode");
  }
  // The same corpus through encode_batch (OpenMP threads sharing the piece cache), twice: cold and warm.
  std::vector<std::string> inputs;
  for (const auto& e : corpus)
    inputs.push_back(e.contains("text") ? e.at("text").get<std::string>() : hex_bytes(e.at("hex").get<std::string>()));
  for (int pass = 0; pass < 2; ++pass) {
    const auto batch = tok->encode_batch(inputs);
    for (size_t k = 0; k < corpus.size(); ++k) {
      ++checks;
      if (batch[k] != varint_base64(golden[k + 1].at("ids").get<std::string>()))
        fail("entry " + std::to_string(k) + ": encode_batch differs (pass " + std::to_string(pass) + ")");
    }
  }
  size_t decode_cases = 0;
  for (size_t k = lines; k < golden.size(); ++k) {
    const auto& g = golden[k];
    const auto ids = g.at("decode_ids").get<std::vector<int32_t>>();
    checks += 2;
    ++decode_cases;
    if (tok->decode(ids) != g.at("decoded").get<std::string>()) fail("decode case " + std::to_string(k) + " differs");
    if (tok->decode(ids, true) != g.at("decoded_skip").get<std::string>())
      fail("decode case " + std::to_string(k) + " (skip_special) differs");
  }
  // add_special: the post-processor's ids around the text (BOS for Llama 3.1, nothing for Qwen3).
  auto with = header.at("add_special_prefix").get<std::vector<int32_t>>();
  const auto plain = tok->encode("Hello world");
  with.insert(with.end(), plain.begin(), plain.end());
  const auto suffix = header.at("add_special_suffix").get<std::vector<int32_t>>();
  with.insert(with.end(), suffix.begin(), suffix.end());
  BOOST_TEST(tok->encode("Hello world", true) == with);

  BOOST_TEST_MESSAGE(name << ": " << corpus.size() << " corpus entries (" << tokens << " tokens), " << decode_cases
                          << " decode cases, " << checks << " checks, " << mismatches << " mismatches");
  BOOST_TEST(mismatches == 0,
             name << ": " << mismatches << " of " << checks << " checks differ from HF tokenizers; first:" << first_diffs);
}

}  // namespace

BOOST_AUTO_TEST_SUITE(tokenizer_parity)

void check_shared(const std::string& name) {
  check_parity(name, test::shared_dir() + "/data/tokenizers/" + name,
               test::source_dir() + "/tests/data/tokenizer/golden_" + name + ".jsonl");
}

void check_fixture(const std::string& name) {
  const std::string root = test::source_dir() + "/tests/data/tokenizer/fixtures/";
  check_parity(name, root + name, root + "golden_" + name + ".jsonl", name.rfind("sp_", 0) == 0);
}

BOOST_AUTO_TEST_CASE(qwen3_matches_hf_tokenizers, *boost::unit_test::precondition(test::needs_shared)) {
  check_shared("qwen3");
}

BOOST_AUTO_TEST_CASE(llama3_1_matches_hf_tokenizers, *boost::unit_test::precondition(test::needs_shared)) {
  check_shared("llama3_1");
}

// SmolLM2-135M-Instruct's tokenizer as `hone convert` builds it from its GGUF (the model cache's, or the folder
// HONE_SMOLLM2_TOKENIZER names); golden_smollm2.jsonl was written by tools/tokenizer_reference.py --smollm2 DIR.
BOOST_AUTO_TEST_CASE(smollm2_matches_hf_tokenizers, *boost::unit_test::precondition([](boost::unit_test::test_unit_id id) {
  const char* dir = std::getenv("HONE_SMOLLM2_TOKENIZER");
  return dir && *dir ? boost::test_tools::assertion_result(true) : test::needs_real_model(id);
})) {
  const char* dir = std::getenv("HONE_SMOLLM2_TOKENIZER");
  check_parity("smollm2", dir && *dir ? std::string(dir) : test::smollm2_folder(),
               test::source_dir() + "/tests/data/tokenizer/golden_smollm2.jsonl");
}

BOOST_AUTO_TEST_CASE(byte_level_missing_bytes_match_hf_tokenizers) {
  check_fixture("bytes_missing");       // dropped
  check_fixture("bytes_missing_unk");   // <unk> per missing byte
  check_fixture("bytes_missing_fuse");  // one <unk> per run
}

BOOST_AUTO_TEST_CASE(sentencepiece_byte_fallback_matches_hf_tokenizers) {
  check_fixture("sp_legacy");     // Prepend + Replace normalizer, Replace/ByteFallback/Fuse/Strip decoder
  check_fixture("sp_metaspace");  // NFKC, Metaspace (first) + Digits, ByteFallback + Metaspace decoder
}

BOOST_AUTO_TEST_CASE(bos_eos_from_tokenizer_config, *boost::unit_test::precondition(test::needs_shared)) {
  const std::string base = test::shared_dir() + "/data/tokenizers/";
  const auto qwen = hone::load_tokenizer("hf", base + "qwen3");
  BOOST_TEST(qwen->bos_id() == -1);
  BOOST_TEST(qwen->eos_id() == qwen->token_to_id("<|im_end|>"));
  BOOST_TEST(qwen->pad_id() == qwen->token_to_id("<|endoftext|>"));
  BOOST_TEST(qwen->is_special(qwen->token_to_id("<|im_start|>")));
  BOOST_TEST(!qwen->is_special(qwen->token_to_id("<think>")));  // an added token that is not special
  const auto llama = hone::load_tokenizer("hf", base + "llama3_1");
  BOOST_TEST(llama->bos_id() == 128000);
  BOOST_TEST(llama->eos_id() == llama->token_to_id("<|eot_id|>"));
  BOOST_TEST(llama->special_ids().size() == 256u);
  BOOST_TEST(llama->id_to_token(128000) == "<|begin_of_text|>");
  BOOST_TEST(llama->id_to_token(9906) == "Hello");
  BOOST_TEST(llama->id_to_token(1917) == "\xC4\xA0world");  // the file's byte-level spelling of " world"
  BOOST_TEST(llama->id_to_token(10000000).empty());
}

BOOST_AUTO_TEST_SUITE_END()
