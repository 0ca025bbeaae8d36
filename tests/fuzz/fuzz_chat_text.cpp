// Fuzz driver: text as prompts bring it, through the built-in chat templates (tokenizer/chat_format.cpp) and a
// real tokenizer's encode and decode (pre-tokenizer regexes, added tokens, byte-level BPE). The tokenizer folder is
// $HONE_FUZZ_TOKENIZER (mk/fuzz.mk passes the Qwen3 tokenizer of the shared data when present), else the small one
// in tests/fuzz/data/tokenizer. Input: a first byte choosing the format, roles and options, then NUL-separated
// message contents.
#include <memory>

#include "fuzz/fuzz_common.h"
#include "tokenizer/chat_format.h"
#include "tokenizer/tokenizer.h"

namespace {

const hone::Tokenizer& tokenizer() {
  static const std::unique_ptr<hone::Tokenizer> tok = [] {
    const char* dir = std::getenv("HONE_FUZZ_TOKENIZER");
    return hone::load_tokenizer("hf", dir && *dir ? dir : "tests/fuzz/data/tokenizer");
  }();
  return *tok;
}

}  // namespace

// Loading the Qwen3 tokenizer takes seconds under the sanitizers: done before the first input's timeout starts.
extern "C" int LLVMFuzzerInitialize(int*, char***) {
  (void)tokenizer();
  return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size == 0) return 0;
  const uint8_t mode = data[0];
  const std::vector<std::string> contents = fuzz::split_nul(data + 1, size - 1, 6);
  const hone::Tokenizer& tok = tokenizer();
  fuzz::expect_user_error_or_success([&] {
    static const char* const kRoles[] = {"system", "user", "assistant", "tool"};
    std::vector<hone::ChatMessage> messages;
    for (size_t i = 0; i < contents.size(); ++i)
      messages.push_back({kRoles[(mode >> (2 + (i % 3) * 2)) & 3], contents[i]});
    hone::ChatOptions opt;
    opt.add_generation_prompt = mode & 2;
    if (mode & 128) opt.enable_thinking = (mode & 64) != 0;
    const hone::ChatFormat format = (mode & 1) ? hone::ChatFormat::Llama3 : hone::ChatFormat::ChatML;
    std::string text = hone::render_chat(format, messages, opt);
    if (mode % 3 == 0) text = contents[0];  // the raw text alone too (the "none" format)
    const auto ids = tok.encode(text, false);
    const std::string back = tok.decode(ids, false);
    (void)tok.decode(ids, true);
  });
  return 0;
}
