// Fuzz driver: a model's chat template (the jinja of tokenizer_config.json or chat_template.jinja) through hone's
// jinja interpreter (tokenizer/jinja_*.h): parsed, then rendered for a fixed conversation with and without the
// generation prompt, with and without a system message. Seeds: the real templates of the chat-template goldens.
#include "fuzz/fuzz_common.h"
#include "tokenizer/chat_template.h"
#include "tokenizer/jinja_limits.h"

// Four renderings per input under the sanitizers: a budget of a twentieth keeps a template that spends it all (two
// nested range(100000) loops, a seed) well within the 20 s hang timeout, and every limit's path is still taken.
extern "C" int LLVMFuzzerInitialize(int*, char***) {
  hone::jinja::set_render_work_limit(hone::jinja::kMaxRenderWork / 20);
  return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string source(reinterpret_cast<const char*>(data), size);
  fuzz::expect_user_error_or_success([&] {
    const hone::jinja::Dict special = {{"bos_token", hone::jinja::Value::string("<s>")},
                                       {"eos_token", hone::jinja::Value::string("</s>")}};
    const hone::ChatTemplate t(source, "fuzz template", special);
    const std::vector<hone::ChatMessage> chat = {
        {"system", "Be brief."}, {"user", "What is 2+2?"}, {"assistant", "<think>easy</think>4"}, {"user", "And 3+3?"}};
    for (bool gen : {false, true}) {
      hone::ChatOptions o;
      o.add_generation_prompt = gen;
      (void)t.render(chat, o);
      (void)t.render({chat.begin() + 1, chat.end()}, o);
    }
  });
  return 0;
}
