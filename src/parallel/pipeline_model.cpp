// A rank's pipeline stage over the backend: chunks as spans of the one model, their pools, the message buffers, and
// the stage's work for the executor (pipeline_model.h). Instantiated for every backend (backend/backend.h).
#include "parallel/pipeline_model.h"

#include <algorithm>
#include <cstring>

#include "parallel/tensor_parallel.h"
#include "runtime/error.h"

namespace hone {

template <typename B>
class PipelineStage<B>::Work final : public PipelineStageWork {
 public:
  template <typename T>
  using Array = typename B::template Array<T>;

  Work(PipelineStage& m, const std::vector<const PackedBatch*>& batches, float temperature, bool forward_only)
      : m_(m), batches_(batches), temperature_(temperature), forward_only_(forward_only) {}
  ~Work() override {
    // Buffers still held (none after a complete pass) go back to the spares.
    for (auto& [k, b] : inputs_) m_.spare_.push_back(std::move(b));
    for (auto& [k, b] : output_grads_) m_.spare_.push_back(std::move(b));
    for (auto& [k, b] : loss_grads_) m_.spare_f_.push_back(std::move(b));
  }

  const Loss* loss = nullptr;
  float* grads = nullptr;
  std::vector<std::vector<float>>* out = nullptr;
  Key last_backward{-1, -1};
  const BeforeLastBackward* before_last = nullptr;

  int64_t message_elements(int mb) const override {
    if (mb >= int(batches_.size())) return 0;
    // The stage may not have made a model yet (its first receive comes before its first forward).
    return int64_t(Model::boundary_rows(m_.tp_, batches_[size_t(mb)]->num_tokens())) * m_.c_.hidden_size;
  }

  void* receive_buffer(const PipeTransfer& t) override {
    auto& map = t.what == PipeMessage::activation ? inputs_ : output_grads_;
    Array<A>& b = map[{t.microbatch, t.chunk}];
    b = take(message_elements(t.microbatch));
    return b.get();
  }

  const void* send_buffer(const PipeTransfer& t) override {
    const Key key{t.microbatch, t.chunk};
    const Model& x = *m_.chunks_[size_t(t.chunk)].pool[size_t(active_.at(key))];
    if (t.what == PipeMessage::activation) {
      const A* out = x.output();
      if (forward_only_) release(key);  // sent before the next forward can reuse it
      return out;
    }
    const A* g = x.input_grad();
    release(key);  // its backward is done; nothing computes before this exchange sends the gradient
    return g;
  }

  void forward(int mb, int chunk) override {
    const Key key{mb, chunk};
    Chunk& ch = m_.chunks_[size_t(chunk)];
    const int i = acquire(chunk);
    active_[key] = i;
    Model& x = *ch.pool[size_t(i)];
    const A* input = nullptr;
    if (!ch.span.embedding) {
      auto it = inputs_.find(key);
      HONE_CHECK(it != inputs_.end(), "micro-batch ", mb, " reached chunk ", chunk, " without its input");
      input = it->second.get();
    }
    x.forward(*batches_[size_t(mb)], temperature_, /*need_entropy=*/!forward_only_, /*need_backward=*/!forward_only_,
              input);
    if (auto it = inputs_.find(key); it != inputs_.end()) {
      give_back(std::move(it->second));  // the forward copied it (ordered on the stream before any reuse)
      inputs_.erase(it);
    }
    if (!ch.span.head) return;
    const int T = batches_[size_t(mb)]->num_tokens();
    if (forward_only_) {
      std::vector<float>& o = (*out)[size_t(mb)];
      o = x.logprobs_host();
      o.resize(size_t(T));
      release(key);
      return;
    }
    const LossGrads g = (*loss)(mb, x);
    // The loss's buffers serve the next micro-batch: keep this one's until its backward.
    Array<float>& keep = loss_grads_[mb];
    keep = take_f(2 * int64_t(T));
    B::copy(m_.exec_, keep.get(), g.dlogprob, size_t(T) * sizeof(float));
    if (g.dentropy) {
      B::copy(m_.exec_, keep.get() + T, g.dentropy, size_t(T) * sizeof(float));
      has_dentropy_[mb] = true;
    }
  }

  void backward(int mb, int chunk) override {
    const Key key{mb, chunk};
    Chunk& ch = m_.chunks_[size_t(chunk)];
    Model& x = *ch.pool[size_t(active_.at(key))];
    if (key == last_backward && before_last && *before_last) (*before_last)(x);
    if (ch.span.head) {
      auto it = loss_grads_.find(mb);
      HONE_CHECK(it != loss_grads_.end(), "micro-batch ", mb, "'s backward without its loss gradients");
      const int T = batches_[size_t(mb)]->num_tokens();
      x.backward(it->second.get(), has_dentropy_[mb] ? it->second.get() + T : nullptr, grads);
      give_back_f(std::move(it->second));
      loss_grads_.erase(it);
    } else {
      auto it = output_grads_.find(key);
      HONE_CHECK(it != output_grads_.end(), "micro-batch ", mb, "'s backward of chunk ", chunk,
                 " without its output's gradient");
      x.backward(nullptr, nullptr, grads, it->second.get());
      give_back(std::move(it->second));
      output_grads_.erase(it);
    }
    if (ch.span.embedding) release(key);  // the first chunk sends nothing back
  }

