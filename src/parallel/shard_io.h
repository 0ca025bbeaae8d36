// Hugging Face safetensors under tensor parallelism: checkpoints and HF files stay whole (independent of tp), yet
// no rank ever holds a whole model. Loading: each rank reads only its slices of every tensor out of the memory-mapped
// files. Saving: the tp group's rank 0 writes the whole tensors, each gathered from the ranks' slices as it is
// written, so that it holds one whole parameter at a time. What the slices are: parallel/shard_layout.h.
#pragma once

#include <cstdint>
#include <string>

#include "comm/comm.h"
#include "model/model_config.h"
#include "model/weights.h"
#include "parallel/shard_layout.h"

namespace hone {

// Loads this rank's shard (layout) of every parameter of its stage (the whole model without pipeline parallelism) from <dir>/model.safetensors or the shards listed in
// <dir>/model.safetensors.index.json, converting bf16/f16/f32 to f32; vocabulary padding rows are zero. `local` is
// allocated with allocate_shard_weights when empty. The checkpoint is checked as load_weights checks it (missing or
// extra tensors, whole shapes, dtypes: the same UserErrors by name). At tp = 1 the result is load_weights' bitwise.
void load_shard_weights(ModelWeights& local, const ShardLayout& layout, const ModelConfig& c, const std::string& dir);

// Collective over tp (the layout's tensor-parallel group): writes the whole model that the ranks' shards make up as
// save_model would (the same files, byte for byte: config.json, model.safetensors or the shards and their index),
// with rank 0 of tp the only writer. The other ranks send their slices one parameter at a time as the writer
// reaches it, so the writer holds at most one whole parameter besides its shard. With several tp groups (dp or pp
// replicas) only one of them should call this. An error on the writer (e.g. a folder it cannot create) ends the run
// through the runtime's fatal exit: the other ranks are then waiting to send. At tp = 1 this is save_model.
void save_model_from_shards(const ModelWeights& local, const ShardLayout& layout, const ModelConfig& c, Comm& tp,
                            const std::string& dir, DType dtype = DType::f32,
                            int64_t max_shard_bytes = int64_t(5) << 30);

}  // namespace hone
