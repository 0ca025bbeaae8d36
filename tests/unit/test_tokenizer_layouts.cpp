// Tokenizer folders as transformers 4.x and 5.x write them: special tokens in tokenizer_config.json (strings,
// AddedToken objects or null), in special_tokens_map.json, or only as tokenizer.json added tokens; the chat template
// in tokenizer_config.json, chat_template.jinja or chat_template.json. Each folder is made here around a small
// tokenizer.json of tests/data/tokenizer/fixtures (<|endoftext|> 0, <|im_start|> 1, <|im_end|> 2).
#include <boost/test/unit_test.hpp>

#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>

#include "common/paths.h"
#include "runtime/error.h"
#include "tokenizer/chat_template.h"
#include "tokenizer/tokenizer.h"

namespace {

using nlohmann::json;

const char* const kTemplate =
    "{% for m in messages %}<|im_start|>{{ m.role }}\n{{ m.content }}<|im_end|>\n{% endfor %}[{{ eos_token }}]";

// A folder with the fixture's tokenizer.json and the given files (name -> text).
std::string folder(const std::string& tag, const std::vector<std::pair<std::string, std::string>>& files) {
  const std::string dir = test::temp_dir(tag);
  std::filesystem::copy_file(test::source_dir() + "/tests/data/tokenizer/fixtures/bytes_missing/tokenizer.json",
                             dir + "/tokenizer.json");
  for (const auto& [name, text] : files) std::ofstream(dir + "/" + name, std::ios::binary) << text;
  return dir;
}

json added_token(const std::string& content) {
  return {{"__type", "AddedToken"}, {"content", content}, {"lstrip", false}, {"normalized", false},
          {"rstrip", false}, {"single_word", false}, {"special", true}};
}

std::string rendered(const std::string& dir) {
  const auto tpl = hone::ChatTemplate::load(dir);
  return tpl ? tpl->render({{"user", "hi"}}) : std::string("(none)");
}

const std::string kRendered = "<|im_start|>user\nhi<|im_end|>\n";

}  // namespace

BOOST_AUTO_TEST_SUITE(tokenizer_layouts)

// transformers 4.x: strings and AddedToken objects in tokenizer_config.json, the template inside it.
BOOST_AUTO_TEST_CASE(transformers4_config_with_added_token_objects) {
  const json config = {{"bos_token", added_token("<|im_start|>")}, {"eos_token", added_token("<|im_end|>")},
                       {"pad_token", "<|endoftext|>"}, {"unk_token", nullptr}, {"chat_template", kTemplate}};
  const std::string dir = folder("layout-4x", {{"tokenizer_config.json", config.dump()}});
  const auto tok = hone::load_tokenizer("hf", dir);
  BOOST_TEST(tok->bos_id() == 1);
  BOOST_TEST(tok->eos_id() == 2);
  BOOST_TEST(tok->pad_id() == 0);
  BOOST_TEST(rendered(dir) == kRendered + "[<|im_end|>]");
}

// transformers 5.x: the template in chat_template.jinja, null special tokens, no added_tokens_decoder.
BOOST_AUTO_TEST_CASE(transformers5_chat_template_jinja) {
  const json config = {{"bos_token", nullptr}, {"eos_token", "<|im_end|>"}, {"pad_token", nullptr},
                       {"tokenizer_class", "TokenizersBackend"}};
  const std::string dir = folder("layout-5x", {{"tokenizer_config.json", config.dump()}, {"chat_template.jinja", kTemplate}});
  const auto tok = hone::load_tokenizer("hf", dir);
  BOOST_TEST(tok->bos_id() == -1);
  BOOST_TEST(tok->eos_id() == 2);
  BOOST_TEST(tok->pad_id() == -1);
  BOOST_TEST(tok->is_special(1));  // from tokenizer.json's added_tokens
  BOOST_TEST(rendered(dir) == kRendered + "[<|im_end|>]");
}

// Special tokens only in special_tokens_map.json (which wins over tokenizer_config.json where both name one).
BOOST_AUTO_TEST_CASE(special_tokens_map_json) {
  const json map = {{"bos_token", added_token("<|im_start|>")}, {"eos_token", "<|im_end|>"}, {"pad_token", "<|im_end|>"}};
  const json config = {{"pad_token", "<|endoftext|>"}, {"chat_template", kTemplate}};
  const std::string dir = folder("layout-map", {{"special_tokens_map.json", map.dump()}, {"tokenizer_config.json", config.dump()}});
  const auto tok = hone::load_tokenizer("hf", dir);
  BOOST_TEST(tok->bos_id() == 1);
  BOOST_TEST(tok->eos_id() == 2);
  BOOST_TEST(tok->pad_id() == 2);
  BOOST_TEST(rendered(dir) == kRendered + "[<|im_end|>]");
  const std::string bare = folder("layout-map-only", {{"special_tokens_map.json", map.dump()}});
  BOOST_TEST(hone::load_tokenizer("hf", bare)->eos_id() == 2);
  BOOST_TEST(rendered(bare) == "(none)");
}

// No tokenizer_config.json at all; the template in an older processor's chat_template.json.
BOOST_AUTO_TEST_CASE(chat_template_json_and_no_config) {
  const std::string dir = folder("layout-json", {{"chat_template.json", json{{"chat_template", kTemplate}}.dump()}});
  const auto tok = hone::load_tokenizer("hf", dir);
  BOOST_TEST(tok->eos_id() == -1);
  BOOST_TEST(rendered(dir) == kRendered + "[]");
  const std::string bad = folder("layout-json-bad", {{"chat_template.json", "{\"template\": 1}"}});
  BOOST_CHECK_THROW(hone::ChatTemplate::load(bad), hone::UserError);
  // chat_template.jinja wins over the config's entry, as transformers reads them.
  const std::string both = folder("layout-both", {{"tokenizer_config.json", json{{"chat_template", "config"}}.dump()},
                                                  {"chat_template.jinja", "jinja"}});
  BOOST_TEST(rendered(both) == "jinja");
}

BOOST_AUTO_TEST_CASE(unknown_special_token_is_named) {
  const std::string dir = folder("layout-unknown", {{"tokenizer_config.json", json{{"eos_token", "</s>"}}.dump()}});
  try {
    hone::load_tokenizer("hf", dir);
    BOOST_FAIL("no error");
  } catch (const hone::UserError& e) {
    BOOST_TEST(std::string(e.what()).find("eos_token '</s>'") != std::string::npos);
  }
}

BOOST_AUTO_TEST_SUITE_END()