  void synchronize() override { B::sync(m_.exec_); }

 private:
  Array<A> take(int64_t n) {
    const int64_t cap = std::max<int64_t>(n, int64_t(m_.max_tokens_) * m_.c_.hidden_size);
    for (size_t i = 0; i < m_.spare_.size(); ++i)
      if (m_.spare_[i].size() >= n) {
        Array<A> b = std::move(m_.spare_[i]);
        m_.spare_.erase(m_.spare_.begin() + int64_t(i));
        return b;
      }
    return Array<A>(cap, "pipeline message");
  }
  void give_back(Array<A> b) { m_.spare_.push_back(std::move(b)); }
  Array<float> take_f(int64_t n) {
    for (size_t i = 0; i < m_.spare_f_.size(); ++i)
      if (m_.spare_f_[i].size() >= n) {
        Array<float> b = std::move(m_.spare_f_[i]);
        m_.spare_f_.erase(m_.spare_f_.begin() + int64_t(i));
        return b;
      }
    return Array<float>(std::max<int64_t>(n, 2 * int64_t(m_.max_tokens_)), "pipeline loss gradients");
  }
  void give_back_f(Array<float> b) { m_.spare_f_.push_back(std::move(b)); }

  int acquire(int chunk) {
    Chunk& ch = m_.chunks_[size_t(chunk)];
    if (ch.free.empty()) {
      ch.pool.push_back(std::make_unique<Model>(m_.c_, m_.stage_.param_layout(), m_.exec_, m_.max_tokens_, m_.tp_,
                                                ch.span, m_.weights_));
      ch.pool.back()->set_recompute(m_.recompute_);
      return int(ch.pool.size()) - 1;
    }
    const int i = ch.free.back();
    ch.free.pop_back();
    return i;
  }
  void release(const Key& key) {
    auto it = active_.find(key);
    HONE_CHECK(it != active_.end(), "micro-batch ", key.first, " of chunk ", key.second, " released twice");
    m_.chunks_[size_t(key.second)].free.push_back(it->second);
    active_.erase(it);
  }

