// A ready Hugging Face model folder, what transformers' from_pretrained and vLLM load as is: config.json and the
// weights as safetensors (model/weights.h's save_model: f32 or bf16, sharded with an index above 5 GB),
// generation_config.json, and the tokenizer's files. hone writes one into every checkpoint (hf/) and `hone convert`
// writes one.
#pragma once

#include <string>

#include "model/model_config.h"
#include "model/weights.h"

namespace hone {

// The tokenizer files of a Hugging Face folder that exist in `from`, copied into `to` (tokenizer.json,
// tokenizer_config.json, special_tokens_map.json, chat_template.jinja, ...). Returns how many were copied.
int copy_tokenizer_files(const std::string& from, const std::string& to);

// <to>/generation_config.json: model_dir's own when it has one (the sampling defaults its authors chose), else one
// with the config's bos and eos ids (eos: the config's, else eos_id when >= 0).
void write_generation_config(const std::string& model_dir, const ModelConfig& c, int eos_id, const std::string& to);

// Everything a model folder holds besides its weights and config.json, from where the run took them:
// generation_config.json (write_generation_config) and the tokenizer files of tokenizer_dir (none when empty).
void write_hf_side_files(const std::string& dir, const ModelConfig& c, const std::string& model_dir,
                         const std::string& tokenizer_dir, int eos_id);

}  // namespace hone
