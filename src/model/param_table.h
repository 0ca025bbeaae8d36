// The parameter table: every parameter of a model family, once. For each: its Hugging Face name, its shape as a
// function of the config, how tensor parallelism splits it, and how random init fills it. Weight allocation,
// loading and saving (model/weights.cpp), the flat layouts of the optimizer and the GPU engine
// (model/gpu_param_layout), the memory planner and the tests' parameter lists are generated from this table; no
// other place lists parameters.
//
// The order is the order in which transformers registers the parameters (model.named_parameters()), which is also
// the order of the flat parameter buffer: embed_tokens; per layer q/k/v/o projections (each bias after its weight),
// q_norm, k_norm, the router (mlp.gate) of a sparse layer or gate/up/down of a dense one, the two layer norms; the
// final norm; lm_head unless tied. Experts come last (Qwen3-MoE): every sparse layer's experts after all of the
// above, stacked by matrix (gate_proj of experts 0..E-1, then up_proj, then down_proj), so that the expert
// parameters are one region of the flat buffer (expert parallelism reduces them over another group than the dense
// ones) and each layer's gate, up and down weights are one [E, rows, cols] array for the grouped GEMMs.
// Each expert matrix is its own entry of the table, under its Hugging Face name
// (model.layers.<i>.mlp.experts.<e>.gate_proj.weight), so loading and saving read and write the published names.
//
// A layer's parameters are the members of LayerParams<T>, generated from HONE_LAYER_PARAMS: Tensor on the CPU,
// element offsets or device pointers on the GPU. Plain header (no Boost, TOML or HDF5): .cu-safe.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace hone {

struct ModelConfig;

// How tensor parallelism splits a parameter (Megatron's layout): column-parallel weights are split along their
// output rows (dimension 0) with their biases, row-parallel weights along their input columns (dimension 1), the
// vocabulary-parallel embedding and LM head along the vocabulary (dimension 0). Replicated parameters (norm
// weights, the router) are whole on every rank. Expert matrices belong to one expert-parallel rank (the one
// holding their expert) and are split over tensor parallelism as the dense MLP's are: gate_proj and up_proj by
// rows, down_proj by columns (expert_split_dim).
enum class Split : uint8_t { replicated, column, row, vocab, expert };
const char* split_name(Split s);

// How init_random_weights fills a parameter: Normal(0, std), ones (norm weights) or zeros (biases).
enum class ParamInit : uint8_t { normal, ones, zeros };

// X(member, Hugging Face suffix after "model.layers.<i>.", split, init), in named_parameters() order (the experts,
// whose '*' is the expert's index, go to the end: above). Members of experts hold every expert this rank has.
#define HONE_LAYER_PARAMS(X)                                                  \
  X(q_proj, "self_attn.q_proj.weight", column, normal)                        \
  X(q_bias, "self_attn.q_proj.bias", column, zeros)                           \
  X(k_proj, "self_attn.k_proj.weight", column, normal)                        \
  X(k_bias, "self_attn.k_proj.bias", column, zeros)                           \
  X(v_proj, "self_attn.v_proj.weight", column, normal)                        \
  X(v_bias, "self_attn.v_proj.bias", column, zeros)                           \
  X(o_proj, "self_attn.o_proj.weight", row, normal)                           \
  X(q_norm, "self_attn.q_norm.weight", replicated, ones)                      \
  X(k_norm, "self_attn.k_norm.weight", replicated, ones)                      \
  X(router, "mlp.gate.weight", replicated, normal)                            \
  X(gate_proj, "mlp.gate_proj.weight", column, normal)                        \
  X(up_proj, "mlp.up_proj.weight", column, normal)                            \
  X(down_proj, "mlp.down_proj.weight", row, normal)                           \
  X(input_layernorm, "input_layernorm.weight", replicated, ones)              \
  X(post_attention_layernorm, "post_attention_layernorm.weight", replicated, ones) \
  X(expert_gate, "mlp.experts.*.gate_proj.weight", expert, normal)            \
  X(expert_up, "mlp.experts.*.up_proj.weight", expert, normal)                \
  X(expert_down, "mlp.experts.*.down_proj.weight", expert, normal)

enum class LayerParam : uint8_t {
#define HONE_X(member, suffix, split, init) member,
  HONE_LAYER_PARAMS(HONE_X)
#undef HONE_X
};
constexpr int kNumLayerParams = 0
#define HONE_X(member, suffix, split, init) +1
    HONE_LAYER_PARAMS(HONE_X)
#undef HONE_X
    ;

