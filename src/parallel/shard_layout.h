// The layout of one rank's shard of the model under tensor and pipeline parallelism, described once: for every
// parameter of the parameter table (model/param_table.h) this rank holds, which dimension of the Hugging Face tensor
// is split, which slice this rank owns and the shape it holds. Loading safetensors (a rank reads only its slices),
// saving whole HF tensors, the optimizer's flat buffer of the shard, the memory planner and the resharding refit
// (parallel/reshard.h) read it; none re-derives a split.
//
// Under pipeline parallelism (parallel/pipeline_layout.h) a rank holds only its stage's parameters: the layers of its
// chunks, the embedding on the first stage, the final norm and LM head on the last. With tied embeddings the last
// stage holds a copy of the tied weight (model.embed_tokens.weight) as its LM head: two stage copies, whose
// gradients are summed over the two stages and which count once in the gradient norm (Megatron's embedding group).
//
// Megatron's split over T ranks (the same as LayerShape's, model/layer_shape.h):
//   column  (q/k/v and gate/up weights and biases): output rows; rank r owns rows [r*n, (r+1)*n) of q, gate, up;
//           k and v by KV head: rank r owns its KV heads' rows, or, when T is a multiple of the KV heads (T > Hkv),
//           the rows of KV head r / (T / Hkv): that head is replicated over T / Hkv consecutive ranks;
//   row     (o_proj, down_proj): input columns [r*n, (r+1)*n);
//   vocab   (embedding, LM head): rows [r*v, (r+1)*v) of the vocabulary padded to a multiple of T; rows past the
//           real vocabulary are padding (zero weights, never a target);
//   replicated (norm weights, the router): whole on every rank;
//   expert  (Qwen3-MoE expert matrices): held by the expert-parallel rank of their expert only (rank e owns experts
//           [e*E/EP, (e+1)*E/EP)), the others' are not in its shard; split over T as the dense MLP: gate/up rows,
//           down columns of this rank's slice of moe_intermediate_size.
// Plain header.
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "model/layer_shape.h"
#include "model/param_table.h"
#include "parallel/pipeline_layout.h"

namespace hone {

struct ModelConfig;

// The part of a whole HF tensor a rank owns: along `dim` (-1: the whole tensor), `count` entries from `begin`.
// For the padded vocabulary, the entries of [begin, begin + count) at or past `valid_end` are padding.
struct ShardSlice {
  int dim = -1;
  int64_t begin = 0, count = 0;
  int64_t valid_end = 0;  // along dim; == the HF tensor's size there, except for the padded vocabulary

  int64_t valid_count() const;  // entries of the slice that exist in the HF tensor
};

struct ParamShard {
  ParamSpec spec;                   // the whole parameter (name, HF shape, split)
  std::vector<int64_t> local_shape;  // what this rank holds
  ShardSlice slice;
  int64_t offset = 0;               // element offset in this rank's flat buffer
  int64_t whole_offset = 0;         // element offset of the whole parameter in the whole model's flat buffer
  // Ranks of the tensor- and expert-parallel groups holding the same values as this shard: tp for replicated
  // parameters, tp / Hkv for a KV head replicated over several ranks, else 1; times ep for every parameter but the
  // experts (every expert-parallel rank holds the dense ones). Their gradients count once in the global norm.
  int holders = 1;
  // The gradient is partial on each rank and must be summed over the group: the q/k norm weights (one [head_dim]
  // weight shared by every rank's heads), a replicated KV head's k/v (summed over the ranks sharing it), and the
  // router (each rank's routing-weight gradients come from its partial expert outputs).
  bool partial_grad = false;
  // Pipeline stages holding a copy of this parameter: 2 for a tied embedding split over the first and last stage
  // (the copies' gradients are summed over them: tied_across_stages), else 1.
  int stage_copies = 1;
  bool expert() const { return spec.split == Split::expert; }