  PipelineStage& m_;
  const std::vector<const PackedBatch*>& batches_;
  float temperature_;
  bool forward_only_;
  std::map<Key, int> active_;  // the model holding each micro-batch's activations on a chunk
  std::map<Key, Array<A>> inputs_, output_grads_;
  std::map<int, Array<float>> loss_grads_;
  std::map<int, bool> has_dentropy_;
};

template <typename B>
PipelineStage<B>::PipelineStage(const ModelConfig& c, const ShardLayout& stage, A* weights, typename B::Exec exec,
                                int max_tokens, TensorParallel* tp, Comm& pp)
    : c_(c), stage_(stage), weights_(weights), exec_(exec), max_tokens_(max_tokens), tp_(tp), pp_(pp) {
  const PipelineLayout& p = stage_.pipeline();
  HONE_CHECK(pp.size() == p.pp() && pp.rank() == stage_.pp_rank(), "the pipeline group (rank ", pp.rank(), " of ",
             pp.size(), ") is not the stage's (rank ", stage_.pp_rank(), " of ", p.pp(), ")");
  HONE_CHECK(pp.on_device() == B::kDeviceMemory, "the ", B::kName, " pipeline needs a ",
             B::kDeviceMemory ? "device" : "host", " Comm");
  HONE_CHECK(max_tokens > 0, "max_tokens must be positive");
  for (int v = 0; v < p.vpp(); ++v) {
    const int k = p.model_chunk(pp.rank(), v);
    Chunk ch;
    ch.span = ModelSpan{p.layer_begin(k), p.layer_end(k), p.first_chunk(k), p.last_chunk(k)};
    chunks_.push_back(std::move(ch));
  }
  schedule_.pp = p.pp();
  schedule_.vpp = p.vpp();
}

template <typename B>
PipelineStage<B>::PipelineStage(const ModelConfig& c, const ShardLayout& stage, const ModelWeights& weights,
                                TensorParallel* tp, Comm& pp)
  requires std::is_same_v<B, CpuBackend>
    // The models read the weights and never write them.
    : PipelineStage(c, stage, const_cast<float*>(weights.flat.defined() ? weights.flat.f32() : nullptr), {}, 1, tp,
                    pp) {
  HONE_CHECK(weights.flat.numel() == stage_.num_local_params(), "stage weights of ", weights.flat.numel(),
             " parameters, the stage layout has ", stage_.num_local_params());
}

template <typename B>
PipelineStage<B>::~PipelineStage() = default;

template <typename B>
void PipelineStage<B>::set_recompute(Recompute r) {
  recompute_ = r;
  for (Chunk& ch : chunks_)
    for (auto& x : ch.pool) x->set_recompute(r);
}

template <typename B>
void PipelineStage<B>::set_weights(A* weights) {
  weights_ = weights;
  for (Chunk& ch : chunks_)
    for (auto& x : ch.pool) x->set_shared_weights(weights);
}

template <typename B>
PipelineRunStats PipelineStage<B>::run(const std::vector<const PackedBatch*>& batches, bool forward_only,
                                       Work& work) {
  schedule_.microbatches = int(batches.size());
  schedule_.forward_only = forward_only;
  const std::vector<PipeAction> actions = pipeline_actions(schedule_, pp_.rank());
  for (const PipeAction& a : actions)
    if (a.kind == PipeAction::Kind::backward && a.microbatch < int(batches.size()))
      work.last_backward = {a.microbatch, a.chunk};
  constexpr CommType type = std::is_same_v<A, float> ? CommType::f32 : CommType::bf16;
  return run_pipeline(actions, int(batches.size()), work, pp_, type);
}

template <typename B>
PipelineRunStats PipelineStage<B>::train(const std::vector<const PackedBatch*>& batches, float temperature,
                                         const Loss& loss, float* grads, const BeforeLastBackward& before_last) {
  Work work(*this, batches, temperature, /*forward_only=*/false);
  work.loss = &loss;
  work.grads = grads;
  work.before_last = &before_last;
  return run(batches, false, work);
}

template <typename B>
PipelineRunStats PipelineStage<B>::logprobs(const std::vector<const PackedBatch*>& batches, float temperature,
                                            std::vector<std::vector<float>>& out) {
  if (last_stage()) out.resize(batches.size());
  Work work(*this, batches, temperature, /*forward_only=*/true);
  work.out = &out;
  return run(batches, true, work);
}

template <typename B>
void PipelineStage<B>::sum_tied_gradients(ModelWeights& grads)
  requires std::is_same_v<B, CpuBackend>
{
  const PipelineLayout& p = stage_.pipeline();
  const ParamShard* tied = stage_.try_find("model.embed_tokens.weight");
  if (p.pp() == 1 || !tied || !tied->tied_across_stages()) return;
  const int peer = stage_.holds_embedding() ? p.pp() - 1 : 0;
  float* g = grads.flat.f32() + tied->offset;
  const int64_t n = tied->local_numel();
  std::vector<float> other(static_cast<size_t>(n));
  pp_.send_recv(g, n, peer, other.data(), n, peer);
  // Both stages add the two in the same order (first stage's + last stage's): the sums are bitwise equal.
  const float* first = stage_.holds_embedding() ? g : other.data();
  const float* last = stage_.holds_embedding() ? other.data() : g;
  std::vector<float> sum(static_cast<size_t>(n));
  for (int64_t i = 0; i < n; ++i) sum[size_t(i)] = first[i] + last[i];
  std::memcpy(g, sum.data(), sizeof(float) * size_t(n));
}

template <typename B>
void PipelineStage<B>::release() {
  B::sync(exec_);
  for (Chunk& ch : chunks_)
    for (auto& x : ch.pool) x->release_arenas();
  spare_.clear();
  spare_f_.clear();
}

template <typename B>
size_t PipelineStage<B>::allocated_bytes() const {
  size_t n = 0;
  for (const Chunk& ch : chunks_)
    for (const auto& x : ch.pool) n += x->allocated_bytes();
  for (const auto& b : spare_) n += b.bytes();
  for (const auto& b : spare_f_) n += b.bytes();
  return n;
}

template <typename B>
size_t PipelineStage<B>::activation_bytes_bound(int T) const {
  // The most (micro-batch, chunk) forwards not yet backwarded under this rank's schedule, with micro-batches to
  // spare; each chunk's model holds its span's activations.
  PipelineSchedule s = schedule_;
  s.microbatches = 4 * s.pp * s.vpp;
  s.forward_only = false;
  std::vector<int> alive(chunks_.size(), 0), most(chunks_.size(), 0);
  for (const PipeAction& a : pipeline_compute_order(s, pp_.rank())) {
    int& n = alive[size_t(a.chunk)];
    n += a.kind == PipeAction::Kind::forward ? 1 : -1;
    most[size_t(a.chunk)] = std::max(most[size_t(a.chunk)], n);
  }
  size_t total = 0;
  for (size_t v = 0; v < chunks_.size(); ++v) {
    Model probe(c_, stage_.param_layout(), exec_, std::max(T, 1), tp_, chunks_[v].span, weights_);
    probe.set_recompute(recompute_);
    total += size_t(most[v]) * (probe.forward_bytes(T, true) + probe.backward_bytes(T));
  }
  return total;
}

#define HONE_INSTANTIATE_PIPELINE_STAGE(B) template class PipelineStage<B>;
HONE_FOR_EACH_BACKEND(HONE_INSTANTIATE_PIPELINE_STAGE)
#undef HONE_INSTANTIATE_PIPELINE_STAGE

}  // namespace hone
