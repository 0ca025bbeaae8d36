// The chat template interpreter against transformers' apply_chat_template on real templates
// (tests/data/tokenizer/chat_templates/, written by make_goldens.py there), and the jinja behaviours and errors
// those templates rely on.
#include <boost/test/unit_test.hpp>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <map>
#include <nlohmann/json.hpp>
#include <sstream>
#include <unistd.h>

#include "common/paths.h"
#include "runtime/error.h"
#include "tokenizer/chat_setup.h"
#include "tokenizer/chat_template.h"
#include "tokenizer/jinja_value.h"
#include "tokenizer/tokenizer.h"

namespace {

std::string data_dir() { return test::source_dir() + "/tests/data/tokenizer/chat_templates"; }

std::string read(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::ostringstream s;
  s << in.rdbuf();
  return s.str();
}

// Renders `source` with plain variables (strings, bools, ints as JSON).
std::string render(const std::string& source, const nlohmann::json& vars = nlohmann::json::object(),
                   std::vector<hone::ChatMessage> messages = {{"user", "hi"}}) {
  using hone::jinja::Value;
  hone::jinja::Dict extra;
  for (const auto& [k, v] : vars.items()) {
    if (v.is_string()) extra.emplace_back(k, Value::string(v.get<std::string>()));
    else if (v.is_boolean()) extra.emplace_back(k, Value::boolean(v.get<bool>()));
    else if (v.is_number_integer()) extra.emplace_back(k, Value::integer(v.get<int64_t>()));
  }
  hone::ChatOptions opt;
  opt.add_generation_prompt = false;
  return hone::ChatTemplate(source, "test.jinja").render(messages, opt, extra);
}

std::string error_of(const std::string& source, const nlohmann::json& vars = nlohmann::json::object()) {
  try {
    render(source, vars);
  } catch (const hone::UserError& e) {
    return e.what();
  }
  return "(no error)";
}

}  // namespace

BOOST_AUTO_TEST_SUITE(chat_template)

BOOST_AUTO_TEST_CASE(matches_transformers_on_real_templates) {
  std::ifstream in(data_dir() + "/golden.jsonl", std::ios::binary);
  BOOST_REQUIRE(in);
  std::string line;
  std::getline(in, line);  // header: the versions that wrote it
  std::map<std::string, std::unique_ptr<hone::ChatTemplate>> templates;
  std::map<std::string, int> cases;
  int mismatches = 0;
  while (std::getline(in, line)) {
    const auto c = nlohmann::json::parse(line);
    const std::string name = c.at("template");
    auto& tpl = templates[name];
    if (!tpl) tpl = std::make_unique<hone::ChatTemplate>(read(data_dir() + "/" + name + ".jinja"), name + ".jinja");
    std::vector<hone::ChatMessage> messages;
    for (const auto& m : c.at("messages")) messages.push_back({m.at("role"), m.at("content")});
    hone::ChatOptions opt;
    opt.add_generation_prompt = c.at("add_generation_prompt");
    hone::jinja::Dict vars;
    for (const auto& [k, v] : c.at("variables").items()) {
      if (k == "enable_thinking") opt.enable_thinking = v.get<bool>();
      else vars.emplace_back(k, hone::jinja::Value::string(v.get<std::string>()));
    }
    const std::string got = tpl->render(messages, opt, vars);
    const std::string want = c.at("expected");
    ++cases[name];
    if (got != want) {
      ++mismatches;
      if (mismatches <= 5) BOOST_TEST(got == want, name << " case " << cases[name]);
    }
  }
  BOOST_TEST(templates.size() == 8u);
  for (const auto& [name, n] : cases) BOOST_TEST(n >= 40, name << ": " << n << " cases");
  BOOST_TEST(mismatches == 0);
}

BOOST_AUTO_TEST_CASE(matches_jinja2_on_single_features) {
  std::ifstream in(data_dir() + "/features.jsonl", std::ios::binary);
  BOOST_REQUIRE(in);
  std::string line;
  int cases = 0;
  while (std::getline(in, line)) {
    const auto c = nlohmann::json::parse(line);
    std::vector<hone::ChatMessage> messages;
    for (const auto& m : c.at("messages")) messages.push_back({m.at("role"), m.at("content")});
    const std::string got = render(c.at("template"), {{"eos_token", "<|im_end|>"}}, messages);
    BOOST_TEST(got == c.at("expected").get<std::string>(), "feature case " << cases + 1);
    ++cases;
  }
  BOOST_TEST(cases >= 20);
}

