// Hugging Face tokenizer files (tokenizer.json, tokenizer_config.json) built from the tokenizer metadata of a GGUF
// file, so that a GGUF model runs with hone's "hf" tokenizer. The input is a plain struct: the GGUF reader fills it.
//
// Supported: tokenizer.ggml.model = "gpt2" (byte-level BPE) with tokenizer.ggml.pre = smollm, starcoder, gpt-2,
// default, llama-bpe, llama3, qwen2: the vocabulary and merges exactly the GGUF's, and the normalizer,
// pre-tokenizer, post-processor and decoder of Hugging Face's own tokenizer.json for that family; and
// tokenizer.ggml.model = "llama" (SentencePiece): the byte-fallback BPE file of Llama 2 (merges derived from the
// tokens and scores as Hugging Face's converters derive them). Control tokens become special added tokens,
// user-defined ones non-special added tokens. Anything else is refused with one line naming it.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace hone::tok {

struct GgufVocab {
  std::string model;                 // tokenizer.ggml.model: "gpt2", "llama", ...
  std::string pre;                   // tokenizer.ggml.pre ("" when absent)
  std::vector<std::string> tokens;
  std::vector<int32_t> token_types;  // empty when absent; 1 normal, 2 unknown, 3 control, 4 user defined, 5 unused, 6 byte
  std::vector<float> scores;         // empty when absent (SentencePiece models)
  std::vector<std::string> merges;   // "a b", gpt2 models
  int32_t bos = -1, eos = -1, unk = -1, pad = -1, eot = -1;  // -1: absent
  std::optional<bool> add_bos, add_eos, add_space_prefix;
  std::string chat_template;          // "" when absent
};

struct TokenizerFiles {
  std::string tokenizer_json, tokenizer_config_json;  // file texts
};

// Throws UserError (one line naming what is unsupported or inconsistent).
TokenizerFiles tokenizer_files_from_gguf(const GgufVocab& v);

// The tokenizer.ggml.pre values supported for gpt2 vocabularies, comma-separated (for messages and docs).
const char* gguf_supported_pre_types();

}  // namespace hone::tok
