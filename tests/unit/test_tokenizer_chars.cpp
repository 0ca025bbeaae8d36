// The built-in character tokenizer ("chars") and the UTF-8 helpers every tokenizer relies on.
#include <boost/test/unit_test.hpp>

#include "runtime/error.h"
#include "tokenizer/tokenizer.h"
#include "tokenizer/utf8.h"

BOOST_AUTO_TEST_SUITE(tokenizer_chars)

BOOST_AUTO_TEST_CASE(vocabulary_layout_and_round_trip_of_every_id) {
  const auto tok = hone::load_tokenizer("chars", "");
  BOOST_TEST(tok->kind() == "chars");
  BOOST_TEST(tok->vocab_size() == 101);
  BOOST_TEST(tok->eos_id() == tok->token_to_id("<|endoftext|>"));
  BOOST_TEST(tok->bos_id() == -1);
  BOOST_TEST(tok->token_to_id("A") == 6 + ('A' - ' '));
  BOOST_TEST(tok->token_to_id("\n") == 5);
  BOOST_TEST(tok->token_to_id("é") == -1);
  for (int32_t id = 0; id < tok->vocab_size(); ++id) {
    const std::string t = tok->id_to_token(id);
    BOOST_TEST(!t.empty());
    BOOST_TEST(tok->token_to_id(t) == id, "id " << id);
  }
  BOOST_TEST(tok->id_to_token(101).empty());
  BOOST_TEST(tok->special_ids().size() == 4u);
}

BOOST_AUTO_TEST_CASE(encode_decode) {
  const auto tok = hone::load_tokenizer("chars", "");
  const std::string text = "<|im_start|>user\n1+1=?<|im_end|>\n<|endoftext|><|im_sta";
  const auto ids = tok->encode(text);
  BOOST_TEST(ids.size() == 1 + 4 + 1 + 5 + 1 + 1 + 1 + 8);
  BOOST_TEST(ids[0] == tok->token_to_id("<|im_start|>"));
  BOOST_TEST(tok->decode(ids) == text);
  BOOST_TEST(tok->decode(ids, /*skip_special=*/true) == "user\n1+1=?\n<|im_sta");
  // Non-ASCII code points and control bytes become <|unk|>, one per code point; invalid bytes are repaired first.
  const auto unk = tok->encode("a\xC3\xA9\x01\xF0\x9F\x98\x80\xFF");
  BOOST_TEST(unk.size() == 5u);
  BOOST_TEST(tok->decode(unk) == "a\xEF\xBF\xBD\xEF\xBF\xBD\xEF\xBF\xBD\xEF\xBF\xBD");
  std::string bytes;
  for (int32_t id : ids) bytes += tok->token_bytes(id);
  for (int32_t id : unk) bytes += tok->token_bytes(id);
  BOOST_TEST(bytes == tok->decode(ids) + tok->decode(unk));
  const std::vector<int32_t> junk = {-1, 6, 1000};
  BOOST_TEST(tok->decode(junk) == " ");  // unknown ids are skipped
  BOOST_TEST(tok->encode("ab", true) == tok->encode("ab"));  // nothing to add
}

BOOST_AUTO_TEST_CASE(unknown_kind_is_a_user_error) {
  BOOST_CHECK_THROW(hone::load_tokenizer("sentencepiece", ""), hone::UserError);
  BOOST_CHECK_THROW(hone::load_tokenizer("hf", "/nonexistent/dir"), hone::UserError);
}

BOOST_AUTO_TEST_CASE(utf8_repair_replaces_maximal_invalid_subparts) {
  using hone::tok::utf8_lossy;
  const std::string r = "\xEF\xBF\xBD";
  BOOST_TEST(utf8_lossy("ok") == "ok");
  BOOST_TEST(utf8_lossy("\xE4\xB8") == r);                   // truncated 3-byte sequence: one replacement
  BOOST_TEST(utf8_lossy("\xC0\xAF") == r + r);               // C0 never starts a sequence
  BOOST_TEST(utf8_lossy("\xED\xA0\x80") == r + r + r);       // surrogate: ED A0 is not a valid prefix
  BOOST_TEST(utf8_lossy("\xF0\x9F\x98" "a") == r + "a");
  BOOST_TEST(utf8_lossy("\xF4\x90\x80\x80") == r + r + r + r);  // above U+10FFFF
  BOOST_TEST(hone::tok::utf8_valid("\xF0\x9F\x98\x80"));
  BOOST_TEST(!hone::tok::utf8_valid("\xF0\x9F\x98"));
}

BOOST_AUTO_TEST_CASE(nfc_and_python_strip) {
  using hone::tok::NormalForm;
  BOOST_TEST(hone::tok::normalize("Cafe\xCC\x81", NormalForm::NFC) == "Caf\xC3\xA9");
  BOOST_TEST(hone::tok::normalize("\xE2\x84\xAB", NormalForm::NFC) == "\xC3\x85");  // Angstrom sign -> A ring
  BOOST_TEST(hone::tok::normalize("Caf\xC3\xA9", NormalForm::NFD) == "Cafe\xCC\x81");
  BOOST_TEST(hone::tok::py_strip("\xE3\x80\x80 x y\t\xC2\xA0\n") == "x y");  // U+3000 and U+00A0 are spaces
  BOOST_TEST(hone::tok::py_strip("\xE2\x80\x8Bx") == "\xE2\x80\x8Bx");         // U+200B is not
  BOOST_TEST(hone::tok::py_lstrip("  a ") == "a ");
  BOOST_TEST(hone::tok::py_rstrip("  a \x1F") == "  a");
}

BOOST_AUTO_TEST_SUITE_END()
