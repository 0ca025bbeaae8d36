// The cached transformer forward of generation (what it computes: cached_forward.h).
#include "generation/cached_forward.h"

#include <algorithm>
#include <cmath>

#include "model/moe_feed_forward.h"
#include "ops/ops.h"
#include "parallel/expert_lockstep.h"
#include "parallel/expert_parallel.h"
#include "parallel/tensor_parallel.h"
#include "runtime/error.h"

namespace hone {

namespace {

template <typename T>
void grow(std::vector<T>& v, int64_t n) {
  if (v.size() < size_t(n)) v.resize(size_t(n));
}

// The generation attention seam: K (after q/k norm and RoPE) and V of every row go to the row's cache slot at its
// position; then a prefill attends causally within each prompt, a decode row to its slot's cached tokens.
class CacheAttention final : public LayerAttention<CpuBackend> {
 public:
  CacheAttention(KvCache& cache, bool decode, const int32_t* row_slot, const int32_t* pos, const int32_t* lens,
                 const int32_t* decode_slots)
      : cache_(cache), decode_(decode), row_slot_(row_slot), pos_(pos), lens_(lens), decode_slots_(decode_slots) {}

  void forward(int l, const LayerShape& s, const LayerBatch& b, const LayerActivations<CpuBackend>& a,
               const CpuBackend::Exec&) override {
    const int KV = s.kv_dim();
    for (int r = 0; r < b.T; ++r) {
      std::copy_n(a.k_r + int64_t(r) * KV, KV, cache_.k_row(l, row_slot_[r], pos_[r]));
      std::copy_n(a.v + int64_t(r) * KV, KV, cache_.v_row(l, row_slot_[r], pos_[r]));
    }
    if (decode_)
      cpu::attention_decode_forward(a.attn, a.q_r, cache_.k(l), cache_.v(l), decode_slots_, lens_, b.T,
                                    cache_.max_len(), s.heads, s.kv_heads, s.head_dim, s.attention_scale());
    else
      cpu::attention_forward(a.attn, a.lse, a.q_r, a.k_r, a.v, b.cu_seqlens, b.S, b.T, s.heads, s.kv_heads,
                             s.head_dim, s.attention_scale());
  }

