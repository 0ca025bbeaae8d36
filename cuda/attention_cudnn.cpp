// Packed variable-length causal GQA attention through cuDNN's fused SDPA (frontend graph API), the full attention of
// a ring attention block's segments (the same graphs without the causal mask, query and key rows of their own), and
// the dispatch between them and the plain CUDA reference (see cuda/attention_cudnn.h for the HONE_ATTENTION switch).
//
// Layout: our packed q[T, Hq, D] is cuDNN's "THD" layout: a [B, H, S, D] tensor with strides (S*H*D, D, H*D, 1)
// whose batch b starts at a ragged offset (cu_seqlens[b] * H * D elements), with a padding mask giving each batch
// its true length. S is max_seqlen rounded up; B is num_seqs rounded up (extra batches have length 0). cuDNN's Stats
// (natural-log log-sum-exp of the scaled scores, fp32) are kept in a padded, packed [B, Hq, S, 1] buffer and
// converted to/from our lse[Hq, T] by small kernels. The packed attention's backward has cuDNN write dq/dk/dv in
// place (the op writes them; cuDNN reduces the GQA groups into dk/dv itself); a ring attention block's gradients
// land in zeroed scratch (cuDNN writes the segments' rows only) and are added into the running dq/dk/dv.
// Graphs are built once per (direction, B, S, Hq, Hkv, D, scale) and cached in the context.
#include "cuda/attention_cudnn.h"

#include <cudnn_frontend.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <map>
#include <memory>
#include <string>
#include <tuple>
#include <unordered_map>

#include "cuda/check.h"
#include "cuda/gpu_context_impl.h"

namespace hone::cuda {

namespace fe = cudnn_frontend;

namespace {

// Tensor uids of both graphs.
enum Uid : int64_t {
  kQ = 1, kK, kV, kO, kStats, kDO, kDQ, kDK, kDV, kSeqQ, kSeqKV, kOffQ, kOffK, kOffV, kOffO, kOffDO, kOffDQ, kOffDK,
  kOffDV
};

enum class Direction { forward, backward };

// S: the padded query rows of a batch, Skv its key rows (S for the causal packed attention). causal: the packed
// attention's mask; a ring attention block is full (non-causal) attention of its segments.
struct GraphKey {
  Direction direction;
  int B, S, Hq, Hkv, D;
  uint32_t scale_bits;
  bool causal = true;
  int Skv = 0;
  bool operator<(const GraphKey& o) const {
    return std::tie(direction, B, S, Hq, Hkv, D, scale_bits, causal, Skv) <
           std::tie(o.direction, o.B, o.S, o.Hq, o.Hkv, o.D, o.scale_bits, o.causal, o.Skv);
  }
};

struct CachedGraph {
  std::shared_ptr<fe::graph::Graph> graph;  // null when cuDNN refused the configuration
  int64_t workspace_bytes = 0;
  std::string refusal;
};

// A device buffer that only grows (synchronizing the stream before it frees the old one).
class GrowingBuffer {
 public:
  ~GrowingBuffer() {
    if (p_) cudaFree(p_);
  }
  void* get(size_t bytes, cudaStream_t stream) {
    if (bytes > bytes_) {
      if (p_) {
        CUDA_CHECK(cudaStreamSynchronize(stream));
        CUDA_CHECK(cudaFree(p_));
        p_ = nullptr;
        bytes_ = 0;
      }
      const size_t n = bytes + bytes / 4;  // some headroom: packed batches vary a little in size
      CUDA_CHECK(cudaMalloc(&p_, n));
      bytes_ = n;
    }
    return p_;
  }