BOOST_AUTO_TEST_CASE(python_values_print_as_python) {
  using hone::jinja::python_float;
  BOOST_TEST(python_float(1.0) == "1.0");
  BOOST_TEST(python_float(0.1) == "0.1");
  BOOST_TEST(python_float(1e-5) == "1e-05");
  BOOST_TEST(python_float(1e16) == "1e+16");
  BOOST_TEST(python_float(123456789012345.0) == "123456789012345.0");
  BOOST_TEST(python_float(-2.5e-7) == "-2.5e-07");
  BOOST_TEST(render("{{ 'it\\'s' }} {{ ['it\\'s', '\\n', none] }}") == "it's [\"it's\", '\\n', None]");
}

BOOST_AUTO_TEST_CASE(unrenderable_templates_name_the_line_and_construct) {
  auto has = [](const std::string& msg, const std::string& part) {
    BOOST_TEST_INFO(msg);
    BOOST_TEST(msg.find(part) != std::string::npos, "'" << part << "' in: " << msg);
    BOOST_TEST(msg.find('\n') == std::string::npos);
  };
  std::string e = error_of("ok\n{{ messages | indent(2) }}");
  has(e, "test.jinja: chat template line 2: unsupported filter 'indent'");
  has(error_of("{% for m in messages %}\n{% macro f() %}{% endmacro %}{% endfor %}"), "line 2: unsupported tag 'macro'");
  has(error_of("{{ x is boring }}"), "line 1: unsupported test 'boring'");
  has(error_of("\n\n{{ raise_exception('Conversation roles must alternate') }}"),
      "line 3: the chat template raised an error: Conversation roles must alternate");
  has(error_of("{% if true %}never closed"), "unexpected end of template, expected 'endif'");
  has(error_of("{{ 'a' + 1 }}"), "unsupported operand types for +: 'str' and 'int'");
  has(error_of("{{ missing.attr }}"), "'missing' is undefined");
  has(error_of("{{ missing + 'a' }}"), "'missing' is undefined");
  has(error_of("{{ 'x'.zfill(3) }}"), "unsupported method 'str.zfill'");
  has(error_of("{{ nofunction() }}"), "'nofunction' is undefined");
  has(error_of("{% raw %}x{% endraw %}"), "unsupported tag 'raw'");
  has(error_of("{{ 'unterminated }}"), "unterminated string");
  has(error_of("{% set a, b = 1, 2 %}"), "set with several targets");
  // Python raises where C's pow gives inf and nan.
  has(error_of("{{ 0 ** -1 }}"), "line 1: 0.0 cannot be raised to a negative power");
  has(error_of("{{ 0.0 ** -2.5 }}"), "0.0 cannot be raised to a negative power");
  has(error_of("{{ (-8) ** 0.5 }}"), "a negative number raised to a fractional power is complex");
  BOOST_TEST(render("{{ 2 ** -1 }} {{ (-2) ** 3 }} {{ (-2.0) ** 2.0 }}") == "0.5 -8 4.0");
}