 private:
  KvCache& cache_;
  bool decode_;
  const int32_t* row_slot_, *pos_, *lens_, *decode_slots_;
};

}  // namespace

CachedForward::CachedForward(const ModelConfig& config, TensorParallel* tp, ExpertParallel* ep,
                             ExpertLockstep* lockstep)
    : c_(config), tp_(tp), lockstep_(lockstep) {
  HONE_CHECK(!ep == !lockstep, "split experts in generation need their lockstep");
  HONE_CHECK(c_.vocab_size > 0 && c_.hidden_size > 0 && c_.num_hidden_layers >= 0 && c_.num_attention_heads > 0 &&
                 c_.num_key_value_heads > 0 && c_.head_dim > 0 && c_.intermediate_size > 0,
             "generation needs a complete model shape");
  HONE_CHECK(c_.num_attention_heads % c_.num_key_value_heads == 0, "attention heads ", c_.num_attention_heads,
             " not a multiple of kv heads ", c_.num_key_value_heads);
  RopeParams rope = c_.rope;
  if (rope.head_dim == 0) rope.head_dim = c_.head_dim;
  HONE_CHECK(rope.head_dim == c_.head_dim, "rope.head_dim ", rope.head_dim, " != head_dim ", c_.head_dim);
  shape_ = tp_ ? tp_->shape() : ep ? ep->shape() : layer_shape(c_);
  HONE_CHECK(!ep || shape_.experts == ep->shape().experts, "the tensor-parallel shape holds every expert under ep");
  feed_forward_ = make_layer_feed_forward<CpuBackend>(c_, ep);
  inv_freq_.resize(size_t(c_.head_dim / 2));
  cpu::rope_inv_freq(inv_freq_.data(), rope);
}

void CachedForward::reserve(int R) {
  if (R <= capacity_) return;
  const int64_t C = c_.hidden_size;
  grow(pos_, R);
  grow(row_slot_, R);
  grow(lens_, R);
  grow(rows_, R);
  // The layer's activations, then its forward scratch, in one buffer (the carved sizes are whole floats).
  const size_t act = carve_layer_activations(act_, nullptr, shape_, R);
  const size_t scratch = carve_layer_forward_scratch(scratch_, nullptr, shape_, R);
  grow(act_buf_, int64_t((act + scratch) / sizeof(float)));
  char* base = reinterpret_cast<char*>(act_buf_.data());
  carve_layer_activations(act_, base, shape_, R);
  carve_layer_forward_scratch(scratch_, base + act, shape_, R);
  grow(x_[0], R * C);
  grow(x_[1], R * C);
  grow(head_x_, R * C);
  grow(head_h_, R * C);
  grow(head_rstd_, R);
  capacity_ = R;
}

void CachedForward::layers(const ModelWeights& w, KvCache& cache, Mode mode, const int32_t* tokens, int R,
                           const int32_t* cu_seqlens, int num_seqs, const int32_t* decode_slots) {
  HONE_CHECK(int(w.layers.size()) == c_.num_hidden_layers, "weights have ", w.layers.size(), " layers, config ",
             c_.num_hidden_layers);
  HONE_CHECK(cache.num_layers() == c_.num_hidden_layers && cache.row_size() == shape_.kv_dim(),
             "KV cache shaped for another model");
  CacheAttention attention(cache, mode == Mode::decode, row_slot_.data(), pos_.data(), lens_.data(), decode_slots);
  LayerBatch lb;
  lb.positions = pos_.data(), lb.cu_seqlens = cu_seqlens, lb.T = R, lb.S = num_seqs, lb.inv_freq = inv_freq_.data();
  if (c_.is_moe()) {  // the experts of every row, recorded
    routing_.resize(size_t(R) * size_t(routing_width()));
    lb.routing.record = routing_.data();
  }
  // Generation keeps whole token rows on every rank (no sequence parallelism: a decode step has few rows).
  LayerCollectives<float>* whole_rows = tp_ ? tp_->layers_whole_rows() : nullptr;
  if (tp_) tp_->embedding_forward(x_[0].data(), tokens, w.embed_tokens.f32(), R, /*local=*/false);
  else cpu::embedding_forward(x_[0].data(), tokens, w.embed_tokens.f32(), R, c_.hidden_size);
  for (int l = 0; l < c_.num_hidden_layers; ++l) {
    LayerActivations<CpuBackend> a = act_;
    a.x_in = x_[l % 2].data();
    layer_forward<CpuBackend>(l, shape_, layer_pointers(w.layers[size_t(l)]), lb, a, scratch_, attention,
                              *feed_forward_, whole_rows, x_[(l + 1) % 2].data(), {});
  }
}

int CachedForward::routing_width() const {
  return c_.is_moe() ? c_.num_moe_layers() * c_.num_experts_per_tok : 0;
}

void CachedForward::head(const ModelWeights& w, const int32_t* rows, int n, float* logits) {
  const int C = c_.hidden_size;
  const float* x = x_[c_.num_hidden_layers % 2].data();
  // Gather the rows that need logits (the final norm is per row, so norming only them changes nothing).
  for (int i = 0; i < n; ++i) std::copy_n(x + int64_t(rows[i]) * C, C, head_x_.data() + int64_t(i) * C);
  cpu::rmsnorm_forward(head_h_.data(), head_rstd_.data(), head_x_.data(), w.norm.f32(), n, C, c_.rms_norm_eps);
  const Tensor& lm_head = c_.tie_word_embeddings ? w.embed_tokens : w.lm_head;
  if (tp_) tp_->lm_head_logits(logits, head_h_.data(), lm_head.f32(), n);
  else cpu::lm_head_logits(logits, head_h_.data(), lm_head.f32(), n, C, c_.vocab_size);
}

void CachedForward::prefill(const ModelWeights& w, KvCache& cache, const int32_t* tokens, const int32_t* cu_seqlens,
                            const int32_t* slots, int num_seqs, float* logits) {
  HONE_CHECK(num_seqs > 0 && cu_seqlens[0] == 0, "prefill needs sequences packed from row 0");
  if (lockstep_) lockstep_->vote(true);
  const int R = cu_seqlens[num_seqs];
  reserve(R);
  for (int s = 0; s < num_seqs; ++s) {
    const int b = cu_seqlens[s], e = cu_seqlens[s + 1];
    HONE_CHECK(e > b, "prefill of an empty prompt (sequence ", s, ")");
    HONE_CHECK(e - b <= cache.max_len() && slots[s] >= 0 && slots[s] < cache.num_slots(), "prompt ", s, " of ",
               e - b, " tokens does not fit slot ", slots[s], " of the KV cache");
    for (int r = b; r < e; ++r) {
      pos_[size_t(r)] = r - b;
      row_slot_[size_t(r)] = slots[s];
    }
    rows_[size_t(s)] = e - 1;
  }
  layers(w, cache, Mode::prefill, tokens, R, cu_seqlens, num_seqs, nullptr);
  head(w, rows_.data(), num_seqs, logits);
}

void CachedForward::decode(const ModelWeights& w, KvCache& cache, const int32_t* tokens, const int32_t* positions,
                           const int32_t* slots, int B, float* logits) {
  if (B == 0) return;
  if (lockstep_) lockstep_->vote(true);
  reserve(B);
  for (int b = 0; b < B; ++b) {
    HONE_CHECK(positions[b] >= 0 && positions[b] < cache.max_len() && slots[b] >= 0 && slots[b] < cache.num_slots(),
               "decode position ", positions[b], " of slot ", slots[b], " outside the KV cache");
    pos_[size_t(b)] = positions[b];
    row_slot_[size_t(b)] = slots[b];
    lens_[size_t(b)] = positions[b] + 1;
    rows_[size_t(b)] = b;
  }
  layers(w, cache, Mode::decode, tokens, B, nullptr, 0, slots);
  head(w, rows_.data(), B, logits);
}

int64_t CachedForward::finish(const ModelWeights& w) {
  if (!lockstep_) return -1;
  int64_t idle = 0;
  for (; lockstep_->vote(false); ++idle) idle_pass(w);
  return idle;
}

// Only the sparse layers cross ranks: each runs over no rows of this rank (route, plan and dispatch of nothing;
// its experts compute what the others send; combine sends it back).
void CachedForward::idle_pass(const ModelWeights& w) {
  auto* moe = dynamic_cast<MoeFeedForward<CpuBackend>*>(feed_forward_.get());
  HONE_CHECK(moe, "an idle pass of a model without experts");
  reserve(1);
  LayerActivations<CpuBackend> a = act_;
  a.x_in = x_[0].data();
  LayerBatch lb;  // no rows
  lb.positions = pos_.data(), lb.inv_freq = inv_freq_.data();
  LayerCollectives<float>* whole_rows = tp_ ? tp_->layers_whole_rows() : nullptr;
  for (int l = 0; l < c_.num_hidden_layers; ++l)
    if (moe->is_sparse(l))
      moe->forward(l, shape_, layer_pointers(w.layers[size_t(l)]), lb, a, scratch_, whole_rows, head_x_.data(),
                   x_[1].data(), {});
}

}  // namespace hone
