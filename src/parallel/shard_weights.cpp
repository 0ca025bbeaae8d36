// Shard weights: allocation in the shard layout's order, and the whole <-> shard moves (shard_weights.h).
#include "parallel/shard_weights.h"

#include <cstring>
#include <vector>

#include "runtime/error.h"

namespace hone {

namespace {

// The element offset of every parameter of the whole model's flat buffer (the table's order, as the shard's).
std::vector<int64_t> whole_offsets(const ShardLayout& layout) {
  std::vector<int64_t> out;
  int64_t off = 0;
  for (const ParamShard& p : layout.params()) {
    out.push_back(off);
    off += p.spec.numel();
  }
  return out;
}

}  // namespace

ModelWeights allocate_shard_weights(const ShardLayout& layout, const ModelConfig& c) {
  c.validate();
  ModelWeights w;
  w.layers.resize(size_t(c.num_hidden_layers));
  w.flat = Tensor::zeros({layout.num_local_params()}, DType::f32);
  for (const ParamShard& p : layout.params()) {
    ParamSpec local = p.spec;
    local.shape = p.local_shape;
    w.param(local) = Tensor::view(w.flat.f32() + p.offset, local.shape, DType::f32);
    w.specs.push_back(std::move(local));
  }
  if (c.tie_word_embeddings) w.lm_head = w.embed_tokens;
  return w;
}

void extract_shard_flat(const ShardLayout& layout, const float* whole, float* local) {
  const std::vector<int64_t> offsets = whole_offsets(layout);
  for (size_t i = 0; i < layout.params().size(); ++i) {
    const ParamShard& p = layout.params()[i];
    ShardLayout::extract(p, whole + offsets[i], local + p.offset);
  }
}

void extract_shard(const ShardLayout& layout, const ModelWeights& whole, ModelWeights& local) {
  HONE_CHECK(local.flat.numel() == layout.num_local_params(), "shard weights of ", local.flat.numel(),
             " parameters, the layout has ", layout.num_local_params());
  extract_shard_flat(layout, whole.flat.f32(), local.flat.f32());
}

void gather_shards_flat(const ModelConfig& c, const ShardLayout& layout, const float* local, Comm& tp, float* whole,
                        int root) {
  HONE_CHECK(tp.size() == layout.tp() && tp.rank() == layout.tp_rank(), "the communicator (rank ", tp.rank(), " of ",
             tp.size(), ") is not the layout's tensor-parallel group (rank ", layout.tp_rank(), " of ", layout.tp(),
             ")");
  const std::vector<int64_t> offsets = whole_offsets(layout);
  if (tp.rank() != root) {
    for (const ParamShard& p : layout.params())
      if (p.slice.dim >= 0) tp.send(local + p.offset, p.local_numel(), root);
    return;
  }
  HONE_CHECK(whole != nullptr, "the gathering rank needs a whole buffer");
  std::vector<ShardLayout> ranks;
  for (int r = 0; r < tp.size(); ++r) ranks.push_back(r == root ? layout : ShardLayout::of(c, tp.size(), r));
  std::vector<float> piece;
  for (size_t i = 0; i < layout.params().size(); ++i) {
    ShardLayout::insert(layout.params()[i], local + layout.params()[i].offset, whole + offsets[i]);
    if (layout.params()[i].slice.dim < 0) continue;  // replicated: root's copy is the whole tensor
    for (int r = 0; r < tp.size(); ++r) {
      if (r == root) continue;
      const ParamShard& p = ranks[size_t(r)].params()[i];
      piece.resize(size_t(p.local_numel()));
      tp.recv(piece.data(), p.local_numel(), r);
      ShardLayout::insert(p, piece.data(), whole + offsets[i]);
    }
  }
}

}  // namespace hone
