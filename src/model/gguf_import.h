// A GGUF model (llama.cpp's single-file format) as a Hugging Face model: its ModelConfig from the metadata, its
// parameters dequantized to fp32 under their Hugging Face names (llama.cpp's Q/K row permutation undone for the
// llama family), its tokenizer files from the tokenizer.* metadata, and a whole HF folder written from it
// (`hone convert --model FILE.gguf`, and the cached folder behind `model.path = "FILE.gguf"`, model/model_source.h).
// Supported architectures: llama, qwen2, qwen3, qwen3moe; anything else is refused with one line naming it.
#pragma once

#include <string>

#include "model/model_config.h"
#include "tensor/dtype.h"

namespace hone {

namespace gguf {
class GgufFile;
}

// The model's shape and options from general.architecture and the <arch>.* keys (plus what the tensors tell:
// tied embeddings, biases). UserError naming the key or tensor for what hone cannot run.
ModelConfig gguf_model_config(const gguf::GgufFile& f);

// Writes a complete Hugging Face folder into `dir` (which must not exist or be empty): config.json, the weights as
// safetensors in `dtype` (f32 keeps the dequantized values exactly), tokenizer.json, tokenizer_config.json (with the
// chat template and special tokens), generation_config.json. The tensors are dequantized one at a time.
void write_hf_folder_from_gguf(const gguf::GgufFile& f, const std::string& dir, DType dtype);

}  // namespace hone