// Depth past the limit (the parser, the evaluator and the tree's destructor recurse) ends in one line naming it,
// at once: these once overflowed the stack (rc 139).
BOOST_AUTO_TEST_CASE(deep_templates_are_refused_by_the_nesting_limit) {
  auto repeat = [](const std::string& s, size_t n) {
    std::string out;
    for (size_t i = 0; i < n; ++i) out += s;
    return out;
  };
  const std::string limit = "nests deeper than 200 levels (hone's limit)";
  const std::vector<std::string> deep = {
      "{{ " + repeat("(", 5000) + "1" + repeat(")", 5000) + " }}",
      repeat("{% if true %}", 3000) + "x" + repeat("{% endif %}", 3000),
      repeat("{% for i in [1] %}", 3000) + "x" + repeat("{% endfor %}", 3000),
      "{{ " + repeat("[", 100000) + repeat("]", 100000) + " }}",
      "{{ " + repeat("{'a': ", 5000) + "1" + repeat("}", 5000) + " }}",
      "{{ " + repeat("not ", 200000) + "1 }}",
      "{{ " + repeat("1 + ", 200000) + "1 }}",
      "{{ 'a'" + repeat(" ~ 'a'", 200000) + " }}",
      "{{ x" + repeat(".a", 200000) + " }}",
      "{{ x" + repeat("[0]", 200000) + " }}",
      "{{ x" + repeat("|first", 200000) + " }}",
      "{{ " + repeat("-", 200000) + "1 }}",
      "{{ " + repeat("f(", 5000) + repeat(")", 5000) + " }}",
      "{{ 1" + repeat(" if true else 2", 5000) + " }}",
      "{{ 1" + repeat(" if true else (2", 5000) + repeat(")", 5000) + " }}",
      "{% set ns = namespace(l=[]) %}{% for i in range(1000) %}{% set ns.l = [ns.l] %}{% endfor %}{{ ns.l }}",
  };
  for (const std::string& source : deep) {
    const auto t0 = std::chrono::steady_clock::now();
    const std::string e = error_of(source);
    BOOST_TEST_INFO(source.substr(0, 60));
    BOOST_TEST(e.find(limit) != std::string::npos, e);
    BOOST_TEST(e.find('\n') == std::string::npos);
    BOOST_TEST(std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count() < 10.0);
  }
  // Below the limit all of it renders as jinja2 does.
  BOOST_TEST(render("{{ " + repeat("(", 150) + "1" + repeat(")", 150) + " }}") == "1");
  BOOST_TEST(render(repeat("{% if true %}", 150) + "x" + repeat("{% endif %}", 150)) == "x");
  BOOST_TEST(render("{{ " + repeat("1 + ", 150) + "1 }}") == "151");
  BOOST_TEST(render("{{ " + repeat("not ", 150) + "0 }}") == "False");
  BOOST_TEST(render("{{ " + repeat("[", 100) + repeat("]", 100) + " | length }}") == "1");
  // A namespace holding a namespace (a cycle: ns.a = ns) is refused rather than printed without end.
  BOOST_TEST(error_of("{% set ns = namespace(a=1) %}{% set ns.a = ns %}{{ ns }}").find("cannot hold another namespace") !=
             std::string::npos);
  BOOST_TEST(error_of("{% set ns = namespace(a=1) %}{% set ns.a = [ns] %}").find("cannot hold another namespace") !=
             std::string::npos);
  BOOST_TEST(render("{% set ns = namespace(a=1) %}{% set ns.a = [1, 'x'] %}{{ ns }}") == "<Namespace {'a': [1, 'x']}>");
}

// A long template of plain (not nested) tags is read in linear time: 100,000 tags once took over 40 s.
BOOST_AUTO_TEST_CASE(many_tags_are_read_in_linear_time) {
  std::string source;
  for (int i = 0; i < 100000; ++i) source += "{% if true %}a{% endif %}";
  const auto t0 = std::chrono::steady_clock::now();
  BOOST_TEST(render(source).size() == 100000u);
  std::string nested;
  for (int i = 0; i < 100000; ++i) nested += "{% if true %}";
  BOOST_TEST(error_of(nested).find("nests deeper than 200 levels") != std::string::npos);
  BOOST_TEST(std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count() < 20.0);
}

