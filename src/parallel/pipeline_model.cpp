// A CPU rank's pipeline stage: chunks as Transformer spans, their pools, and the stage's work for the executor
// (pipeline_model.h).
#include "parallel/pipeline_model.h"

#include <algorithm>
#include <cstring>

#include "ops/ops.h"
#include "parallel/tensor_parallel.h"
#include "runtime/error.h"

namespace hone {

class PipelineModel::Work final : public PipelineStageWork {
 public:
  Work(PipelineModel& m, const std::vector<const PackedBatch*>& batches, float temperature, bool forward_only)
      : m_(m), batches_(batches), temperature_(temperature), forward_only_(forward_only) {}

  const Loss* loss = nullptr;                     // training
  ModelWeights* grads = nullptr;                  // training
  std::vector<std::vector<float>>* out = nullptr;  // forward-only, last stage

  int64_t message_elements(int mb) const override {
    if (mb >= int(batches_.size())) return 0;
    const Transformer& any = *m_.chunks_[0].pool.at(0);
    return int64_t(any.boundary_rows(batches_[size_t(mb)]->num_tokens())) * m_.c_.hidden_size;
  }

  void* receive_buffer(const PipeTransfer& t) override {
    auto& map = t.what == PipeMessage::activation ? inputs_ : output_grads_;
    std::vector<float>& buf = map[{t.microbatch, t.chunk}];
    buf.resize(size_t(message_elements(t.microbatch)));
    return buf.data();
  }

  const void* send_buffer(const PipeTransfer& t) override {
    const Key key{t.microbatch, t.chunk};
    const int i = active_.at(key);
    const Transformer& x = *m_.chunks_[size_t(t.chunk)].pool[size_t(i)];
    if (t.what == PipeMessage::activation) {
      if (forward_only_) release(key);  // sent before the next forward can reuse it
      return x.output();
    }
    release(key);  // its backward is done; nothing computes before this exchange sends the gradient
    return x.input_grad();
  }

  void forward(int mb, int chunk) override {
    const Key key{mb, chunk};
    Chunk& ch = m_.chunks_[size_t(chunk)];
    const int i = acquire(chunk);
    active_[key] = i;
    Transformer& x = *ch.pool[size_t(i)];
    const float* input = nullptr;
    if (!ch.span.embedding) {
      auto it = inputs_.find(key);
      HONE_CHECK(it != inputs_.end(), "micro-batch ", mb, " reached chunk ", chunk, " without its input");
      input = it->second.data();
    }
    x.forward(*batches_[size_t(mb)], temperature_, /*need_entropy=*/!forward_only_, input);
    inputs_.erase(key);
    if (!ch.span.head) return;
    if (forward_only_) {
      const Tensor& lp = x.logprobs();
      (*out)[size_t(mb)].assign(lp.f32(), lp.f32() + lp.numel());
      release(key);
      return;
    }
    (*loss)(mb, x, dlogprob_[mb], dentropy_[mb]);
  }

  void backward(int mb, int chunk) override {
    const Key key{mb, chunk};
    Chunk& ch = m_.chunks_[size_t(chunk)];
    Transformer& x = *ch.pool[size_t(active_.at(key))];
    if (ch.span.head) {
      std::vector<float>& dent = dentropy_[mb];
      x.backward(dlogprob_[mb].data(), dent.empty() ? nullptr : dent.data(), *grads);
      dlogprob_.erase(mb);
      dentropy_.erase(mb);
    } else {
      auto it = output_grads_.find(key);
      HONE_CHECK(it != output_grads_.end(), "micro-batch ", mb, "'s backward of chunk ", chunk,
                 " without its output's gradient");
      x.backward(nullptr, nullptr, *grads, it->second.data());
      output_grads_.erase(it);
    }
    if (ch.span.embedding) release(key);  // the first chunk sends nothing back
  }

