// One tensor- and pipeline-parallel rank's weights (ModelWeights whose tensors have the rank's local shapes, in the
// shard layout's flat order, parallel/shard_layout.h; a pipeline stage's other layers are left undefined) and the moves between whole and sharded flat buffers: a rank's slices out of
// the whole model (loading, resuming a checkpoint at another tp), and the slices of every rank gathered back into
// the whole model on one rank (checkpoints and HF files are whole, independent of tp).
#pragma once

#include <vector>

#include "comm/comm.h"
#include "model/model_config.h"
#include "model/weights.h"
#include "parallel/shard_layout.h"

namespace hone {

// Zeroed fp32 weights shaped as this rank's shard (tp = 1: allocate_weights(c)). A tied lm_head is the embedding.
ModelWeights allocate_shard_weights(const ShardLayout& layout, const ModelConfig& c);
// The same shapes as views of data[layout.num_local_params()] (which must outlive them).
ModelWeights shard_weights_view(const ShardLayout& layout, const ModelConfig& c, float* data);

// local[num_local_params] = this rank's slices of whole[num_params] (a flat buffer in ParamLayout::of(c)'s order:
// weights, gradients or optimizer moments alike). Vocabulary padding rows are zero.
void extract_shard_flat(const ShardLayout& layout, const float* whole, float* local);
void extract_shard(const ShardLayout& layout, const ModelWeights& whole, ModelWeights& local);

// Collective over tp (the layout's tensor-parallel group): every rank passes its local flat shard; `whole`
// [num_params] on rank `root` of tp receives the whole model, one parameter at a time (no rank holds more than
// the whole model and one parameter's slice). whole is only written on root (others may pass nullptr).
// The gathering of gather_shards_flat one parameter at a time, for callers that use each whole parameter before the
// next (saving HF files from the shards without a whole model in memory, parallel/shard_io.h). Every rank of tp
// calls gather for the same parameters in the same order; c, layout and tp must outlive this object.
class ShardGatherer {
 public:
  ShardGatherer(const ModelConfig& c, const ShardLayout& layout, Comm& tp, int root = 0);
  // Parameter i of the layout: every rank passes its slice (local_numel elements); whole [spec.numel()] on root
  // receives the whole tensor (others may pass nullptr). Replicated parameters move nowhere: root's copy is whole.
  void gather(size_t i, const float* local, float* whole);

 private:
  const ShardLayout& layout_;
  Comm& tp_;
  int root_;
  std::vector<ShardLayout> ranks_;  // every rank's layout, on root only
  std::vector<float> piece_;        // one received slice
};

void gather_shards_flat(const ModelConfig& c, const ShardLayout& layout, const float* local, Comm& tp, float* whole,
                        int root = 0);

// Collective over tp and pp (the layout's tensor- and pipeline-parallel groups): every rank passes its local flat
// shard of its stage; `whole` [num_params] on tp rank 0 of pipeline rank 0 receives the whole model. Each stage's
// tp rank 0 gathers the parameters it owns one at a time and sends them to the root over pp (a tied embedding is
// taken from the first stage). At pp = 1: gather_shards_flat onto tp rank 0.
void gather_model_flat(const ModelConfig& c, const ShardLayout& layout, const float* local, Comm& tp, Comm& pp,
                       float* whole);

}  // namespace hone
