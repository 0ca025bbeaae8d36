// The roles this rank runs, and the engine they run on. A GRPO step (rl/grpo_trainer_step.cpp) is written over the
// roles: the generator's rollouts, the learner's old-policy logprobs, training and optimizer steps, the scorer's
// reference logprobs, and the weight channel from learner to generator. Which ranks run which role is a layout
// decision: today every rank runs all four on one engine (colocated: one RoleEngine implements them all and shares
// the device between them, freeing the KV cache before the logprob phase and the activation arenas before
// generation); asynchronous GRPO will place generators on ranks of their own, where a RankRoles holds only the
// roles that rank runs.
// The engine is one class over the backend (rl/colocated_engine.cpp): compute weights shared by training and
// generation (the weight channel refits them from the fp32 masters in place; on the CPU they are the masters), the
// one transformer, the backend's generator, gradients reduced while the last micro-batch's backward runs
// (train/grad_reducer.h). doc/grpo.md, "Memory on the GPU".
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "comm/parallel_state.h"
#include "model/model_config.h"
#include "model/packed_batch.h"
#include "model/weights.h"
#include "rl/grpo_settings.h"
#include "roles/generator.h"
#include "roles/learner.h"
#include "roles/role_stats.h"
#include "roles/scorer.h"
#include "roles/weight_channel.h"
#include "runtime/error.h"

namespace hone::roles {

// The engine a rank's roles run on (one device, its memory and its step statistics), implementing the roles it
// hosts. The roles' calls are coarse (a phase each): virtual calls here cost nothing next to them.
class RoleEngine : public Generator, public Learner, public Scorer, public WeightChannel {
 public:
  ~RoleEngine() override = default;
  virtual std::string describe() const = 0;  // e.g. "cpu fp32" or "cuda:0 NVIDIA H100 80GB HBM3, bf16"
  virtual void synchronize() {}               // waits for queued device work (phase timers call it)

  virtual EngineMemory memory() const = 0;
  virtual void reset_memory() = 0;  // start of a step (also resets stats())
  virtual EngineStepStats stats() const { return {}; }

  // ---- progress (rank 0's progress line: a local call, never a collective) ----
  // Called during train() and the logprob passes with how many of the call's micro-batches this rank has finished
  // (counted from its first, so the empty passes of expert parallelism come after its own). Not called under
  // pipeline parallelism, whose schedule interleaves the micro-batches of the stages. Empty: none.
  using PassProgressFn = std::function<void(int64_t done)>;
  void set_pass_progress(PassProgressFn fn) { pass_progress_ = std::move(fn); }

  // ---- the learner's and the scorer's logprob passes, through one forward of the training or reference weights
  void policy_logprobs(const std::vector<const PackedBatch*>& batches, float temperature,
                       const std::vector<const int32_t*>& forced_routing,
                       const std::vector<std::vector<float>*>& out) final {
    logprobs_batches(Weights::policy, batches, temperature, forced_routing, out);
  }
  void reference_logprobs(const std::vector<const PackedBatch*>& batches, float temperature,
                          const std::vector<const int32_t*>& forced_routing,
                          const std::vector<std::vector<float>*>& out) final {
    logprobs_batches(Weights::reference, batches, temperature, forced_routing, out);
  }

 protected:
  enum class Weights { policy, reference };
  // Per-row logprobs of one packed batch (0 where targets < 0) into out[batch.num_tokens()] (host memory), copied
  // once from the backend's memory. forced_routing: as Learner::policy_logprobs' entries.
  virtual void logprobs(Weights which, const PackedBatch& batch, float temperature, const int32_t* forced_routing,
                        float* out) = 0;
  // The logprobs of every batch of a pass, on every rank, into out (as Learner::policy_logprobs). The default calls
  // logprobs() per batch; an engine with a pipeline runs one forward-only pass through the stages.
  virtual void logprobs_batches(Weights which, const std::vector<const PackedBatch*>& batches, float temperature,
                                const std::vector<const int32_t*>& forced_routing,
                                const std::vector<std::vector<float>*>& out) {
    HONE_CHECK(out.size() == batches.size(), "one output per batch");
    std::vector<float> unwanted;
    for (size_t i = 0; i < batches.size(); ++i) {
      std::vector<float>& o = out[i] ? *out[i] : unwanted;
      o.resize(size_t(batches[i]->num_tokens()));
      logprobs(which, *batches[i], temperature, forced_routing.empty() ? nullptr : forced_routing[i], o.data());
      passes_done(int64_t(i) + 1);  // logprobs() has its values on the host: this pass is done
    }
  }
  bool wants_pass_progress() const { return bool(pass_progress_); }
  void passes_done(int64_t done) const {
    if (pass_progress_) pass_progress_(done);
  }

 private:
  PassProgressFn pass_progress_;
};

// This rank's roles: the engine that owns them and each role it runs (null where it runs none; today every rank
// runs all of them on its engine).
struct RankRoles {
  std::unique_ptr<RoleEngine> engine;
  Generator* generator = nullptr;
  Learner* learner = nullptr;
  Scorer* scorer = nullptr;
  WeightChannel* weights = nullptr;
};

// Every role on one engine: the colocated layout of today.
inline RankRoles colocated_roles(std::unique_ptr<RoleEngine> engine) {
  RankRoles r;
  r.generator = engine.get();
  r.learner = engine.get();
  r.scorer = engine.get();
  r.weights = engine.get();
  r.engine = std::move(engine);
  return r;
}
}  // namespace hone::roles

namespace hone::rl {

// The colocated engine over backend B (rl/colocated_engine.cpp), built from the initial fp32 weights of this rank's
// shard without communicating (connect() next, with the same weights). It keeps a reference to ps (which must
// outlive it) for its communicators. Instantiated for each backend of the build.
template <typename B>
std::unique_ptr<roles::RoleEngine> make_engine(const GrpoSettings& s, const ModelConfig& mc,
                                               const ModelWeights& initial, const ParallelState& ps);
// The engine of run.device (s.cuda): a UserError for "cuda" in a build without CUDA.
std::unique_ptr<roles::RoleEngine> make_engine(const GrpoSettings& s, const ModelConfig& mc,
                                               const ModelWeights& initial, const ParallelState& ps);

}  // namespace hone::rl