 private:
  int acquire(int chunk) {
    Chunk& ch = m_.chunks_[size_t(chunk)];
    if (ch.free.empty()) {
      ch.pool.push_back(std::make_unique<Transformer>(m_.c_, m_.w_, m_.tp_, ch.span));
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

  PipelineModel& m_;
  const std::vector<const PackedBatch*>& batches_;
  float temperature_;
  bool forward_only_;
  std::map<Key, int> active_;  // the Transformer holding each micro-batch's activations on a chunk
  std::map<Key, std::vector<float>> inputs_, output_grads_;
  std::map<int, std::vector<float>> dlogprob_, dentropy_;  // the loss's gradients, last stage
};

PipelineModel::PipelineModel(const ModelConfig& c, const ShardLayout& stage, const ModelWeights& weights,
                             TensorParallel* tp, Comm& pp)
    : c_(c), stage_(stage), w_(weights), tp_(tp), pp_(pp) {
  const PipelineLayout& p = stage_.pipeline();
  HONE_CHECK(pp.size() == p.pp() && pp.rank() == stage_.pp_rank(), "the pipeline group (rank ", pp.rank(), " of ",
             pp.size(), ") is not the stage's (rank ", stage_.pp_rank(), " of ", p.pp(), ")");
  HONE_CHECK(!pp.on_device(), "the CPU pipeline needs a host Comm");
  HONE_CHECK(weights.flat.numel() == stage_.num_local_params(), "stage weights of ", weights.flat.numel(),
             " parameters, the stage layout has ", stage_.num_local_params());
  for (int v = 0; v < p.vpp(); ++v) {
    const int k = p.model_chunk(pp.rank(), v);
    Chunk ch;
    ch.span = ModelSpan{p.layer_begin(k), p.layer_end(k), p.first_chunk(k), p.last_chunk(k)};
    ch.pool.push_back(std::make_unique<Transformer>(c_, w_, tp_, ch.span));
    ch.free.push_back(0);
    chunks_.push_back(std::move(ch));
  }
  schedule_.pp = p.pp();
  schedule_.vpp = p.vpp();
}

void PipelineModel::set_recompute(Recompute r) {
  recompute_ = r;
  for (Chunk& ch : chunks_)
    for (auto& x : ch.pool) x->set_recompute(r);
}

PipelineRunStats PipelineModel::run(const std::vector<const PackedBatch*>& batches, bool forward_only, Work& work) {
  schedule_.microbatches = int(batches.size());
  schedule_.forward_only = forward_only;
  const std::vector<PipeAction> actions = pipeline_actions(schedule_, pp_.rank());
  return run_pipeline(actions, int(batches.size()), work, pp_, CommType::f32);
}

PipelineRunStats PipelineModel::train(const std::vector<const PackedBatch*>& batches, float temperature,
                                      const Loss& loss, ModelWeights& grads) {
  HONE_CHECK(grads.flat.numel() == stage_.num_local_params(), "gradients are not shaped as this stage");
  Work work(*this, batches, temperature, /*forward_only=*/false);
  work.loss = &loss;
  work.grads = &grads;
  return run(batches, false, work);
}

PipelineRunStats PipelineModel::logprobs(const std::vector<const PackedBatch*>& batches, float temperature,
                                         std::vector<std::vector<float>>& out) {
  if (last_stage()) out.resize(batches.size());
  Work work(*this, batches, temperature, /*forward_only=*/true);
  work.out = &out;
  return run(batches, true, work);
}

void PipelineModel::sum_tied_gradients(ModelWeights& grads) {
  const PipelineLayout& p = stage_.pipeline();
  const ParamShard* tied = stage_.try_find("model.embed_tokens.weight");
  if (p.pp() == 1 || !tied || !tied->tied_across_stages()) return;
  const int peer = stage_.holds_embedding() ? p.pp() - 1 : 0;
  float* g = grads.flat.f32() + tied->offset;
  const int64_t n = tied->local_numel();
  tied_peer_.resize(size_t(n));
  pp_.send_recv(g, n, peer, tied_peer_.data(), n, peer);
  // Both stages add the two in the same order (first stage's + last stage's): the sums are bitwise equal.
  const float* first = stage_.holds_embedding() ? g : tied_peer_.data();
  const float* last = stage_.holds_embedding() ? tied_peer_.data() : g;
  std::vector<float> sum(static_cast<size_t>(n));
  for (int64_t i = 0; i < n; ++i) sum[size_t(i)] = first[i] + last[i];
  std::memcpy(g, sum.data(), sizeof(float) * size_t(n));
}

size_t PipelineModel::allocated_bytes() const {
  size_t n = 0;
  for (const Chunk& ch : chunks_)
    for (const auto& x : ch.pool) n += x->allocated_bytes();
  return n;
}

}  // namespace hone
