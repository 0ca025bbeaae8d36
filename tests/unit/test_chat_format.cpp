// Chat formats against the jinja2 renderings of the real chat templates (tests/data/tokenizer/chat_golden.jsonl,
// written by tools/tokenizer_reference.py), and how rendered prompts tokenize.
#include <boost/test/unit_test.hpp>

#include <algorithm>
#include <fstream>
#include <nlohmann/json.hpp>

#include "common/paths.h"
#include "runtime/error.h"
#include "tokenizer/chat_format.h"
#include "tokenizer/tokenizer.h"

BOOST_AUTO_TEST_SUITE(chat_format)

BOOST_AUTO_TEST_CASE(renders_like_the_jinja_templates) {
  std::ifstream in(test::source_dir() + "/tests/data/tokenizer/chat_golden.jsonl", std::ios::binary);
  BOOST_REQUIRE(in);
  std::string line;
  int cases = 0, mismatches = 0;
  while (std::getline(in, line)) {
    const auto c = nlohmann::json::parse(line);
    std::vector<hone::ChatMessage> messages;
    for (const auto& m : c.at("messages")) messages.push_back({m.at("role"), m.at("content")});
    hone::ChatOptions opt;
    opt.add_generation_prompt = c.at("add_generation_prompt");
    if (c.contains("enable_thinking")) opt.enable_thinking = c.at("enable_thinking").get<bool>();
    const std::string got = render_chat(hone::parse_chat_format(c.at("format")), messages, opt);
    const std::string want = c.at("expected");
    ++cases;
    if (got != want) {
      ++mismatches;
      BOOST_TEST(got == want, "case " << cases << " (" << c.at("format").get<std::string>() << ")");
    }
  }
  BOOST_TEST(cases >= 100);
  BOOST_TEST(mismatches == 0);
}

BOOST_AUTO_TEST_CASE(system_and_user_shortcut) {
  using hone::ChatFormat;
  BOOST_TEST(render_chat(ChatFormat::ChatML, "Be brief.", "2+2?") ==
             "<|im_start|>system\nBe brief.<|im_end|>\n<|im_start|>user\n2+2?<|im_end|>\n<|im_start|>assistant\n");
  BOOST_TEST(render_chat(ChatFormat::ChatML, "", "2+2?", false) == "<|im_start|>user\n2+2?<|im_end|>\n");
  BOOST_TEST(render_chat(ChatFormat::Llama3, "", " 2+2? \n") ==
             "<|begin_of_text|><|start_header_id|>user<|end_header_id|>\n\n2+2?<|eot_id|>"
             "<|start_header_id|>assistant<|end_header_id|>\n\n");
  BOOST_TEST(render_chat(ChatFormat::None, "Context.", "Question") == "Context.\n\nQuestion");
  BOOST_TEST(render_chat(ChatFormat::None, "", "Question") == "Question");
  BOOST_TEST(hone::chat_end_of_turn(ChatFormat::ChatML) == "<|im_end|>");
  BOOST_TEST(hone::chat_end_of_turn(ChatFormat::Llama3) == "<|eot_id|>");
}

// Message text is raw bytes from a prompt file: invalid UTF-8 (a lone continuation byte, a lead byte cut short at the
// end) once made the Llama 3 trim read past the text (std::out_of_range from string_view::substr; fuzz driver
// chat_text, corpus finding-invalid-utf8-trim).
BOOST_AUTO_TEST_CASE(invalid_utf8_content_is_rendered_as_it_is) {
  for (const std::string content : {"\xbd", " a\xe4", "\xf0\x9f", "\xe4 "}) {
    std::string out;
    BOOST_CHECK_NO_THROW(out = hone::render_chat(hone::ChatFormat::Llama3, {{"user", content}}));
    BOOST_TEST(out.find("<|eot_id|>") != std::string::npos);
  }
}

BOOST_AUTO_TEST_CASE(bad_format_and_empty_chat_are_user_errors) {
  BOOST_CHECK_THROW(hone::parse_chat_format("alpaca"), hone::UserError);
  BOOST_CHECK_THROW(render_chat(hone::ChatFormat::ChatML, std::vector<hone::ChatMessage>{}), hone::UserError);
}

BOOST_AUTO_TEST_CASE(chatml_prompt_with_chars_tokenizer) {
  const auto tok = hone::load_tokenizer("chars", "");
  const std::string prompt = render_chat(hone::ChatFormat::ChatML, "", "hi");
  const auto ids = tok->encode(prompt);
  BOOST_TEST(ids.front() == tok->token_to_id("<|im_start|>"));
  BOOST_TEST(std::count(ids.begin(), ids.end(), tok->token_to_id("<|im_end|>")) == 1);
  BOOST_TEST(tok->decode(ids) == prompt);
}

BOOST_AUTO_TEST_CASE(llama3_prompt_has_one_bos, *boost::unit_test::precondition(test::needs_shared)) {
  const auto tok = hone::load_tokenizer("hf", test::shared_dir() + "/data/tokenizers/llama3_1");
  const auto ids = tok->encode(render_chat(hone::ChatFormat::Llama3, "sys", "hello"));
  BOOST_TEST(ids.front() == tok->bos_id());
  BOOST_TEST(std::count(ids.begin(), ids.end(), tok->bos_id()) == 1);
  const auto blank_line = tok->encode("\n\n");
  BOOST_TEST(blank_line.size() == 1u);
  BOOST_TEST(ids.back() == blank_line[0]);  // the prompt ends with the assistant header's "\n\n"
  BOOST_TEST(std::count(ids.begin(), ids.end(), tok->token_to_id("<|eot_id|>")) == 2);
}

BOOST_AUTO_TEST_SUITE_END()