// Work and size without bound (loops of loops, strings and lists doubled) end in one line naming the limit, before
// the memory or the time runs out.
BOOST_AUTO_TEST_CASE(work_and_output_have_a_budget) {
  auto has = [](const std::string& msg, const std::string& part) {
    BOOST_TEST_INFO(msg);
    BOOST_TEST(msg.find(part) != std::string::npos, "'" << part << "' in: " << msg);
    BOOST_TEST(msg.find('\n') == std::string::npos);
  };
  const std::string work = "million steps of work for one conversation (hone's limit)";
  const std::string text = "builds a string longer than 64 MiB (hone's limit)";
  const std::string items = "builds a list of more than 1048576 items (hone's limit)";
  has(error_of("{% for i in range(100000) %}{% for j in range(100000) %}{% endfor %}{% endfor %}"), work);
  has(error_of("{% for i in range(100000) %}{% for j in range(100000) %}{{ j }}{% endfor %}{% endfor %}"), work);
  has(error_of("{% set ns = namespace(s='x') %}{% for i in range(100) %}{% set ns.s = ns.s ~ ns.s %}{% endfor %}"), "(hone's limit)");
  has(error_of("{% set ns = namespace(s='x') %}{% for i in range(100) %}{% set ns.s = ns.s + ns.s %}{% endfor %}"), "(hone's limit)");
  has(error_of("{% set ns = namespace(s='a') %}{% for i in range(100) %}{% set ns.s = ns.s.replace('a', 'aa') %}"
               "{% endfor %}"),
      text);
  has(error_of("{{ ('a' * 1000000).replace('a', 'b' * 1000) }}"), text);
  has(error_of("{{ ('a' * 1000000) | replace('', 'bbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbb') }}"), text);
  has(error_of("{% set ns = namespace(l=[1]) %}{% for i in range(100) %}{% set ns.l = ns.l + ns.l %}{% endfor %}"), items);
  has(error_of("{% set ns = namespace(l=[1]) %}{% for i in range(100) %}{% set ns.l = [ns.l, ns.l] %}{% endfor %}"
               "{{ ns.l | tojson }}"),
      "(hone's limit)");
  has(error_of("{% set ns = namespace(l=[1]) %}{% for i in range(100) %}{% set ns.l = [ns.l, ns.l] %}{% endfor %}"
               "{{ ns.l == ns.l }}"),
      work);
  has(error_of("{{ [1] | tojson(indent=1000000000) }}"), text);
  has(error_of("{{ (',' * 60000000).split(',') | length }}"), items);
  has(error_of("{% for c in 'a' * 60000000 %}{% endfor %}"), items);
  // The work of a long conversation stays far below the budget.
  std::vector<hone::ChatMessage> many(2000, {"user", std::string(1000, 'x')});
  hone::ChatOptions opt;
  BOOST_TEST(hone::ChatTemplate("{% for m in messages %}<|{{ m.role }}|>{{ m.content | trim }}{% endfor %}", "t")
                 .render(many, opt)
                 .size() == 2000u * 1008u);
}

BOOST_AUTO_TEST_CASE(template_from_a_tokenizer_folder) {
  namespace fs = std::filesystem;
  const fs::path dir = fs::temp_directory_path() / ("hone_chat_template_" + std::to_string(::getpid()));
  fs::create_directories(dir);
  auto write = [&](const char* name, const std::string& text) { std::ofstream(dir / name, std::ios::binary) << text; };
  BOOST_TEST(!hone::ChatTemplate::load(dir.string()));  // no config: no template
  nlohmann::json config = {{"bos_token", {{"content", "<s>"}, {"special", true}}}, {"eos_token", "</s>"}, {"pad_token", nullptr}};
  config["chat_template"] = nlohmann::json::array({{{"name", "tool_use"}, {"template", "T"}},
                                                   {{"name", "default"}, {"template", "{{ bos_token }}{{ messages[0].content }}{{ eos_token }}{{ pad_token is defined }}"}}});
  write("tokenizer_config.json", config.dump());
  auto tpl = hone::ChatTemplate::load(dir.string());
  BOOST_REQUIRE(tpl);
  BOOST_TEST(tpl->render({{"user", "hi"}}) == "<s>hi</s>False");
  write("chat_template.jinja", "J{{ messages | length }}\n");  // takes precedence, one trailing newline dropped
  tpl = hone::ChatTemplate::load(dir.string());
  BOOST_TEST(tpl->render({{"user", "hi"}}) == "J1");
  BOOST_TEST(tpl->origin() == (dir / "chat_template.jinja").string());

  // "auto" with a template hone cannot follow fails when the run is set up, naming the file.
  write("chat_template.jinja", "{% for m in messages %}{{ m.content | wordwrap(10) }}{% endfor %}");
  const auto chars = hone::load_tokenizer("chars", "");
  try {
    hone::ChatSetup(std::string("auto"), *chars, dir.string());
    BOOST_FAIL("no error");
  } catch (const hone::UserError& e) {
    BOOST_TEST(std::string(e.what()).find("chat_template.jinja: chat template line 1: unsupported filter 'wordwrap'") != std::string::npos);
  }
  // Rendering (not parsing) errors too.
  write("chat_template.jinja", "{% if messages[0].role == 'user' %}{{ raise_exception('Conversation must start with system') }}{% endif %}");
  BOOST_CHECK_THROW(hone::ChatSetup(std::string("auto"), *chars, dir.string()), hone::UserError);
  // A template that renders nothing (an empty file, an empty output) would train on empty prompts: refused.
  for (const char* text : {"", "{% if false %}x{% endif %}", "{{ '' }}"}) {
    write("chat_template.jinja", text);
    try {
      hone::ChatSetup(std::string("auto"), *chars, dir.string());
      BOOST_ERROR("no error for '" << text << "'");
    } catch (const hone::UserError& e) {
      BOOST_TEST(std::string(e.what()).find("chat_template.jinja: the chat template renders nothing for a user message") != std::string::npos, e.what());
    }
  }
  // One that renders only for some conversations: the empty one is refused when it is rendered.
  write("chat_template.jinja", "{% for m in messages %}{% if m.role == 'user' %}{{ m.content }}{% endif %}{% endfor %}");
  const hone::ChatSetup partial("auto", *chars, dir.string());
  try {
    partial.render({{"system", "s"}});
    BOOST_ERROR("no error");
  } catch (const hone::UserError& e) {
    BOOST_TEST(std::string(e.what()).find("renders an empty prompt for a conversation of 1 messages") != std::string::npos, e.what());
  }
  write("chat_template.jinja", "{% if messages[0].role == 'user' %}{{ raise_exception('Conversation must start with system') }}{% endif %}");
  // "none" with a template: plain text (and a warning); chatml with the chars tokenizer: fine.
  const hone::ChatSetup none("none", *chars, dir.string());
  BOOST_TEST(!none.is_chat());
  BOOST_TEST(none.render({{"user", "q"}}) == "q");
  const hone::ChatSetup chatml("chatml", *chars, dir.string());
  BOOST_TEST(chatml.render({{"user", "q"}}) == "<|im_start|>user\nq<|im_end|>\n<|im_start|>assistant\n");
  BOOST_TEST(chatml.end_of_turn() == "<|im_end|>");
  fs::remove_all(dir);
}