 private:
  void* p_ = nullptr;
  size_t bytes_ = 0;
};

struct AttentionState {
  std::map<GraphKey, CachedGraph> graphs;
  int64_t graphs_built = 0;
  GrowingBuffer workspace, index, stats, grads;
};

AttentionState& state_of(const GpuContext& ctx) {
  HONE_CHECK(ctx.impl, "attention needs a GpuContext from create_gpu_context");
  if (!ctx.impl->attention_state)
    ctx.impl->attention_state =
        std::shared_ptr<void>(new AttentionState(), [](void* p) { delete static_cast<AttentionState*>(p); });
  return *static_cast<AttentionState*>(ctx.impl->attention_state.get());
}

enum class Mode { automatic, cudnn, reference };

Mode mode_from_env() {
  const char* e = std::getenv("HONE_ATTENTION");
  if (!e || !*e || std::strcmp(e, "auto") == 0) return Mode::automatic;
  if (std::strcmp(e, "cudnn") == 0) return Mode::cudnn;
  if (std::strcmp(e, "reference") == 0) return Mode::reference;
  throw UserError(cat("HONE_ATTENTION must be auto, cudnn or reference, got '", e, "'"));
}

// [B, H, S, D] over packed rows [T, H, D], batch b starting at the ragged offset.
std::shared_ptr<fe::graph::Tensor_attributes> thd_tensor(fe::graph::Graph& g, const char* name, int64_t uid,
                                                         int B, int H, int S, int D,
                                                         std::shared_ptr<fe::graph::Tensor_attributes> offset) {
  return g.tensor(fe::graph::Tensor_attributes()
                      .set_name(name)
                      .set_uid(uid)
                      .set_dim({B, H, S, D})
                      .set_stride({int64_t(S) * H * D, D, int64_t(H) * D, 1})
                      .set_ragged_offset(offset));
}

std::shared_ptr<fe::graph::Tensor_attributes> index_tensor(fe::graph::Graph& g, const char* name, int64_t uid,
                                                           int n) {
  return g.tensor(fe::graph::Tensor_attributes()
                      .set_name(name)
                      .set_uid(uid)
                      .set_dim({n, 1, 1, 1})
                      .set_stride({1, 1, 1, 1})
                      .set_data_type(fe::DataType_t::INT32));
}

void set_thd_output(const std::shared_ptr<fe::graph::Tensor_attributes>& t, const char* name, int64_t uid, int B,
                    int H, int S, int D, std::shared_ptr<fe::graph::Tensor_attributes> offset) {
  t->set_output(true)
      .set_name(name)
      .set_uid(uid)
      .set_dim({B, H, S, D})
      .set_stride({int64_t(S) * H * D, D, int64_t(H) * D, 1})
      .set_ragged_offset(offset);
}

std::shared_ptr<fe::graph::Tensor_attributes> stats_tensor(fe::graph::Graph& g, int B, int H, int S) {
  return g.tensor(fe::graph::Tensor_attributes()
                      .set_name("Stats")
                      .set_uid(kStats)
                      .set_dim({B, H, S, 1})
                      .set_stride({int64_t(H) * S, S, 1, 1})
                      .set_data_type(fe::DataType_t::FLOAT));
}

std::shared_ptr<fe::graph::Graph> new_graph() {
  auto g = std::make_shared<fe::graph::Graph>();
  g->set_io_data_type(fe::DataType_t::BFLOAT16)
      .set_intermediate_data_type(fe::DataType_t::FLOAT)
      .set_compute_data_type(fe::DataType_t::FLOAT);
  return g;
}

void describe_forward(fe::graph::Graph& g, const GraphKey& k, float scale) {
  auto Q = thd_tensor(g, "Q", kQ, k.B, k.Hq, k.S, k.D, index_tensor(g, "off_q", kOffQ, k.B + 1));
  auto K = thd_tensor(g, "K", kK, k.B, k.Hkv, k.Skv, k.D, index_tensor(g, "off_k", kOffK, k.B + 1));
  auto V = thd_tensor(g, "V", kV, k.B, k.Hkv, k.Skv, k.D, index_tensor(g, "off_v", kOffV, k.B + 1));
  auto options = fe::graph::SDPA_attributes()
                     .set_name("attention_forward")
                     .set_generate_stats(true)
                     .set_attn_scale(scale)
                     .set_padding_mask(true)
                     .set_seq_len_q(index_tensor(g, "seq_len_q", kSeqQ, k.B))
                     .set_seq_len_kv(index_tensor(g, "seq_len_kv", kSeqKV, k.B));
  if (k.causal)
    options.set_diagonal_alignment(fe::DiagonalAlignment_t::TOP_LEFT).set_diagonal_band_right_bound(0);
  auto [O, Stats] = g.sdpa(Q, K, V, options);
  set_thd_output(O, "O", kO, k.B, k.Hq, k.S, k.D, index_tensor(g, "off_o", kOffO, k.B + 1));
  Stats->set_output(true)
      .set_name("Stats")
      .set_uid(kStats)
      .set_dim({k.B, k.Hq, k.S, 1})
      .set_stride({int64_t(k.Hq) * k.S, k.S, 1, 1})
      .set_data_type(fe::DataType_t::FLOAT);
}

void describe_backward(fe::graph::Graph& g, const GraphKey& k, float scale) {
  auto Q = thd_tensor(g, "Q", kQ, k.B, k.Hq, k.S, k.D, index_tensor(g, "off_q", kOffQ, k.B + 1));
  auto K = thd_tensor(g, "K", kK, k.B, k.Hkv, k.Skv, k.D, index_tensor(g, "off_k", kOffK, k.B + 1));
  auto V = thd_tensor(g, "V", kV, k.B, k.Hkv, k.Skv, k.D, index_tensor(g, "off_v", kOffV, k.B + 1));
  auto O = thd_tensor(g, "O", kO, k.B, k.Hq, k.S, k.D, index_tensor(g, "off_o", kOffO, k.B + 1));
  auto dO = thd_tensor(g, "dO", kDO, k.B, k.Hq, k.S, k.D, index_tensor(g, "off_do", kOffDO, k.B + 1));
  auto Stats = stats_tensor(g, k.B, k.Hq, k.S);
  auto options = fe::graph::SDPA_backward_attributes()
                     .set_name("attention_backward")
                     .set_attn_scale(scale)
                     .set_padding_mask(true)
                     .set_seq_len_q(index_tensor(g, "seq_len_q", kSeqQ, k.B))
                     .set_seq_len_kv(index_tensor(g, "seq_len_kv", kSeqKV, k.B));
  if (k.causal)
    options.set_diagonal_alignment(fe::DiagonalAlignment_t::TOP_LEFT).set_diagonal_band_right_bound(0);
  auto [dQ, dK, dV] = g.sdpa_backward(Q, K, V, O, dO, Stats, options);
  set_thd_output(dQ, "dQ", kDQ, k.B, k.Hq, k.S, k.D, index_tensor(g, "off_dq", kOffDQ, k.B + 1));
  set_thd_output(dK, "dK", kDK, k.B, k.Hkv, k.Skv, k.D, index_tensor(g, "off_dk", kOffDK, k.B + 1));
  set_thd_output(dV, "dV", kDV, k.B, k.Hkv, k.Skv, k.D, index_tensor(g, "off_dv", kOffDV, k.B + 1));
}

// Builds the graph for a key once; a refusal is remembered too (and costs one build attempt).
const CachedGraph& graph_for(AttentionState& st, const GraphKey& key, float scale, const GpuContext& ctx) {
  auto it = st.graphs.find(key);
  if (it != st.graphs.end()) return it->second;
  ++st.graphs_built;
  CachedGraph entry;
  auto g = new_graph();
  const char* step = "describe";
  fe::error_t status;
  try {
    if (key.direction == Direction::forward)
      describe_forward(*g, key, scale);
    else
      describe_backward(*g, key, scale);
    step = "validate";
    status = g->validate();
    if (status.is_good()) {
      step = "build_operation_graph";
      status = g->build_operation_graph(ctx.impl->cudnn);
    }
    if (status.is_good()) {
      step = "create_execution_plans";
      status = g->create_execution_plans({fe::HeurMode_t::A});
    }
    if (status.is_good()) {
      step = "check_support";
      status = g->check_support(ctx.impl->cudnn);
    }
    if (status.is_good()) {
      step = "build_plans";
      status = g->build_plans(ctx.impl->cudnn);
    }
    if (status.is_good()) {
      step = "get_workspace_size";
      status = g->get_workspace_size(entry.workspace_bytes);
    }
    if (status.is_good())
      entry.graph = g;
    else
      entry.refusal = cat(step, ": ", status.get_message());
  } catch (const std::exception& e) {
    entry.refusal = cat(step, " threw: ", e.what());
  }
  if (!entry.graph)  // once per configuration: the refusal is cached with the key
    std::fprintf(stderr, "hone: cuDNN refused the %sattention %s graph (B=%d S=%d Skv=%d Hq=%d Hkv=%d D=%d) at %s\n",
                 key.causal ? "" : "block ", key.direction == Direction::forward ? "forward" : "backward", key.B,
                 key.S, key.Skv, key.Hq, key.Hkv, key.D, entry.refusal.c_str());
  return st.graphs.emplace(key, std::move(entry)).first->second;
}

uint32_t bits_of(float x) {
  uint32_t b;
  std::memcpy(&b, &x, sizeof(b));
  return b;
}

// The int32 index arrays of one call: seq_len[B], q offsets[B+1], kv offsets[B+1], 16-byte aligned each.
struct IndexArrays {
  int32_t* seq_len;
  int32_t* q_offset;
  int32_t* kv_offset;
};

IndexArrays make_index_arrays(AttentionState& st, const int32_t* cu_seqlens, int num_seqs, const GraphKey& k,
                              const GpuContext& ctx) {
  const size_t slot = size_t((k.B + 1 + 3) / 4 * 4);
  auto* base = static_cast<int32_t*>(st.index.get(3 * slot * sizeof(int32_t), ctx.stream));
  IndexArrays a{base, base + slot, base + 2 * slot};
  attention_ragged_offsets(a.seq_len, a.q_offset, a.kv_offset, cu_seqlens, num_seqs, k.B, k.Hq, k.Hkv, k.D, ctx);
  return a;
}

// The int32 index arrays of a block call: seq_len_q[B], seq_len_kv[B], q offsets[B+1], kv offsets[B+1].
struct SegmentIndexArrays {
  int32_t* seq_len_q;
  int32_t* seq_len_kv;
  int32_t* q_offset;
  int32_t* kv_offset;
};

SegmentIndexArrays make_segment_index_arrays(AttentionState& st, const AttentionSegments& seg, const GraphKey& k,
                                             int Tq, int Tkv, const GpuContext& ctx) {
  const size_t slot = size_t((k.B + 1 + 3) / 4 * 4);
  auto* base = static_cast<int32_t*>(st.index.get(4 * slot * sizeof(int32_t), ctx.stream));
  SegmentIndexArrays a{base, base + slot, base + 2 * slot, base + 3 * slot};
  attention_segment_offsets(a.seq_len_q, a.seq_len_kv, a.q_offset, a.kv_offset, seg, k.B, Tq, Tkv, k.Hq, k.Hkv, k.D,
                            ctx);
  return a;
}

// cuDNN's offsets are int32 here: the packed tensors must stay below 2^31 elements.
bool fits_int32(int T, int Hq, int D) { return int64_t(T) * Hq * D < (int64_t(1) << 31); }

}  // namespace

// HONE_ATTENTION_BUCKETS=0 builds graphs for the exact batch (no zero-length padding sequences).
int attention_bucket_batch(int num_seqs) {
  static const bool bucket = [] {
    const char* e = std::getenv("HONE_ATTENTION_BUCKETS");
    return !(e && std::strcmp(e, "0") == 0);
  }();
  return bucket ? (num_seqs + 7) / 8 * 8 : num_seqs;
}
int attention_bucket_seqlen(int max_seqlen) { return (max_seqlen + 63) / 64 * 64; }

int64_t attention_cudnn_graphs_built(const GpuContext& ctx) { return state_of(ctx).graphs_built; }

bool attention_forward_cudnn(bf16* out, float* lse, const bf16* q, const bf16* k, const bf16* v,
                             const int32_t* cu_seqlens, int num_seqs, int max_seqlen, int T, int Hq, int Hkv, int D,
                             float scale, const GpuContext& ctx) {
  HONE_CHECK(num_seqs >= 1 && max_seqlen >= 1 && T >= 1, "bad attention shape: ", num_seqs, " sequences, max_seqlen ",
             max_seqlen, ", T=", T);
  if (!fits_int32(T, Hq, D)) return false;
  AttentionState& st = state_of(ctx);
  GraphKey key{Direction::forward, attention_bucket_batch(num_seqs), attention_bucket_seqlen(max_seqlen),
               Hq, Hkv, D, bits_of(scale)};
  key.Skv = key.S;
  const CachedGraph& g = graph_for(st, key, scale, ctx);
  if (!g.graph) return false;
  const IndexArrays idx = make_index_arrays(st, cu_seqlens, num_seqs, key, ctx);
  auto* stats = static_cast<float*>(st.stats.get(size_t(key.B) * Hq * key.S * sizeof(float), ctx.stream));
  void* workspace = g.workspace_bytes > 0 ? st.workspace.get(size_t(g.workspace_bytes), ctx.stream) : nullptr;
  std::unordered_map<int64_t, void*> pack = {
      {kQ, const_cast<bf16*>(q)}, {kK, const_cast<bf16*>(k)}, {kV, const_cast<bf16*>(v)}, {kO, out},
      {kStats, stats},           {kSeqQ, idx.seq_len},        {kSeqKV, idx.seq_len},      {kOffQ, idx.q_offset},
      {kOffO, idx.q_offset},     {kOffK, idx.kv_offset},      {kOffV, idx.kv_offset}};
  auto status = g.graph->execute(ctx.impl->cudnn, pack, workspace);
  HONE_CHECK(status.is_good(), "cuDNN attention forward failed: ", status.get_message());
  attention_stats_to_lse(lse, stats, cu_seqlens, num_seqs, T, Hq, key.S, ctx);
  return true;
}

bool attention_backward_cudnn(bf16* dq, bf16* dk, bf16* dv, const bf16* dout, const bf16* out, const float* lse,
                              const bf16* q, const bf16* k, const bf16* v, const int32_t* cu_seqlens, int num_seqs,
                              int max_seqlen, int T, int Hq, int Hkv, int D, float scale, const GpuContext& ctx) {
  HONE_CHECK(num_seqs >= 1 && max_seqlen >= 1 && T >= 1, "bad attention shape: ", num_seqs, " sequences, max_seqlen ",
             max_seqlen, ", T=", T);
  if (!fits_int32(T, Hq, D)) return false;
  AttentionState& st = state_of(ctx);
  GraphKey key{Direction::backward, attention_bucket_batch(num_seqs), attention_bucket_seqlen(max_seqlen),
               Hq, Hkv, D, bits_of(scale)};
  key.Skv = key.S;
  const CachedGraph& g = graph_for(st, key, scale, ctx);
  if (!g.graph) return false;
  const IndexArrays idx = make_index_arrays(st, cu_seqlens, num_seqs, key, ctx);
  auto* stats = static_cast<float*>(st.stats.get(size_t(key.B) * Hq * key.S * sizeof(float), ctx.stream));
  attention_lse_to_stats(stats, lse, cu_seqlens, num_seqs, T, key.B, Hq, key.S, ctx);
  // cuDNN writes the gradients straight into dq/dk/dv: every packed row belongs to a sequence (cu_seqlens covers
  // [0, T)), so every row is written, and the op's contract is to write them.
  void* workspace = g.workspace_bytes > 0 ? st.workspace.get(size_t(g.workspace_bytes), ctx.stream) : nullptr;
  std::unordered_map<int64_t, void*> pack = {
      {kQ, const_cast<bf16*>(q)},     {kK, const_cast<bf16*>(k)},   {kV, const_cast<bf16*>(v)},
      {kO, const_cast<bf16*>(out)},   {kDO, const_cast<bf16*>(dout)}, {kStats, stats},
      {kDQ, dq},                      {kDK, dk},                    {kDV, dv},
      {kSeqQ, idx.seq_len},           {kSeqKV, idx.seq_len},        {kOffQ, idx.q_offset},
      {kOffO, idx.q_offset},          {kOffDO, idx.q_offset},       {kOffDQ, idx.q_offset},
      {kOffK, idx.kv_offset},         {kOffV, idx.kv_offset},       {kOffDK, idx.kv_offset},
      {kOffDV, idx.kv_offset}};
  auto status = g.graph->execute(ctx.impl->cudnn, pack, workspace);
  HONE_CHECK(status.is_good(), "cuDNN attention backward failed: ", status.get_message());
  return true;
}

GraphKey block_key(Direction direction, const AttentionSegments& seg, int Hq, int Hkv, int D, float scale) {
  GraphKey key{direction, attention_bucket_batch(seg.count), attention_bucket_seqlen(seg.max_q), Hq, Hkv, D,
               bits_of(scale)};
  key.causal = false;
  key.Skv = attention_bucket_seqlen(seg.max_kv);
  return key;
}

bool attention_block_forward_cudnn(bf16* out, float* lse, const bf16* q, const bf16* k, const bf16* v,
                                   const AttentionSegments& seg, int Tq, int Tkv, int Hq, int Hkv, int D, float scale,
                                   const GpuContext& ctx) {
  HONE_CHECK(seg.count >= 1 && seg.max_q >= 1 && seg.max_kv >= 1, "bad attention block: ", seg.count,
             " segments, max_q ", seg.max_q, ", max_kv ", seg.max_kv);
  if (!fits_int32(Tq, Hq, D) || !fits_int32(Tkv, Hkv, D)) return false;
  AttentionState& st = state_of(ctx);
  const GraphKey key = block_key(Direction::forward, seg, Hq, Hkv, D, scale);
  const CachedGraph& g = graph_for(st, key, scale, ctx);
  if (!g.graph) return false;
  const SegmentIndexArrays idx = make_segment_index_arrays(st, seg, key, Tq, Tkv, ctx);
  auto* stats = static_cast<float*>(st.stats.get(size_t(key.B) * Hq * key.S * sizeof(float), ctx.stream));
  void* workspace = g.workspace_bytes > 0 ? st.workspace.get(size_t(g.workspace_bytes), ctx.stream) : nullptr;
  std::unordered_map<int64_t, void*> pack = {
      {kQ, const_cast<bf16*>(q)}, {kK, const_cast<bf16*>(k)}, {kV, const_cast<bf16*>(v)}, {kO, out},
      {kStats, stats},           {kSeqQ, idx.seq_len_q},      {kSeqKV, idx.seq_len_kv},   {kOffQ, idx.q_offset},
      {kOffO, idx.q_offset},     {kOffK, idx.kv_offset},      {kOffV, idx.kv_offset}};
  auto status = g.graph->execute(ctx.impl->cudnn, pack, workspace);
  HONE_CHECK(status.is_good(), "cuDNN attention block forward failed: ", status.get_message());
  attention_segment_stats_to_lse(lse, stats, seg, Tq, Hq, key.S, ctx);
  return true;
}

bool attention_block_backward_cudnn(bf16* dq, bf16* dk, bf16* dv, const bf16* dout, const bf16* out,
                                    const float* lse, const bf16* q, const bf16* k, const bf16* v,
                                    const AttentionSegments& seg, int Tq, int Tkv, int Hq, int Hkv, int D, float scale,
                                    const GpuContext& ctx) {
  HONE_CHECK(seg.count >= 1 && seg.max_q >= 1 && seg.max_kv >= 1, "bad attention block: ", seg.count,
             " segments, max_q ", seg.max_q, ", max_kv ", seg.max_kv);
  if (!fits_int32(Tq, Hq, D) || !fits_int32(Tkv, Hkv, D)) return false;
  AttentionState& st = state_of(ctx);
  const GraphKey key = block_key(Direction::backward, seg, Hq, Hkv, D, scale);
  const CachedGraph& g = graph_for(st, key, scale, ctx);
  if (!g.graph) return false;
  const SegmentIndexArrays idx = make_segment_index_arrays(st, seg, key, Tq, Tkv, ctx);
  auto* stats = static_cast<float*>(st.stats.get(size_t(key.B) * Hq * key.S * sizeof(float), ctx.stream));
  attention_segment_lse_to_stats(stats, lse, seg, Tq, key.B, Hq, key.S, ctx);
  // cuDNN writes the gradients of the segments' rows only: the scratch starts at zero, then all of it is added.
  const size_t nq = size_t(Tq) * Hq * D, nkv = size_t(Tkv) * Hkv * D;
  const size_t q_bytes = (nq * sizeof(bf16) + 255) / 256 * 256, kv_bytes = (nkv * sizeof(bf16) + 255) / 256 * 256;
  auto* base = static_cast<char*>(st.grads.get(q_bytes + 2 * kv_bytes, ctx.stream));
  CUDA_CHECK(cudaMemsetAsync(base, 0, q_bytes + 2 * kv_bytes, ctx.stream));
  auto* gq = reinterpret_cast<bf16*>(base);
  auto* gk = reinterpret_cast<bf16*>(base + q_bytes);
  auto* gv = reinterpret_cast<bf16*>(base + q_bytes + kv_bytes);
  void* workspace = g.workspace_bytes > 0 ? st.workspace.get(size_t(g.workspace_bytes), ctx.stream) : nullptr;
  std::unordered_map<int64_t, void*> pack = {
      {kQ, const_cast<bf16*>(q)},     {kK, const_cast<bf16*>(k)},    {kV, const_cast<bf16*>(v)},
      {kO, const_cast<bf16*>(out)},   {kDO, const_cast<bf16*>(dout)}, {kStats, stats},
      {kDQ, gq},                      {kDK, gk},                     {kDV, gv},
      {kSeqQ, idx.seq_len_q},         {kSeqKV, idx.seq_len_kv},      {kOffQ, idx.q_offset},
      {kOffO, idx.q_offset},          {kOffDO, idx.q_offset},        {kOffDQ, idx.q_offset},
      {kOffK, idx.kv_offset},         {kOffV, idx.kv_offset},        {kOffDK, idx.kv_offset},
      {kOffDV, idx.kv_offset}};
  auto status = g.graph->execute(ctx.impl->cudnn, pack, workspace);
  HONE_CHECK(status.is_good(), "cuDNN attention block backward failed: ", status.get_message());
  attention_accumulate_bf16(dq, gq, int64_t(nq), ctx);
  attention_accumulate_bf16(dk, gk, int64_t(nkv), ctx);
  attention_accumulate_bf16(dv, gv, int64_t(nkv), ctx);
  return true;
}

// ---- the ops of cuda/ops_cuda.h ------------------------------------------------------------------------------------

void attention_forward(bf16* out, float* lse, const bf16* q, const bf16* k, const bf16* v, const int32_t* cu_seqlens,
                       int num_seqs, int max_seqlen, int T, int Hq, int Hkv, int D, float scale,
                       const GpuContext& ctx) {
  HONE_CHECK(Hkv > 0 && Hq % Hkv == 0, "query heads ", Hq, " must be a multiple of kv heads ", Hkv);
  if (T == 0 || num_seqs == 0) return;
  const Mode mode = mode_from_env();
  if (mode != Mode::reference &&
      attention_forward_cudnn(out, lse, q, k, v, cu_seqlens, num_seqs, max_seqlen, T, Hq, Hkv, D, scale, ctx))
    return;
  HONE_CHECK(mode != Mode::cudnn, "HONE_ATTENTION=cudnn but cuDNN cannot run this attention forward (T=", T,
             " Hq=", Hq, " D=", D, ")");
  attention_forward_reference(out, lse, q, k, v, cu_seqlens, num_seqs, T, Hq, Hkv, D, scale, ctx);
}

void attention_backward(bf16* dq, bf16* dk, bf16* dv, const bf16* dout, const bf16* out, const float* lse,
                        const bf16* q, const bf16* k, const bf16* v, const int32_t* cu_seqlens, int num_seqs,
                        int max_seqlen, int T, int Hq, int Hkv, int D, float scale, const GpuContext& ctx) {
  HONE_CHECK(Hkv > 0 && Hq % Hkv == 0, "query heads ", Hq, " must be a multiple of kv heads ", Hkv);
  if (T == 0 || num_seqs == 0) return;
  const Mode mode = mode_from_env();
  if (mode != Mode::reference && attention_backward_cudnn(dq, dk, dv, dout, out, lse, q, k, v, cu_seqlens, num_seqs,
                                                          max_seqlen, T, Hq, Hkv, D, scale, ctx))
    return;
  HONE_CHECK(mode != Mode::cudnn, "HONE_ATTENTION=cudnn but cuDNN cannot run this attention backward (T=", T,
             " Hq=", Hq, " D=", D, ")");
  AttentionState& st = state_of(ctx);
  auto* delta = static_cast<float*>(st.stats.get(size_t(Hq) * T * sizeof(float), ctx.stream));
  attention_backward_reference(dq, dk, dv, dout, out, lse, q, k, v, cu_seqlens, num_seqs, T, Hq, Hkv, D, scale, delta,
                               ctx);
}

void attention_block_forward(bf16* out, float* lse, const bf16* q, const bf16* k, const bf16* v,
                             const AttentionSegments& seg, int Tq, int Tkv, int Hq, int Hkv, int D, float scale,
                             const GpuContext& ctx) {
  HONE_CHECK(Hkv > 0 && Hq % Hkv == 0, "query heads ", Hq, " must be a multiple of kv heads ", Hkv);
  if (seg.count == 0 || seg.max_q == 0) return;
  const Mode mode = mode_from_env();
  if (mode != Mode::reference &&
      attention_block_forward_cudnn(out, lse, q, k, v, seg, Tq, Tkv, Hq, Hkv, D, scale, ctx))
    return;
  HONE_CHECK(mode != Mode::cudnn, "HONE_ATTENTION=cudnn but cuDNN cannot run this attention block forward (Tq=", Tq,
             " Hq=", Hq, " D=", D, ")");
  attention_block_forward_reference(out, lse, q, k, v, seg, Tq, Tkv, Hq, Hkv, D, scale, ctx);
}

void attention_block_backward(bf16* dq, bf16* dk, bf16* dv, const bf16* dout, const bf16* out, const float* lse,
                              const bf16* q, const bf16* k, const bf16* v, const AttentionSegments& seg, int Tq,
                              int Tkv, int Hq, int Hkv, int D, float scale, const GpuContext& ctx) {
  HONE_CHECK(Hkv > 0 && Hq % Hkv == 0, "query heads ", Hq, " must be a multiple of kv heads ", Hkv);
  if (seg.count == 0 || seg.max_q == 0) return;
  const Mode mode = mode_from_env();
  if (mode != Mode::reference && attention_block_backward_cudnn(dq, dk, dv, dout, out, lse, q, k, v, seg, Tq, Tkv, Hq,
                                                                Hkv, D, scale, ctx))
    return;
  HONE_CHECK(mode != Mode::cudnn, "HONE_ATTENTION=cudnn but cuDNN cannot run this attention block backward (Tq=",
             Tq, " Hq=", Hq, " D=", D, ")");
  AttentionState& st = state_of(ctx);
  auto* delta = static_cast<float*>(st.stats.get(size_t(Hq) * Tq * sizeof(float), ctx.stream));
  attention_block_backward_reference(dq, dk, dv, dout, out, lse, q, k, v, seg, Tq, Tkv, Hq, Hkv, D, scale, delta,
                                     ctx);
}

}  // namespace hone::cuda
