// The deck's random-init model shape (see deck_model.h).
#include "model/deck_model.h"

#include "config/config.h"
#include "runtime/error.h"

namespace hone {

ModelConfig random_init_model_config(const Config& c) {
  ModelConfig m;
  const std::string arch = c.get_string("model.architecture");
  m.arch = arch == "llama"       ? Architecture::llama
           : arch == "qwen2"     ? Architecture::qwen2
           : arch == "qwen3_moe" ? Architecture::qwen3_moe
                                 : Architecture::qwen3;
  m.vocab_size = int(c.get_int("model.vocab_size"));
  m.hidden_size = int(c.get_int("model.hidden_size"));
  m.intermediate_size = int(c.get_int("model.intermediate_size"));
  m.num_hidden_layers = int(c.get_int("model.num_layers"));
  m.num_attention_heads = int(c.get_int("model.num_attention_heads"));
  const int64_t kv = c.get_int("model.num_key_value_heads");
  m.num_key_value_heads = int(kv > 0 ? kv : m.num_attention_heads);
  const int64_t hd = c.get_int("model.head_dim");
  HONE_USER_CHECK(hd > 0 || m.hidden_size % m.num_attention_heads == 0, "model.hidden_size = ", m.hidden_size,
                  " is not a multiple of model.num_attention_heads = ", m.num_attention_heads,
                  " (or set model.head_dim)");
  m.head_dim = int(hd > 0 ? hd : m.hidden_size / m.num_attention_heads);
  m.max_position_embeddings = int(c.get_int("model.max_position_embeddings"));
  m.rms_norm_eps = float(c.get_float("model.rms_norm_eps"));
  m.rope.head_dim = m.head_dim;
  m.rope.theta = float(c.get_float("model.rope_theta"));
  m.tie_word_embeddings = c.get_bool("model.tie_word_embeddings");
  m.attention_bias = m.arch == Architecture::qwen2;
  m.qk_norm = m.arch == Architecture::qwen3 || m.arch == Architecture::qwen3_moe;
  if (m.arch == Architecture::qwen3_moe) {  // every layer sparse, as the published Qwen3-MoE models
    m.num_experts = int(c.get_int("model.num_experts"));
    m.num_experts_per_tok = int(c.get_int("model.num_experts_per_tok"));
    m.moe_intermediate_size = int(c.get_int("model.moe_intermediate_size"));
    m.norm_topk_prob = c.get_bool("model.norm_topk_prob");
    m.router_aux_loss_coef = float(c.get_float("model.router_aux_loss_coef"));
    HONE_USER_CHECK(m.num_experts > 0 && m.moe_intermediate_size > 0, "model.architecture = \"qwen3_moe\" needs "
                    "model.num_experts and model.moe_intermediate_size (got ", m.num_experts, " and ",
                    m.moe_intermediate_size, ")");
  }
  return m;
}

}  // namespace hone