BOOST_AUTO_TEST_CASE(auto_without_a_template_is_plain_text) {
  const auto chars = hone::load_tokenizer("chars", "");
  const hone::ChatSetup chat("auto", *chars, "");
  BOOST_TEST(!chat.is_chat());
  BOOST_TEST(chat.render({{"user", "rev:7="}}) == "rev:7=");
  BOOST_TEST(chat.end_of_turn().empty());
  BOOST_CHECK_THROW(hone::ChatSetup("llama3", *chars, ""), hone::UserError);  // chars has no Llama 3 tokens
}

BOOST_AUTO_TEST_CASE(real_tokenizers_auto_and_fixed_formats, *boost::unit_test::precondition(test::needs_shared)) {
  const std::string qwen_dir = test::shared_dir() + "/data/tokenizers/qwen3", llama_dir = test::shared_dir() + "/data/tokenizers/llama3_1";
  const auto qwen = hone::load_tokenizer("hf", qwen_dir);
  const auto llama = hone::load_tokenizer("hf", llama_dir);

  const hone::ChatSetup qwen_auto("auto", *qwen, qwen_dir);
  BOOST_TEST(qwen_auto.is_chat());
  BOOST_TEST(qwen_auto.describe().find("tokenizer_config.json") != std::string::npos);
  BOOST_TEST(qwen_auto.end_of_turn() == "<|im_end|>");
  const hone::ChatSetup llama_auto("auto", *llama, llama_dir);
  BOOST_TEST(llama_auto.end_of_turn() == "<|eot_id|>");
  // The model's own template and the fixed format of its family agree on plain prompts.
  const std::vector<hone::ChatMessage> chat = {{"system", "Be brief."}, {"user", "2+2?"}};
  BOOST_TEST(qwen_auto.render(chat) == hone::render_chat(hone::ChatFormat::ChatML, chat));
  BOOST_TEST(llama_auto.render(chat) == hone::render_chat(hone::ChatFormat::Llama3, chat));

  // A fixed format the tokenizer has no special tokens for is refused, naming the missing token.
  try {
    hone::ChatSetup("llama3", *qwen, qwen_dir);
    BOOST_FAIL("no error");
  } catch (const hone::UserError& e) {
    BOOST_TEST(std::string(e.what()).find("no special token <|begin_of_text|>") != std::string::npos, e.what());
  }
  try {
    hone::ChatSetup("chatml", *llama, llama_dir);
    BOOST_FAIL("no error");
  } catch (const hone::UserError& e) {
    BOOST_TEST(std::string(e.what()).find("no special token <|im_start|>") != std::string::npos, e.what());
  }
  BOOST_TEST(hone::ChatSetup("chatml", *qwen, qwen_dir).end_of_turn() == "<|im_end|>");
}

BOOST_AUTO_TEST_SUITE_END()
