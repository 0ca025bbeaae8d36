// The model's parameters on the host in fp32, named exactly as Hugging Face names them, laid out in one flat
// buffer (so the optimizer, gradient reduction and refit see one array), with load, save and random init.
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <utility>
#include <vector>

#include "model/model_config.h"
#include "model/param_table.h"
#include "tensor/tensor.h"

namespace hone {

class SafetensorsCheckpoint;

// One layer's fp32 parameters (members as in model/param_table.h: q_proj [Hq*D, C], q_bias [Hq*D] (Qwen2 only;
// undefined otherwise), q_norm [D] (Qwen3 only), o_proj [C, Hq*D], gate/up [I, C], down [C, I], the two norms [C];
// in a sparse layer the router [E, C] and the experts this rank holds, stacked: expert_gate/expert_up
// [experts, Im, C], expert_down [experts, C, Im], instead of gate/up/down).
using LayerWeights = LayerParams<Tensor>;
// The same as pointers (null where undefined): what the layer body reads (model/transformer_layer.h).
LayerParams<const float*> layer_pointers(const LayerWeights& w);
LayerParams<float*> layer_grad_pointers(const LayerWeights& g);

struct ModelWeights {
  Tensor flat;                      // every parameter, contiguous f32, in named_parameters() order
  Tensor embed_tokens;              // [V, C]  model.embed_tokens.weight
  std::vector<LayerWeights> layers;
  Tensor norm;                      // [C]     model.norm.weight
  Tensor lm_head;                   // [V, C]  lm_head.weight; a view of embed_tokens when tied
  std::vector<ParamSpec> specs;     // the parameter table these weights were allocated from (flat buffer order)
  int expert_begin = 0;             // the first expert the expert members hold (expert parallelism)

  // Every distinct parameter with its Hugging Face name, in the parameter table's order (a tied lm_head is not
  // listed).
  std::vector<std::pair<std::string, Tensor>> named_parameters() const;
  // The tensor of one entry of the parameter table (a view): a layer member or a global, or, for an expert matrix,
  // its expert's [rows, cols] within the layer's stacked member.
  Tensor param(const ParamSpec& spec) const;
  // Points the tensor of `spec` at data with the shape spec.shape (what this rank holds of it). Expert matrices
  // are bound in table order, each layer's experts contiguous: the first of a member binds the member over all
  // `experts` of them.
  void bind(const ParamSpec& spec, float* data, int experts);
};

// Where each tensor of w lies in w.flat: the layout a model reads the weights through (a tensor outside the flat
// buffer is an error). num_dense_params is num_params: the offsets are what a model needs.
ParamLayout param_layout_of(const ModelWeights& w);

// Views into one zeroed flat f32 buffer shaped for `c` (also how gradients are allocated: same layout).
ModelWeights allocate_weights(const ModelConfig& c);
// Normal(0, std) for matrices and embeddings, 1 for norm weights, 0 for biases; deterministic in `seed`.
void init_random_weights(ModelWeights& w, const ModelConfig& c, uint64_t seed, float std = 0.02f);
// Loads every parameter from <dir>/model.safetensors or the shards in <dir>/model.safetensors.index.json
// (bf16/f16/f32 converted to f32). Missing or extra tensors, and shape mismatches, are UserErrors by name.
void load_weights(ModelWeights& w, const ModelConfig& c, const std::string& dir);
// The checks load_weights makes before reading, shared with the tensor-parallel loader (parallel/shard_io.h): ckpt
// holds every parameter of `specs` (whole HF shapes) in F32, BF16 or F16 and nothing the config does not use (a
// tied lm_head copy and rotary_emb.inv_freq buffers are tolerated). UserErrors by name, prefixed with dir.
void check_checkpoint_params(const SafetensorsCheckpoint& ckpt, const std::vector<ParamSpec>& specs,
                             const ModelConfig& c, const std::string& dir);
// Writes <dir>/config.json and the weights as safetensors (sharded with an index above max_shard_bytes),
// in `dtype` (f32 or bf16), so transformers' from_pretrained(dir) loads them unchanged.
void save_model(const ModelWeights& w, const ModelConfig& c, const std::string& dir, DType dtype = DType::f32,
                int64_t max_shard_bytes = int64_t(5) << 30);

// save_model with the whole parameters handed over one at a time, so that no whole model need exist in memory (a
// tensor-parallel save gathers them from the shards, parallel/shard_io.h): tensor_of(i) is called once for each i
// of specs (the parameter table, whole HF shapes) in order and returns that parameter's whole f32 tensor, read
// before the next call. The files are those save_model writes for the same values.
void save_model_streaming(const std::vector<ParamSpec>& specs, const ModelConfig& c, const std::string& dir,
                          DType dtype, int64_t max_shard_bytes, const std::function<Tensor(size_t)>& tensor_of);

}  // namespace hone
