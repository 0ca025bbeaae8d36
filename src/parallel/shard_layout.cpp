// One rank's tensor-parallel shard of every parameter (what the split is: shard_layout.h).
#include "parallel/shard_layout.h"

#include <algorithm>
#include <cstring>

#include "model/model_config.h"
#include "runtime/error.h"

namespace hone {

int64_t ShardSlice::valid_count() const { return std::max<int64_t>(0, std::min(begin + count, valid_end) - begin); }

int64_t ParamShard::local_numel() const {
  int64_t n = 1;
  for (int64_t d : local_shape) n *= d;
  return n;
}

namespace {

// The rows of k/v (weights and biases) this rank owns: its KV heads, or the one replicated head it reads.
int64_t kv_begin(const ModelConfig& c, const LayerShape& s) {
  const int Hkv = c.num_key_value_heads;
  const int head = Hkv % s.tp == 0 ? s.tp_rank * s.kv_heads : s.tp_rank / (s.tp / Hkv);
  return int64_t(head) * s.head_dim;
}

ShardSlice slice_of(const ModelConfig& c, const LayerShape& s, const ParamSpec& p) {
  ShardSlice sl;
  sl.dim = p.split_dim();
  if (sl.dim < 0) {
    sl.count = p.numel();
    sl.valid_end = sl.count;
    return sl;
  }
  sl.valid_end = p.shape[size_t(sl.dim)];
  switch (p.split) {
    case Split::vocab:
      sl.begin = s.vocab_begin;
      sl.count = s.vocab;
      return sl;
    case Split::column:
    case Split::row: {
      switch (p.param) {
        case LayerParam::q_proj:
        case LayerParam::q_bias:
        case LayerParam::o_proj: sl.count = s.q_dim(); sl.begin = int64_t(s.tp_rank) * sl.count; return sl;
        case LayerParam::k_proj:
        case LayerParam::k_bias:
        case LayerParam::v_proj:
        case LayerParam::v_bias: sl.count = s.kv_dim(); sl.begin = kv_begin(c, s); return sl;
        case LayerParam::gate_proj:
        case LayerParam::up_proj:
        case LayerParam::down_proj:
          sl.count = s.intermediate;
          sl.begin = int64_t(s.tp_rank) * sl.count;
          return sl;
        default: break;
      }
      break;
    }
    case Split::expert:
      sl.count = s.moe_intermediate;
      sl.begin = int64_t(s.tp_rank) * sl.count;
      return sl;
    default: break;
  }
  HONE_CHECK(false, "no tensor-parallel split for ", p.name, " (", split_name(p.split), ")");
  return sl;
}

}  // namespace

bool stage_holds(const PipelineLayout& pipe, int pp_rank, const ModelConfig& c, const ParamSpec& spec) {
  if (spec.layer >= 0) return pipe.holds_layer(pp_rank, spec.layer);
  switch (spec.global) {
    case GlobalParam::embed_tokens:
      return pipe.holds_embedding(pp_rank) || (c.tie_word_embeddings && pipe.holds_head(pp_rank));
    case GlobalParam::norm:
    case GlobalParam::lm_head: return pipe.holds_head(pp_rank);
  }
  return false;
}

ShardLayout ShardLayout::of(const ModelConfig& c, int tp, int tp_rank, const PipelineLayout* pipe, int pp_rank,
                            int ep, int ep_rank) {
  ShardLayout L;
  L.shape_ = layer_shape(c, tp, tp_rank, ep, ep_rank);
  const LayerShape& sh = L.shape_;
  if (pipe) {
    HONE_CHECK(pipe->num_layers() == c.num_hidden_layers, "a pipeline of ", pipe->num_layers(),
               " layers for a model of ", c.num_hidden_layers);
    HONE_CHECK(pp_rank >= 0 && pp_rank < pipe->pp(), "pipeline rank ", pp_rank, " of ", pipe->pp());
    L.pipe_ = *pipe;
    L.pp_rank_ = pp_rank;
  } else {
    L.pipe_ = PipelineLayout::of(c.num_hidden_layers);
  }
  for (const ParamSpec& spec : param_table(c)) {
    const int64_t whole_offset = L.num_whole_;
    L.num_whole_ += spec.numel();
    if (!stage_holds(L.pipe_, L.pp_rank_, c, spec)) continue;
    const bool expert = spec.split == Split::expert;
    if (expert && (spec.expert < sh.expert_begin || spec.expert >= sh.expert_begin + sh.experts)) continue;
    ParamShard p;
    p.spec = spec;
    p.stage_copies = spec.layer < 0 && spec.global == GlobalParam::embed_tokens && c.tie_word_embeddings &&
                             L.pipe_.pp() > 1
                         ? 2
                         : 1;
    p.slice = slice_of(c, sh, spec);
    p.local_shape = spec.shape;
    if (p.slice.dim >= 0) p.local_shape[size_t(p.slice.dim)] = p.slice.count;
    p.offset = L.num_local_;
    p.whole_offset = whole_offset;
    const bool qk_norm = spec.layer >= 0 && (spec.param == LayerParam::q_norm || spec.param == LayerParam::k_norm);
    const bool kv = spec.layer >= 0 && (spec.param == LayerParam::k_proj || spec.param == LayerParam::k_bias ||
                                        spec.param == LayerParam::v_proj || spec.param == LayerParam::v_bias);
    const bool router = spec.layer >= 0 && spec.param == LayerParam::router;
    const int Hkv = c.num_key_value_heads;
    if (spec.split == Split::replicated) p.holders = tp;
    else if (kv && Hkv % tp != 0) p.holders = tp / Hkv;
    if (!expert) p.holders *= ep;
    p.partial_grad = tp > 1 && (qk_norm || router || (kv && Hkv % tp != 0));
    L.num_local_ += p.local_numel();
    if (!expert) L.num_dense_ = L.num_local_;
    L.params_.push_back(std::move(p));
  }
  return L;
}

ParamLayout ShardLayout::param_layout() const {
  ParamLayout p;
  p.num_params = num_local_;
  p.num_dense_params = num_dense_;
  p.layers.assign(size_t(pipe_.num_layers()), LayerOffsets::filled(-1));  // a stage's other layers: absent
  for (const ParamShard& s : params_) {
    if (s.spec.layer >= 0) {
      // An expert member's offset is this rank's first expert's: its other experts follow contiguously.
      if (p.layers[size_t(s.spec.layer)][s.spec.param] < 0) p.layers[size_t(s.spec.layer)][s.spec.param] = s.offset;
    } else if (s.spec.global == GlobalParam::embed_tokens) {
      p.embed_tokens = s.offset;
    } else if (s.spec.global == GlobalParam::norm) {
      p.norm = s.offset;
    } else {
      p.lm_head = s.offset;
    }
  }
  if (p.lm_head < 0 && holds_head()) p.lm_head = p.embed_tokens;  // tied: the table lists no lm_head
  return p;
}

double ShardLayout::weighted_sum_squares(int64_t begin, int64_t n,
                                         const std::function<double(int64_t, int64_t)>& sum_squares) const {
  double total = 0;
  const int64_t end = begin + n;
  for (const ParamShard& p : params_) {
    const int64_t lo = std::max(begin, p.offset), hi = std::min(end, p.offset + p.local_numel());
    if (lo < hi) total += sum_squares(lo - begin, hi - lo) / double(p.holders * p.stage_copies);
  }
  return total;
}

ShardLayout ShardLayout::for_tp_rank(const ModelConfig& c, int tp_rank) const {
  return of(c, tp(), tp_rank, &pipe_, pp_rank_, ep(), ep_rank());
}

const ParamShard* ShardLayout::try_find(const std::string& name) const {
  for (const ParamShard& p : params_)
    if (p.spec.name == name) return &p;
  return nullptr;
}

const ParamShard& ShardLayout::find(const std::string& name) const {
  const ParamShard* p = try_find(name);
  HONE_CHECK(p, "no parameter named ", name, " in the shard layout");
  return *p;
}

std::vector<ShardRun> ShardLayout::runs(const ParamShard& p) {
  const ShardSlice& sl = p.slice;
  const auto& shape = p.spec.shape;
  if (sl.dim < 0) return {ShardRun{0, 0, p.spec.numel(), true}};
  if (sl.dim == 0) {
    int64_t row = 1;
    for (size_t d = 1; d < shape.size(); ++d) row *= shape[d];
    const int64_t real = sl.valid_count(), pad = sl.count - real;
    std::vector<ShardRun> out;
    if (real > 0) out.push_back({sl.begin * row, 0, real * row, true});
    if (pad > 0) out.push_back({(sl.begin + real) * row, real * row, pad * row, false});
    return out;
  }
  HONE_CHECK(sl.dim == 1 && shape.size() == 2, "split along dimension ", sl.dim, " of ", p.spec.name);
  std::vector<ShardRun> out(static_cast<size_t>(shape[0]));
  for (int64_t r = 0; r < shape[0]; ++r) out[size_t(r)] = {r * shape[1] + sl.begin, r * sl.count, sl.count, true};
  return out;
}

void ShardLayout::extract(const ParamShard& p, const float* whole, float* local) {
  for (const ShardRun& r : runs(p)) {
    if (r.valid) std::memcpy(local + r.local, whole + r.whole, size_t(r.n) * sizeof(float));
    else std::memset(local + r.local, 0, size_t(r.n) * sizeof(float));
  }
}

void ShardLayout::insert(const ParamShard& p, const float* local, float* whole) {
  for (const ShardRun& r : runs(p))
    if (r.valid) std::memcpy(whole + r.whole, local + r.local, size_t(r.n) * sizeof(float));
}

}  // namespace hone
