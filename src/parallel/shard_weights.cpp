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

ShardGatherer::ShardGatherer(const ModelConfig& c, const ShardLayout& layout, Comm& tp, int root)
    : layout_(layout), tp_(tp), root_(root) {
  HONE_CHECK(tp.size() == layout.tp() && tp.rank() == layout.tp_rank(), "the communicator (rank ", tp.rank(), " of ",
             tp.size(), ") is not the layout's tensor-parallel group (rank ", layout.tp_rank(), " of ", layout.tp(),
             ")");
  HONE_CHECK(root >= 0 && root < tp.size(), "gathering on rank ", root, " of a group of ", tp.size());
  if (tp.rank() == root)
    for (int r = 0; r < tp.size(); ++r) ranks_.push_back(r == root ? layout : ShardLayout::of(c, tp.size(), r));
}

void ShardGatherer::gather(size_t i, const float* local, float* whole) {
  const ParamShard& mine = layout_.params().at(i);
  if (tp_.rank() != root_) {
    if (mine.slice.dim >= 0) tp_.send(local, mine.local_numel(), root_);
    return;
  }
  HONE_CHECK(whole != nullptr, "the gathering rank needs a whole buffer");
  ShardLayout::insert(mine, local, whole);
  if (mine.slice.dim < 0) return;  // replicated: root's copy is the whole tensor
  for (int r = 0; r < tp_.size(); ++r) {
    if (r == root_) continue;
    const ParamShard& p = ranks_[size_t(r)].params()[i];
    piece_.resize(size_t(p.local_numel()));
    tp_.recv(piece_.data(), p.local_numel(), r);
    ShardLayout::insert(p, piece_.data(), whole);
  }
}

void gather_shards_flat(const ModelConfig& c, const ShardLayout& layout, const float* local, Comm& tp, float* whole,
                        int root) {
  ShardGatherer g(c, layout, tp, root);
  HONE_CHECK(tp.rank() != root || whole != nullptr, "the gathering rank needs a whole buffer");
  const std::vector<int64_t> offsets = whole_offsets(layout);
  for (size_t i = 0; i < layout.params().size(); ++i)
    g.gather(i, local + layout.params()[i].offset, tp.rank() == root ? whole + offsets[i] : nullptr);
}

}  // namespace hone
