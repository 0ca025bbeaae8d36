// Fuzz driver: a Hugging Face tokenizer.json and tokenizer_config.json (tokenizer/hf_tokenizer.cpp and what it
// builds: BPE model with unk/byte fallback, pre-tokenizer regexes and Metaspace, added tokens, normalizers, the
// decoder pipeline). Input: tokenizer.json, then after a NUL, tokenizer_config.json (absent when there is no NUL),
// then after another NUL a text to encode and decode, then after another NUL special_tokens_map.json.
#include "fuzz/fuzz_common.h"
#include "tokenizer/tokenizer.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::vector<std::string> parts = fuzz::split_nul(data, size, 4);
  const std::string dir = fuzz::fresh_dir("tok");
  fuzz::write_file(dir + "/tokenizer.json", parts[0]);
  if (parts.size() > 1) fuzz::write_file(dir + "/tokenizer_config.json", parts[1]);
  if (parts.size() > 3) fuzz::write_file(dir + "/special_tokens_map.json", parts[3]);
  const std::string text = parts.size() > 2 ? parts[2] : "Hello world, 123 <|im_end|> \xe4\xb8\xad\xff";
  fuzz::expect_user_error_or_success([&] {
    const auto tok = hone::load_tokenizer("hf", dir);
    const auto ids = tok->encode(text, true);
    (void)tok->decode(ids, false);
    (void)tok->decode(ids, true);
    for (hone::TokenId id : {tok->bos_id(), tok->eos_id(), tok->pad_id(), tok->vocab_size(), -1})
      (void)tok->token_bytes(id);
    for (hone::TokenId id : ids) (void)tok->token_bytes(id);
  });
  return 0;
}
