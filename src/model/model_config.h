// ModelConfig: the transformer's shape and options, read from a Hugging Face config.json (LlamaForCausalLM,
// Qwen2ForCausalLM, Qwen3ForCausalLM, Qwen3MoeForCausalLM) or built from a shape given in the deck. Host-only.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "ops/ops.h"

namespace hone {

enum class Architecture { llama, qwen2, qwen3, qwen3_moe };

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

  // Mixture of experts (Qwen3-MoE); num_experts == 0 is a dense model. A layer is sparse (its feed-forward is the
  // router and num_experts expert MLPs of width moe_intermediate_size, num_experts_per_tok of them per token) when
  // it is not in mlp_only_layers and (layer + 1) is a multiple of decoder_sparse_step; other layers keep the dense
  // MLP of width intermediate_size.
  int num_experts = 0;               // E: num_experts (published checkpoints) or num_local_experts (transformers 5)
  int num_experts_per_tok = 0;       // k
  int moe_intermediate_size = 0;
  bool norm_topk_prob = false;       // the k routing weights renormalized to sum to 1
  int decoder_sparse_step = 1;
  std::vector<int> mlp_only_layers;
  float router_aux_loss_coef = 0.f;  // the load-balancing loss's weight in transformers (loss.moe_aux_loss_coef)

  bool is_moe() const { return num_experts > 0; }
  bool is_moe_layer(int layer) const;
  int num_moe_layers() const;
  bool has_dense_layers() const { return num_moe_layers() < num_hidden_layers; }

  int q_dim() const { return num_attention_heads * head_dim; }
  int kv_dim() const { return num_key_value_heads * head_dim; }
  int64_t num_parameters() const;  // counting a tied embedding once
  // The parameters one token computes with: every parameter but the experts, plus num_experts_per_tok experts of
  // each sparse layer (what MoE throughput is counted on). A dense model's num_parameters().
  int64_t num_active_parameters() const;
  // num_parameters() in closed form (no table built: cheap for any shape, exact below 2^53), in a double so that
  // no shape overflows it: what validate() and the memory planners weigh before anything per layer is built.
  double parameter_count_bound() const;
  // Throws UserError naming the field for an inconsistent shape, or one past hone's limits (layers, experts,
  // parameters: model_config.cpp) that would have per-layer tables built for it before a memory plan could refuse.
  void validate() const;
};

// Reads <dir>/config.json. Unsupported architectures or field values (e.g. an unknown rope_scaling type,
// sliding-window attention enabled, a hidden_act other than silu) are refused by name with a UserError.
ModelConfig load_model_config(const std::string& dir);
// The config.json text for this config, loadable by transformers.
std::string model_config_to_hf_json(const ModelConfig& c);

}  // namespace hone
