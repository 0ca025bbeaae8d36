// ModelConfig: the transformer's shape and options, read from a Hugging Face config.json (LlamaForCausalLM,
// Qwen2ForCausalLM, Qwen3ForCausalLM) or built from a shape given in the deck. Host-only.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "ops/ops.h"

namespace hone {

enum class Architecture { llama, qwen2, qwen3 };

const char* architecture_hf_name(Architecture a);  // "LlamaForCausalLM", ...

struct ModelConfig {
  Architecture arch = Architecture::qwen3;
  int vocab_size = 0;
  int hidden_size = 0;          // C
  int intermediate_size = 0;    // I
  int num_hidden_layers = 0;    // L
  int num_attention_heads = 0;  // Hq
  int num_key_value_heads = 0;  // Hkv
  int head_dim = 0;             // D (Qwen3 gives it explicitly; otherwise hidden_size / num_attention_heads)
  int max_position_embeddings = 0;
  float rms_norm_eps = 1e-6f;
  RopeParams rope;              // theta, llama3 scaling; rope.head_dim == head_dim
  bool tie_word_embeddings = false;
  bool attention_bias = false;  // q/k/v projections have biases (Qwen2)
  bool qk_norm = false;         // per-head RMSNorm on q and k before RoPE (Qwen3)
  int bos_token_id = -1;
  std::vector<int> eos_token_ids;
  std::string torch_dtype = "bfloat16";

  int q_dim() const { return num_attention_heads * head_dim; }
  int kv_dim() const { return num_key_value_heads * head_dim; }
  int64_t num_parameters() const;  // counting a tied embedding once
  void validate() const;           // throws UserError naming the field for an inconsistent shape
};

// Reads <dir>/config.json. Unsupported architectures or field values (e.g. an unknown rope_scaling type,
// sliding-window attention enabled, a hidden_act other than silu) are refused by name with a UserError.
ModelConfig load_model_config(const std::string& dir);
// The config.json text for this config, loadable by transformers.
std::string model_config_to_hf_json(const ModelConfig& c);

}  // namespace hone
