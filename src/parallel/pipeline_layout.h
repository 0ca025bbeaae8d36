// Pipeline parallelism's split of the layers, described once: the model's L decoder layers cut into pp x vpp
// contiguous model chunks, in model order, and which pipeline rank holds which chunk. The first chunk also holds the
// embedding, the last one the final norm and the LM head (with tied embeddings, the last rank keeps its own copy of
// the tied weight as its LM head: Megatron's embedding group). The shard layout (parallel/shard_layout.h), the
// stage's Transformer, the schedule and the memory planner read it; none re-derives a split.
//
// Interleaving (parallel.vpp = V virtual stages per rank, Megatron's interleaved schedule): model chunk k lives on
// pipeline rank k % pp as its virtual chunk v = k / pp, so a micro-batch visits rank 0, 1, .., pp-1, then rank 0
// again for its second chunk. V = 1 is the plain split: rank r holds chunk r.
//
//   PipelineLayout p = PipelineLayout::of(/*layers=*/8, /*pp=*/2, /*vpp=*/2);   // 4 chunks of 2 layers
//   p.model_chunk(1, 1) == 3;  p.layer_begin(3) == 6;  p.layers_of(1) == {2, 3, 6, 7}
//   PipelineLayout::of(8, 2, 1, {3, 5});   // uneven: rank 0 layers 0-2, rank 1 layers 3-7
// Plain header.
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

namespace hone {

class PipelineLayout {
 public:
  // num_layers over pp ranks x vpp chunks each. chunk_layers: the layers of each model chunk in model order
  // (pp x vpp entries, each >= 0, summing to num_layers; parallel.pp_layers), or empty for the even split, which
  // needs pp x vpp to divide num_layers. UserError naming parallel.pp, parallel.vpp and parallel.pp_layers
  // otherwise.
  static PipelineLayout of(int num_layers, int pp = 1, int vpp = 1, const std::vector<int64_t>& chunk_layers = {});

  int pp() const { return pp_; }
  int vpp() const { return vpp_; }
  int num_layers() const { return num_layers_; }
  int num_chunks() const { return pp_ * vpp_; }
  bool split() const { return pp_ > 1; }  // more than one stage

  // The model chunk that pipeline rank r runs as its virtual chunk v, and back.
  int model_chunk(int pp_rank, int v) const { return v * pp_ + pp_rank; }
  int rank_of_chunk(int model_chunk) const { return model_chunk % pp_; }
  int virtual_of_chunk(int model_chunk) const { return model_chunk / pp_; }
  int layer_begin(int model_chunk) const { return begin_[size_t(model_chunk)]; }
  int layer_end(int model_chunk) const { return begin_[size_t(model_chunk) + 1]; }
  bool first_chunk(int model_chunk) const { return model_chunk == 0; }
  bool last_chunk(int model_chunk) const { return model_chunk == num_chunks() - 1; }

  // Whether pipeline rank r holds the embedding (the first chunk) and the final norm with the LM head (the last).
  bool holds_embedding(int pp_rank) const { return pp_rank == 0; }
  bool holds_head(int pp_rank) const { return pp_rank == pp_ - 1; }
  // The pipeline rank holding layer l; the layers of rank r in ascending order.
  int rank_of_layer(int layer) const;
  std::vector<int> layers_of(int pp_rank) const;
  bool holds_layer(int pp_rank, int layer) const { return rank_of_layer(layer) == pp_rank; }

 private:
  int num_layers_ = 0, pp_ = 1, vpp_ = 1;
  std::vector<int> begin_;  // num_chunks + 1 layer boundaries
};

}  // namespace hone
