// The parameter table of the decoder families (what it holds: param_table.h).
#include "model/param_table.h"

#include <cstdint>

#include "model/model_config.h"
#include "runtime/error.h"

namespace hone {

const char* split_name(Split s) {
  switch (s) {
    case Split::replicated: return "replicated";
    case Split::column: return "column";
    case Split::row: return "row";
    case Split::vocab: return "vocab";
    case Split::expert: return "expert";
  }
  return "?";
}

const char* layer_param_suffix(LayerParam p) {
  switch (p) {
#define HONE_X(member, suffix, split, init) \
  case LayerParam::member:                  \
    return suffix;
    HONE_LAYER_PARAMS(HONE_X)
#undef HONE_X
  }
  return "?";
}

bool is_expert_param(LayerParam p) {
  return p == LayerParam::expert_gate || p == LayerParam::expert_up || p == LayerParam::expert_down;
}

std::string layer_param_name(int layer, LayerParam p, int expert) {
  std::string suffix = layer_param_suffix(p);
  if (is_expert_param(p)) suffix.replace(suffix.find('*'), 1, std::to_string(expert));
  return "model.layers." + std::to_string(layer) + "." + suffix;
}

namespace {

Split layer_param_split(LayerParam p) {
  switch (p) {
#define HONE_X(member, suffix, split, init) \
  case LayerParam::member:                  \
    return Split::split;
    HONE_LAYER_PARAMS(HONE_X)
#undef HONE_X
  }
  return Split::replicated;
}

ParamInit layer_param_init(LayerParam p) {
  switch (p) {
#define HONE_X(member, suffix, split, init) \
  case LayerParam::member:                  \
    return ParamInit::init;
    HONE_LAYER_PARAMS(HONE_X)
#undef HONE_X
  }
  return ParamInit::normal;
}

}  // namespace

int64_t ParamSpec::numel() const {
  int64_t n = 1;
  for (int64_t d : shape) n *= d;
  return n;
}

int ParamSpec::split_dim() const {
  switch (split) {
    case Split::column:
    case Split::vocab: return 0;
    case Split::expert: return param == LayerParam::expert_down ? 1 : 0;
    case Split::row: return 1;
    case Split::replicated: return -1;
  }
  return -1;
}

bool layer_has_param(const ModelConfig& c, int layer, LayerParam p) {
  switch (p) {
    case LayerParam::q_bias:
    case LayerParam::k_bias:
    case LayerParam::v_bias: return c.attention_bias;
    case LayerParam::q_norm:
    case LayerParam::k_norm: return c.qk_norm;
    case LayerParam::router:
    case LayerParam::expert_gate:
    case LayerParam::expert_up:
    case LayerParam::expert_down: return c.is_moe_layer(layer);
    case LayerParam::gate_proj:
    case LayerParam::up_proj:
    case LayerParam::down_proj: return !c.is_moe_layer(layer);
    default: return true;
  }
}

std::vector<int64_t> layer_param_shape(const ModelConfig& c, LayerParam p) {
  const int64_t C = c.hidden_size, I = c.intermediate_size, D = c.head_dim, Q = c.q_dim(), K = c.kv_dim();
  switch (p) {
    case LayerParam::q_proj: return {Q, C};
    case LayerParam::k_proj:
    case LayerParam::v_proj: return {K, C};
    case LayerParam::q_bias: return {Q};
    case LayerParam::k_bias:
    case LayerParam::v_bias: return {K};
    case LayerParam::o_proj: return {C, Q};
    case LayerParam::q_norm:
    case LayerParam::k_norm: return {D};
    case LayerParam::gate_proj:
    case LayerParam::up_proj: return {I, C};
    case LayerParam::down_proj: return {C, I};
    case LayerParam::input_layernorm:
    case LayerParam::post_attention_layernorm: return {C};
    case LayerParam::router: return {c.num_experts, C};
    case LayerParam::expert_gate:
    case LayerParam::expert_up: return {c.moe_intermediate_size, C};
    case LayerParam::expert_down: return {C, c.moe_intermediate_size};
  }
  HONE_CHECK(false, "unknown layer parameter ", int(p));
  return {};
}

std::vector<ParamSpec> param_table(const ModelConfig& c) {
  const int64_t V = c.vocab_size, C = c.hidden_size;
  std::vector<ParamSpec> t;
  auto global = [&](const char* name, GlobalParam g, std::vector<int64_t> shape, Split split, ParamInit init) {
    ParamSpec s;
    s.name = name;
    s.global = g;
    s.shape = std::move(shape);
    s.split = split;
    s.init = init;
    t.push_back(std::move(s));
  };
  auto layer_param = [&](int l, LayerParam p, int expert) {
    ParamSpec s;
    s.name = layer_param_name(l, p, expert);
    s.layer = l;
    s.param = p;
    s.shape = layer_param_shape(c, p);
    s.split = layer_param_split(p);
    s.init = layer_param_init(p);
    s.expert = is_expert_param(p) ? expert : -1;
    t.push_back(std::move(s));
  };
  global("model.embed_tokens.weight", GlobalParam::embed_tokens, {V, C}, Split::vocab, ParamInit::normal);
  for (int l = 0; l < c.num_hidden_layers; ++l) {
    for (int i = 0; i < kNumLayerParams; ++i) {
      const LayerParam p = LayerParam(i);
      if (!is_expert_param(p) && layer_has_param(c, l, p)) layer_param(l, p, -1);
    }
  }
  global("model.norm.weight", GlobalParam::norm, {C}, Split::replicated, ParamInit::ones);
  if (!c.tie_word_embeddings) global("lm_head.weight", GlobalParam::lm_head, {V, C}, Split::vocab, ParamInit::normal);
  for (int l = 0; l < c.num_hidden_layers; ++l) {
    if (!c.is_moe_layer(l)) continue;
    for (LayerParam p : {LayerParam::expert_gate, LayerParam::expert_up, LayerParam::expert_down})
      for (int e = 0; e < c.num_experts; ++e) layer_param(l, p, e);
  }
  return t;
}

ParamLayout ParamLayout::of(const ModelConfig& c) {
  ParamLayout p;
  p.layers.assign(size_t(c.num_hidden_layers), LayerOffsets::filled(-1));
  for (const ParamSpec& s : param_table(c)) {
    // An expert member's offset is its first expert's: the layer's experts follow it contiguously.
    if (s.layer >= 0) {
      if (p.layers[size_t(s.layer)][s.param] < 0) p.layers[size_t(s.layer)][s.param] = p.num_params;
    } else if (s.global == GlobalParam::embed_tokens) p.embed_tokens = p.num_params;
    else if (s.global == GlobalParam::norm) p.norm = p.num_params;
    else p.lm_head = p.num_params;
    p.num_params += s.numel();
    if (s.split != Split::expert) p.num_dense_params = p.num_params;
  }
  if (c.tie_word_embeddings) p.lm_head = p.embed_tokens;
  return p;
}

int64_t ParamLayout::layer_begin(int l) const {
  int64_t b = INT64_MAX;
  for (int i = 0; i < kNumLayerParams; ++i) {
    const int64_t off = layers[size_t(l)][LayerParam(i)];
    if (off >= 0 && off < b && !is_expert_param(LayerParam(i))) b = off;
  }
  return b;
}

int64_t ParamLayout::layer_experts_begin(int l) const {
  return layers[size_t(l)][LayerParam::expert_gate];
}

int64_t count_parameters(const ModelConfig& c) {
  int64_t n = 0;
  for (const ParamSpec& s : param_table(c)) n += s.numel();
  return n;
}

int64_t count_active_parameters(const ModelConfig& c) {
  int64_t n = 0;
  for (const ParamSpec& s : param_table(c)) {
    if (s.split != Split::expert) n += s.numel();
    else if (s.expert < c.num_experts_per_tok) n += s.numel();  // k experts' worth of each sparse layer
  }
  return n;
}

}  // namespace hone
