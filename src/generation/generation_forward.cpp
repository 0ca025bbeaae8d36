// Prefill, decode (eager or replayed from a graph) and sampling passes of generation over B (see
// generation_forward.h); the memory they use is generation_memory.cpp's.
#include "generation/generation_forward.h"

#include <algorithm>
#include <cmath>
#include <cstring>

#include "model/moe_feed_forward.h"
#include "parallel/expert_lockstep.h"
#include "parallel/expert_parallel.h"
#include "parallel/tensor_parallel.h"
#include "runtime/error.h"

namespace hone {

template <typename B>
class GenerationForward<B>::PrefillAttention final : public LayerAttention<B> {
 public:
  PrefillAttention(const GenerationForward& g, const int32_t* slots) : g_(g), slots_(slots) {}
  void forward(int l, const LayerShape& s, const LayerBatch& b, const LayerActivations<B>& a,
               const Exec& x) override {
    packed_.forward(l, s, b, a, x);
    B::kv_append(x, g_.k_pool(l), g_.v_pool(l), a.k_r, a.v, slots_, b.T, s.kv_heads, s.head_dim, g_.block_size_,
                 a.qkv_ld);
  }

 private:
  const GenerationForward& g_;
  const int32_t* slots_;  // [T] the cache slot of each token (block * block_size + offset)
  PackedAttention<B> packed_;
};

template <typename B>
class GenerationForward<B>::PagedAttention final : public LayerAttention<B> {
 public:
  PagedAttention(const GenerationForward& g, const PagedDecodeArgs& args, const int32_t* slots)
      : g_(g), args_(args), slots_(slots) {}
  void forward(int l, const LayerShape& s, const LayerBatch& b, const LayerActivations<B>& a,
               const Exec& x) override {
    B::kv_append(x, g_.k_pool(l), g_.v_pool(l), a.k_r, a.v, slots_, b.T, s.kv_heads, s.head_dim, g_.block_size_,
                 a.qkv_ld);
    B::paged_attention_decode_forward(x, a.attn, a.q_r, g_.k_pool(l), g_.v_pool(l), args_, s.heads, s.kv_heads,
                                      s.head_dim, s.attention_scale());
  }