const char* layer_param_suffix(LayerParam p);  // "self_attn.q_proj.weight"; experts: "mlp.experts.*.gate_proj.weight"
bool is_expert_param(LayerParam p);            // expert_gate, expert_up, expert_down

// One layer's parameters as T: Tensor (host fp32 weights), int64_t (element offsets in a flat buffer, -1 where the
// architecture has no such parameter) or a pointer (device weights or gradients, null where absent).
template <typename T>
struct LayerParams {
#define HONE_X(member, suffix, split, init) T member{};
  HONE_LAYER_PARAMS(HONE_X)
#undef HONE_X

  T& operator[](LayerParam p) {
    switch (p) {
#define HONE_X(member, suffix, split, init) \
  case LayerParam::member:                  \
    return member;
      HONE_LAYER_PARAMS(HONE_X)
#undef HONE_X
    }
    return q_proj;  // unreachable: every enumerator is a case
  }
  const T& operator[](LayerParam p) const { return const_cast<LayerParams&>(*this)[p]; }

  // Every member set to v (e.g. -1 for "absent" offsets).
  static LayerParams filled(T v) {
    LayerParams r;
    for (int i = 0; i < kNumLayerParams; ++i) r[LayerParam(i)] = v;
    return r;
  }
};

// Pointers into a flat buffer from element offsets (-1: null).
template <typename E>
LayerParams<E*> layer_pointers(const LayerParams<int64_t>& offsets, E* base) {
  LayerParams<E*> p;
  for (int i = 0; i < kNumLayerParams; ++i) {
    const int64_t off = offsets[LayerParam(i)];
    p[LayerParam(i)] = off < 0 ? nullptr : base + off;
  }
  return p;
}

// The parameters outside the layers.
enum class GlobalParam : uint8_t { embed_tokens, norm, lm_head };

struct ParamSpec {
  std::string name;             // the Hugging Face name, e.g. "model.layers.3.self_attn.q_proj.weight"
  int layer = -1;               // the layer, or -1 for a global parameter
  LayerParam param{};           // which layer parameter (layer >= 0)
  GlobalParam global{};         // which global parameter (layer < 0)
  std::vector<int64_t> shape;   // the whole tensor as Hugging Face stores it
  Split split = Split::replicated;
  ParamInit init = ParamInit::normal;
  int expert = -1;              // the expert of an expert matrix (Split::expert), else -1

  int64_t numel() const;
  // The dimension that tensor parallelism splits (0 for column and vocab, 1 for row; an expert matrix as its dense
  // twin: 0 for gate/up, 1 for down), -1 when replicated.
  int split_dim() const;
};

// Element offsets of every parameter in the flat parameter buffer (the table's order): the layout of the fp32 master
// weights, the gradients, the optimizer's moments and the bf16 compute weights alike.
using LayerOffsets = LayerParams<int64_t>;
struct ParamLayout {
  int64_t num_params = 0;
  // The dense parameters are [0, num_dense_params) of the flat buffer, the experts (Qwen3-MoE) the rest.
  int64_t num_dense_params = 0;
  int64_t embed_tokens = -1, norm = -1, lm_head = -1;  // lm_head == embed_tokens when tied
  std::vector<LayerOffsets> layers;                    // -1 where the architecture has no such parameter

  static ParamLayout of(const ModelConfig& c);
  // The first offset of layer l's dense parameters, and of its experts (-1 without experts).
  int64_t layer_begin(int l) const;
  int64_t layer_experts_begin(int l) const;
};

// Every distinct parameter of c's family, in named_parameters() order (a tied lm_head is not listed: it is the
// embedding), experts last. Which optional parameters exist follows c (attention_bias, qk_norm,
// tie_word_embeddings, the sparse layers of an MoE config).
std::vector<ParamSpec> param_table(const ModelConfig& c);

// Whether layer `layer` of c has parameter p (biases only with attention_bias, q/k norms only with qk_norm, the
// router and experts only in sparse layers, gate/up/down only in dense ones).
bool layer_has_param(const ModelConfig& c, int layer, LayerParam p);
// The whole Hugging Face shape of layer parameter p under c (of one expert for an expert matrix).
std::vector<int64_t> layer_param_shape(const ModelConfig& c, LayerParam p);
// The Hugging Face name of a layer parameter ("model.layers.3.mlp.experts.7.up_proj.weight"); expert is ignored
// unless p is an expert matrix.
std::string layer_param_name(int layer, LayerParam p, int expert = -1);
// The element count of every parameter of the table (a tied embedding counted once).
int64_t count_parameters(const ModelConfig& c);
// Those one token computes with (ModelConfig::num_active_parameters).
int64_t count_active_parameters(const ModelConfig& c);

}  // namespace hone