  int64_t local_numel() const;
  bool tied_across_stages() const { return stage_copies > 1; }
};

// A contiguous run of a slice: n elements at `whole` in the HF tensor (row-major) and at `local` in the shard;
// valid is false for vocabulary padding (no counterpart in the HF tensor: zero in the shard).
struct ShardRun {
  int64_t whole = 0, local = 0, n = 0;
  bool valid = true;
};

class ShardLayout {
 public:
  // This rank's shard of c's parameters at tensor-parallel size tp and expert-parallel size ep; the UserError of
  // layer_shape when tp or ep does not divide the model. With a pipeline, only pipeline rank pp_rank's stage
  // (pipe == nullptr: the whole model). The shard's flat buffer keeps the table's order (the experts, this rank's
  // only, last: [num_dense_params, num_local_params) of it).
  static ShardLayout of(const ModelConfig& c, int tp, int tp_rank, const PipelineLayout* pipe = nullptr,
                        int pp_rank = 0, int ep = 1, int ep_rank = 0);
  // The same stage's (and expert-parallel rank's) layout for another tensor-parallel rank.
  ShardLayout for_tp_rank(const ModelConfig& c, int tp_rank) const;

  int tp() const { return shape_.tp; }
  int tp_rank() const { return shape_.tp_rank; }
  int ep() const { return shape_.ep; }
  int ep_rank() const { return shape_.ep_rank; }
  const PipelineLayout& pipeline() const { return pipe_; }
  int pp_rank() const { return pp_rank_; }
  bool whole_model() const { return pipe_.pp() == 1; }  // every parameter of the table is here
  bool holds_embedding() const { return pipe_.holds_embedding(pp_rank_); }
  bool holds_head() const { return pipe_.holds_head(pp_rank_); }
  const LayerShape& shape() const { return shape_; }
  const std::vector<ParamShard>& params() const { return params_; }
  int64_t num_local_params() const { return num_local_; }
  int64_t num_dense_params() const { return num_dense_; }  // the non-expert part, first in the flat buffer
  int64_t num_whole_params() const { return num_whole_; }  // the whole model's
  // The element offsets of this shard's flat buffer as a ParamLayout (what the GPU engine and its optimizers read;
  // at tp = 1 the same as ParamLayout::of(config)).
  ParamLayout param_layout() const;
  // Sum over the parameters overlapping [begin, begin + n) of this shard's flat buffer of
  // sum_squares(offset - begin, count) / (holders x stage_copies): a rank's share of the global gradient norm's
  // square, such that the sum over the tensor- and pipeline-parallel groups counts every value once.
  double weighted_sum_squares(int64_t begin, int64_t n,
                              const std::function<double(int64_t offset, int64_t count)>& sum_squares) const;
  // The shard of the parameter named `name` (HF name); Error when there is none (or null from try_find).
  const ParamShard& find(const std::string& name) const;
  const ParamShard* try_find(const std::string& name) const;

  // The runs of p's slice in order of the local shard: a whole tensor or a dimension-0 slice is one run of real
  // rows (and one of padding rows); a dimension-1 slice is one run per row. What a loader reads from a file.
  static std::vector<ShardRun> runs(const ParamShard& p);
  // Copies this rank's slice out of a whole HF tensor (row-major, spec.shape) into `local` (local_numel elements,
  // padding rows zero).
  static void extract(const ParamShard& p, const float* whole, float* local);
  // Writes this rank's slice into a whole HF tensor (padding rows dropped): the inverse of extract.
  static void insert(const ParamShard& p, const float* local, float* whole);

 private:
  LayerShape shape_;
  PipelineLayout pipe_ = PipelineLayout::of(1);
  int pp_rank_ = 0;
  std::vector<ParamShard> params_;
  int64_t num_local_ = 0, num_dense_ = 0, num_whole_ = 0;
};

// Whether pipeline rank pp_rank's stage holds parameter spec: its layer is one of the stage's, or it is the embedding
// (first stage; with tied embeddings also the last), the final norm or the LM head (last stage).
bool stage_holds(const PipelineLayout& pipe, int pp_rank, const ModelConfig& c, const ParamSpec& spec);

}  // namespace hone