 private:
  const GenerationForward& g_;
  const PagedDecodeArgs& args_;
  const int32_t* slots_;  // [B] the cache slot of each row's new token (-1 for padding rows: nothing written)
};

int decode_bucket(int B, int max_rows) {
  int b = 1;
  while (b < B) b *= 2;
  return std::min(b, max_rows);
}

template <typename B>
int64_t GenerationForward<B>::block_bytes(const ModelConfig& c, int block_size, int kv_heads) {
  return 2 * int64_t(c.num_hidden_layers) * kv_heads * block_size * c.head_dim * int64_t(sizeof(A));
}

template <typename B>
GenerationForward<B>::GenerationForward(const ModelConfig& config, const ParamLayout& layout, const A* weights,
                                        const Exec& x, TensorParallelGroup<B>* tp, bool keep_graphs,
                                        ExpertParallelGroup<B>* ep, ExpertLockstep* lockstep)
    : c_(config),
      tp_(tp),
      lockstep_(lockstep),
      shape_(tp ? tp->shape() : ep ? ep->shape() : layer_shape(config)),
      layout_(layout),
      w_(weights),
      x_(x),
      feed_forward_(make_layer_feed_forward<B>(config, ep)),
      inv_freq_(config.head_dim / 2, "RoPE frequencies"),
      keep_(keep_graphs && B::generation_keeps_addresses(tp != nullptr)) {
  HONE_CHECK(w_ != nullptr, "generation needs the weights");
  HONE_CHECK(!ep == !lockstep, "split experts in generation need their lockstep");
  HONE_CHECK(!ep || shape_.experts == ep->shape().experts, "the tensor-parallel shape holds every expert under ep");
  HONE_CHECK(c_.vocab_size > 0 && c_.hidden_size > 0 && c_.num_attention_heads > 0 && c_.num_key_value_heads > 0 &&
                 c_.head_dim > 0 && c_.intermediate_size > 0,
             "generation needs a complete model shape");
  HONE_CHECK(c_.num_attention_heads % c_.num_key_value_heads == 0, "attention heads ", c_.num_attention_heads,
             " not a multiple of kv heads ", c_.num_key_value_heads);
  HONE_CHECK(int(layout_.layers.size()) == c_.num_hidden_layers, "layout has ", layout_.layers.size(),
             " layers, config ", c_.num_hidden_layers);
  RopeParams rope = c_.rope;
  if (rope.head_dim == 0) rope.head_dim = c_.head_dim;
  HONE_CHECK(rope.head_dim == c_.head_dim, "rope.head_dim ", rope.head_dim, " != head_dim ", c_.head_dim);
  std::vector<float> inv(size_t(c_.head_dim / 2));
  cpu::rope_inv_freq(inv.data(), rope);
  B::upload(x_, inv_freq_.get(), inv.data(), inv.size() * sizeof(float));
  B::sync(x_);
}

template <typename B>
GenerationForward<B>::~GenerationForward() {
  try {
    release_all();
  } catch (...) {
  }
}

template <typename B>
typename B::Act* GenerationForward<B>::k_pool(int l) const {
  const int64_t per_pool = int64_t(num_blocks_ + 1) * shape_.kv_heads * block_size_ * c_.head_dim;
  return reinterpret_cast<A*>(kv_mem_.data()) + (2 * int64_t(l)) * per_pool;
}
template <typename B>
typename B::Act* GenerationForward<B>::v_pool(int l) const {
  const int64_t per_pool = int64_t(num_blocks_ + 1) * shape_.kv_heads * block_size_ * c_.head_dim;
  return reinterpret_cast<A*>(kv_mem_.data()) + (2 * int64_t(l) + 1) * per_pool;
}

template <typename B>
void GenerationForward<B>::download_routing(int rows) {
  if (!h_routing_.get() || rows == 0) return;
  B::download(x_, h_routing_.get(), routing_d_, size_t(rows) * size_t(routing_width_) * sizeof(int32_t));
}

template <typename B>
void GenerationForward<B>::prefill(const std::vector<int32_t>& tokens, const std::vector<int32_t>& positions,
                                   const std::vector<int32_t>& slots, const std::vector<int32_t>& cu_seqlens,
                                   int max_seqlen, const std::vector<int32_t>& gather) {
  const int T = int(tokens.size()), S = int(cu_seqlens.size()) - 1, R = int(gather.size());
  const int C = c_.hidden_size, L = c_.num_hidden_layers;
  HONE_CHECK(T > 0 && T <= max_prefill_ && S > 0 && S <= max_rows_ && R > 0 && R <= max_rows_,
             "prefill of ", T, " tokens, ", S, " sequences, ", R, " rows exceeds the buffers (", max_prefill_, ", ",
             max_rows_, ")");
  HONE_CHECK(int(positions.size()) == T && int(slots.size()) == T && cu_seqlens.back() == T, "malformed prefill");
  if (lockstep_) lockstep_->vote(true);
  const int64_t Tp = align_ints(max_prefill_);
  int32_t* h = h_in_.get() + off_prefill_;
  std::copy(tokens.begin(), tokens.end(), h);
  std::copy(positions.begin(), positions.end(), h + Tp);
  std::copy(slots.begin(), slots.end(), h + 2 * Tp);
  std::copy(cu_seqlens.begin(), cu_seqlens.end(), h + 3 * Tp);
  std::copy(gather.begin(), gather.end(), h + 3 * Tp + align_ints(max_rows_ + 1));
  B::upload(x_, d_in_ + off_prefill_, h, size_t(off_stop_ - off_prefill_) * sizeof(int32_t));
  const int32_t* d = d_in_ + off_prefill_;
  const int32_t* d_tok = d, *d_pos = d + Tp, *d_slot = d + 2 * Tp, *d_cu = d + 3 * Tp;
  const int32_t* d_gather = d + 3 * Tp + align_ints(max_rows_ + 1);

  embed(pre_x_[0], d_tok, T);
  LayerBatch lb;
  lb.positions = d_pos, lb.cu_seqlens = d_cu, lb.T = T, lb.S = S, lb.max_seqlen = max_seqlen;
  lb.inv_freq = inv_freq_.get();
  lb.routing.record = routing_d_;  // a mixture of experts' (null for a dense model)
  PrefillAttention attention(*this, d_slot);
  LayerCollectives<A>* whole_rows = tp_ ? tp_->layers_whole_rows() : nullptr;  // generation: whole rows
  for (int l = 0; l < L; ++l) {
    LayerActivations<B> a = pre_act_;
    a.x_in = pre_x_[l % 2];
    layer_forward<B>(l, shape_, layer_pointers<const A>(layout_.layers[size_t(l)], w_), lb, a, pre_scratch_,
                     attention, *feed_forward_, whole_rows, pre_x_[(l + 1) % 2], x_);
  }
  download_routing(T);
  // Logits only for the gathered rows (embedding_forward is a row gather: out[r] = table[gather[r]]).
  B::embedding_forward(x_, pre_g_, d_gather, pre_x_[L % 2], R, C);
  B::rmsnorm_forward(x_, pre_h_, pre_rstd_, pre_g_, w_ + layout_.norm, R, C, c_.rms_norm_eps);
  lm_head_logits(pre_h_, R);
}

// The embedding rows of tokens (vocabulary-parallel under tp: each rank's slice, summed over the group).
template <typename B>
void GenerationForward<B>::embed(A* out, const int32_t* tokens, int T) {
  if (tp_) tp_->embedding_forward(out, tokens, w_ + layout_.embed_tokens, T);
  else B::embedding_forward(x_, out, tokens, w_ + layout_.embed_tokens, T, c_.hidden_size);
}

// logits_ rows 0..R-1 over the whole vocabulary from the final normed rows h [R, C].
template <typename B>
void GenerationForward<B>::lm_head_logits(const A* h, int R) {
  if (tp_) tp_->lm_head_logits(logits_, h, w_ + layout_.lm_head, R);
  else B::lm_head_logits(x_, logits_, h, w_ + layout_.lm_head, R, c_.hidden_size, c_.vocab_size);
}

template <typename B>
void GenerationForward<B>::copy_blocks(const std::vector<std::pair<int32_t, int32_t>>& copies) {
  const int n = int(copies.size());
  if (n == 0) return;
  const int64_t cap = align_ints(int64_t(num_blocks_) + 1);
  HONE_CHECK(n <= num_blocks_, "more block copies (", n, ") than blocks");
  int32_t* h = h_in_.get() + off_copy_;
  for (int i = 0; i < n; ++i) {
    HONE_CHECK(copies[size_t(i)].first >= 0 && copies[size_t(i)].first < num_blocks_ &&
                   copies[size_t(i)].second >= 0 && copies[size_t(i)].second < num_blocks_,
               "block copy outside the pool");
    h[i] = copies[size_t(i)].first;
    h[cap + i] = copies[size_t(i)].second;
  }
  B::upload(x_, d_in_ + off_copy_, h, size_t(2 * cap) * sizeof(int32_t));
  const int32_t* d = d_in_ + off_copy_;
  for (int l = 0; l < c_.num_hidden_layers; ++l)
    B::kv_copy_blocks(x_, k_pool(l), v_pool(l), d, d + cap, n, shape_.kv_heads, c_.head_dim, block_size_);
}

template <typename B>
size_t GenerationForward<B>::workspace_bytes() const {
  PagedDecodeArgs a;
  a.B = max_rows_;
  a.max_blocks = max_blocks_;
  a.max_seq_len = max_blocks_ * block_size_;
  a.block_size = block_size_;
  a.num_groups = std::max(1, max_rows_ / 2);
  a.max_prefix_len = max_blocks_ * block_size_;
  return B::paged_attention_decode_workspace(x_, a, shape_.heads, c_.head_dim);
}

template <typename B>
void GenerationForward<B>::decode_layers(int rows, const PagedDecodeArgs& args) {
  const int C = c_.hidden_size, L = c_.num_hidden_layers;
  PagedAttention attention(*this, args, din_.slots);
  LayerBatch lb;
  lb.positions = din_.positions, lb.T = rows, lb.S = rows, lb.max_seqlen = 1, lb.inv_freq = inv_freq_.get();
  lb.routing.record = routing_d_;  // graphs captured with it write there
  embed(dec_x_[0], din_.tokens, rows);
  LayerCollectives<A>* whole_rows = tp_ ? tp_->layers_whole_rows() : nullptr;
  for (int l = 0; l < L; ++l) {
    LayerActivations<B> a = dec_act_;
    a.x_in = dec_x_[l % 2];
    a.fuse_qkv = true;  // no backward follows: one QKV GEMM where the weights allow
    layer_forward<B>(l, shape_, layer_pointers<const A>(layout_.layers[size_t(l)], w_), lb, a, dec_scratch_,
                     attention, *feed_forward_, whole_rows, dec_x_[(l + 1) % 2], x_);
  }
  B::rmsnorm_forward(x_, dec_h_, dec_rstd_, dec_x_[L % 2], w_ + layout_.norm, rows, C, c_.rms_norm_eps);
  lm_head_logits(dec_h_, rows);
}

template <typename B>
void GenerationForward<B>::decode(const DecodeBatch& batch, bool use_graph) {
  const int rows = batch.B, MB = max_blocks_;
  HONE_CHECK(rows > 0 && rows <= max_rows_, "decode of ", rows, " rows, buffers for ", max_rows_);
  HONE_CHECK(int(batch.tokens.size()) == rows && int(batch.positions.size()) == rows &&
                 int(batch.slots.size()) == rows && int(batch.seq_lens.size()) == rows &&
                 int64_t(batch.block_tables.size()) == int64_t(rows) * MB,
             "malformed decode batch");
  const int real_groups = batch.group_offsets.empty() ? 0 : int(batch.group_offsets.size()) - 1;
  HONE_CHECK(int(batch.prefix_lens.size()) == real_groups, "malformed decode groups");
  use_graph = use_graph && B::DecodeSteps::kGraphs;
  if (lockstep_) {
    lockstep_->vote(true);
    use_graph = false;  // the sparse layers wait for the host (the exchange's counts)
  }
  const int Bg = use_graph ? decode_bucket(rows, max_rows_) : rows;
  // A graph has a fixed group count: the real groups, then empty ones (offsets at the end of the grouped rows). A
  // batch without groups runs the plain path alone; a graph captured so stays right for batches with groups (every
  // row then reads its whole context).
  const int G = use_graph && real_groups > 0 ? std::max(1, Bg / 2) : real_groups;
  HONE_CHECK(real_groups <= G, "more decode groups (", real_groups, ") than a graph of ", Bg, " rows holds");
  const int max_prefix = upload_decode_inputs(batch, Bg, G);

  PagedDecodeArgs args;
  args.block_tables = din_.block_tables;
  args.seq_lens = din_.seq_lens;
  args.B = Bg;
  args.max_blocks = MB;
  args.max_seq_len = use_graph ? MB * block_size_ : batch.max_seq_len;
  args.block_size = block_size_;
  args.num_groups = G;
  args.group_offsets = G > 0 ? din_.group_offsets : nullptr;
  args.prefix_lens = G > 0 ? din_.prefix_lens : nullptr;
  args.max_prefix_len = use_graph ? MB * block_size_ : max_prefix;
  // The prefix plan by the largest group: a graph's padding groups would make the average group look small (the
  // plan of a captured graph stays; later batches of larger groups are still right, only slower).
  for (int g = 0; g < real_groups; ++g)
    args.max_group_rows =
        std::max(args.max_group_rows, int(batch.group_offsets[size_t(g) + 1] - batch.group_offsets[size_t(g)]));
  if (use_graph) steps_.run(Bg, x_, workspace_bytes(), [&] { decode_layers(Bg, args); });
  else decode_layers(rows, args);
  download_routing(rows);
}

template <typename B>
int64_t GenerationForward<B>::finish() {
  if (!lockstep_) return -1;
  int64_t idle = 0;
  for (; lockstep_->vote(false); ++idle) idle_pass();
  // The sparse layers' expert-side rows of the last pass go back before training needs the memory.
  if (auto* moe = dynamic_cast<MoeFeedForward<B>*>(feed_forward_.get())) moe->release(x_);
  return idle;
}

// Only the sparse layers cross ranks: each runs over none of this rank's rows (nothing routed or sent; its experts
// compute what the others send, and the combine returns it).
template <typename B>
void GenerationForward<B>::idle_pass() {
  HONE_CHECK(max_rows_ > 0, "an idle generation pass before the buffers are reserved");
  auto* moe = dynamic_cast<MoeFeedForward<B>*>(feed_forward_.get());
  HONE_CHECK(moe, "an idle pass of a model without experts");
  LayerBatch lb;  // no rows
  lb.positions = din_.positions, lb.max_seqlen = 1, lb.inv_freq = inv_freq_.get();
  LayerCollectives<A>* whole_rows = tp_ ? tp_->layers_whole_rows() : nullptr;
  LayerActivations<B> a = dec_act_;
  a.x_in = dec_x_[0];
  for (int l = 0; l < c_.num_hidden_layers; ++l)
    if (moe->is_sparse(l))
      moe->forward(l, shape_, layer_pointers<const A>(layout_.layers[size_t(l)], w_), lb, a, dec_scratch_,
                   whole_rows, dec_h_, dec_x_[1], x_);
}

// Rows B..Bg-1 are padding (a graph's bucket): token 0, no cache write, the zeroed dummy block; groups past the
// real ones are empty. Returns the longest shared prefix.
template <typename B>
int GenerationForward<B>::upload_decode_inputs(const DecodeBatch& batch, int Bg, int G) {
  const int rows = batch.B, MB = max_blocks_;
  const int real_groups = batch.group_offsets.empty() ? 0 : int(batch.group_offsets.size()) - 1;
  int32_t* h = h_in_.get();
  const int64_t R = align_ints(max_rows_);
  int32_t* h_bt = h + 4 * R;
  int32_t* h_go = h_bt + align_ints(int64_t(max_rows_) * MB);
  int32_t* h_pl = h_go + align_ints(max_rows_ + 1);
  for (int b = 0; b < Bg; ++b) {
    const bool real = b < rows;
    h[b] = real ? batch.tokens[size_t(b)] : 0;
    h[R + b] = real ? batch.positions[size_t(b)] : 0;
    h[2 * R + b] = real ? batch.slots[size_t(b)] : -1;  // padding rows write nothing
    h[3 * R + b] = real ? batch.seq_lens[size_t(b)] : 1;
    int32_t* row = h_bt + int64_t(b) * MB;
    if (real)
      std::copy(batch.block_tables.begin() + int64_t(b) * MB, batch.block_tables.begin() + int64_t(b + 1) * MB, row);
    else
      std::fill(row, row + MB, dummy_block());
  }
  int max_prefix = 0;
  const int32_t grouped_end = real_groups > 0 ? batch.group_offsets.back() : 0;
  for (int g = 0; g <= G; ++g)
    h_go[g] = g <= real_groups && real_groups > 0 ? batch.group_offsets[size_t(g)] : grouped_end;
  for (int g = 0; g < G; ++g) {
    h_pl[g] = g < real_groups ? batch.prefix_lens[size_t(g)] : 0;
    max_prefix = std::max(max_prefix, int(h_pl[g]));
  }
  B::upload(x_, d_in_, h, size_t(off_sample_) * sizeof(int32_t));
  return max_prefix;
}

template <typename B>
void GenerationForward<B>::sample(const SampleRows& rows, const SamplingParams& p, uint64_t seed, uint32_t step,
                                  int max_total, const std::vector<int32_t>& stop_ids) {
  const int R = rows.R, V = c_.vocab_size;
  HONE_CHECK(R > 0 && R <= max_rows_, "sampling ", R, " rows, buffers for ", max_rows_);
  HONE_CHECK(int(stop_ids.size()) <= max_stop_, "more stop ids than reserved");
  const int64_t col = align_ints(max_rows_);
  int32_t* h = h_in_.get() + off_sample_;
  const std::vector<int32_t>* cols[5] = {&rows.sample_index, &rows.position, &rows.gen_len, &rows.seq_len,
                                         &rows.max_new};
  for (int k = 0; k < 5; ++k) {
    HONE_CHECK(int(cols[k]->size()) == R, "malformed sampler rows");
    std::copy(cols[k]->begin(), cols[k]->end(), h + k * col);
  }
  B::upload(x_, d_in_ + off_sample_, h, size_t(5 * col) * sizeof(int32_t));
  std::copy(stop_ids.begin(), stop_ids.end(), h_in_.get() + off_stop_);
  if (!stop_ids.empty())
    B::upload(x_, d_in_ + off_stop_, h_in_.get() + off_stop_, stop_ids.size() * sizeof(int32_t));
  const int32_t* d = d_in_ + off_sample_;
  auto* d_tokens = reinterpret_cast<int32_t*>(d_out_);
  auto* d_logprobs = reinterpret_cast<float*>(d_out_ + col * 4);
  auto* d_done = reinterpret_cast<int32_t*>(d_out_ + 2 * col * 4);
  B::sample_tokens(x_, d_tokens, d_logprobs, logits_, V, R, V, p, seed, step, d, d + col);
  B::check_stops(x_, d_done, d_tokens, d + 2 * col, d + 3 * col, d + 4 * col, max_total, d_in_ + off_stop_,
                 int(stop_ids.size()), R);
  B::download(x_, h_out_.get(), d_out_, size_t(3 * col * 4));
  // Under tp the pass's collectives (a graph's among them) finish here: NCCL's watchdog watches the wait.
  if (tp_) tp_->synchronize("a generation pass (prefill or decode, and sampling)");
  else B::sync(x_);
}

#define INSTANTIATE(B) template class GenerationForward<B>;
HONE_FOR_EACH_BACKEND(INSTANTIATE)
#undef INSTANTIATE

}  // namespace hone
