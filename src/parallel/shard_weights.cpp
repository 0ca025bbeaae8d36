// Shard weights: allocation in the shard layout's order, and the whole <-> shard moves (shard_weights.h).
#include "parallel/shard_weights.h"

#include <cstring>
#include <vector>

#include "runtime/error.h"

namespace hone {

namespace {
void bind_shard(ModelWeights& w, const ShardLayout& layout, const ModelConfig& c) {
  w.layers.resize(size_t(c.num_hidden_layers));
  for (const ParamShard& p : layout.params()) {
    ParamSpec local = p.spec;
    local.shape = p.local_shape;
    w.bind(local, w.flat.f32() + p.offset, layout.shape().experts);
    w.specs.push_back(std::move(local));
  }
  if (c.tie_word_embeddings) w.lm_head = w.embed_tokens;
}
}  // namespace

ModelWeights allocate_shard_weights(const ShardLayout& layout, const ModelConfig& c) {
  c.validate();
  ModelWeights w;
  w.flat = Tensor::zeros({layout.num_local_params()}, DType::f32);
  bind_shard(w, layout, c);
  return w;
}

ModelWeights shard_weights_view(const ShardLayout& layout, const ModelConfig& c, float* data) {
  ModelWeights w;
  w.flat = Tensor::view(data, {layout.num_local_params()}, DType::f32);
  bind_shard(w, layout, c);
  return w;
}

void extract_shard_flat(const ShardLayout& layout, const float* whole, float* local) {
  for (const ParamShard& p : layout.params()) ShardLayout::extract(p, whole + p.whole_offset, local + p.offset);
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
    for (int r = 0; r < tp.size(); ++r) ranks_.push_back(r == root ? layout : layout.for_tp_rank(c, r));
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
  for (size_t i = 0; i < layout.params().size(); ++i) {
    const ParamShard& p = layout.params()[i];
    g.gather(i, local + p.offset, tp.rank() == root ? whole + p.whole_offset : nullptr);
  }
}

void gather_model_flat(const ModelConfig& c, const ShardLayout& layout, const float* local, Comm& tp, Comm& pp,
                       float* whole) {
  HONE_CHECK(pp.size() == layout.pipeline().pp() && pp.rank() == layout.pp_rank(), "the communicator (rank ",
             pp.rank(), " of ", pp.size(), ") is not the layout's pipeline group (rank ", layout.pp_rank(), " of ",
             layout.pipeline().pp(), ")");
  if (pp.size() == 1) return gather_shards_flat(c, layout, local, tp, whole, 0);
  const bool root = tp.rank() == 0 && pp.rank() == 0;
  HONE_CHECK(!root || whole != nullptr, "the gathering rank needs a whole buffer");
  // Every parameter's owner: the first stage holding it (a tied embedding's two copies are equal).
  const std::vector<ParamSpec> table = param_table(c);
  std::vector<int> owner(table.size(), 0);
  std::vector<int64_t> whole_offset(table.size(), 0);
  for (size_t k = 0, off = 0; k < table.size(); off += size_t(table[k].numel()), ++k) {
    while (!stage_holds(layout.pipeline(), owner[k], c, table[k])) ++owner[k];
    whole_offset[k] = int64_t(off);
  }
  ShardGatherer g(c, layout, tp, 0);
  std::vector<float> piece;  // one whole parameter, on a later stage's tensor-parallel rank 0
  for (size_t i = 0; i < layout.params().size(); ++i) {
    const ParamShard& p = layout.params()[i];
    size_t k = 0;
    while (table[k].name != p.spec.name) ++k;
    if (owner[k] != pp.rank()) continue;
    if (pp.rank() == 0) {
      g.gather(i, local + p.offset, root ? whole + p.whole_offset : nullptr);
      continue;
    }
    if (tp.rank() == 0) piece.resize(size_t(p.spec.numel()));
    g.gather(i, local + p.offset, tp.rank() == 0 ? piece.data() : nullptr);
    // Each owner sends in the table's order; the root receives in that order (blocking sends wait, never cross).
    if (tp.rank() == 0) pp.send(piece.data(), p.spec.numel(), 0);
  }
  if (!root) return;
  for (size_t k = 0; k < table.size(); ++k)
    if (owner[k] != 0) pp.recv(whole + whole_offset[k], table[k].numel(), owner[k]);
}

}  // namespace hone
