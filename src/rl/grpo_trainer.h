// The GRPO trainer: everything one rank holds for a run (tokenizer, prompts and reward, the policy engine with the
// model weights in their roles and the optimizer) and the step that runs the five phases of doc/grpo.md, "One step":
//   generation -> reward -> logprob -> training -> refit
// Built from a validated Config and the run's ParallelState (comm/parallel_state.h: the rank grid and its
// communicators, which must outlive the trainer); all ranks build it alike (identical initial weights), data
// parallel over the dp group. run.device picks the engine its roles run on (roles/rank_roles.h): the loop itself is the same on the
// CPU and the GPU.
//
//   ParallelState ps(read_rank_grid(cfg, world_size()));   // collective: the groups' communicators
//   GrpoTrainer t(cfg, ps);           // UserError on bad input, before any communication
//   t.connect();                      // collective: communicators, the data-parallel optimizer
//   t.restore(checkpoint_folder);     // optional: continue a run (collective)
//   StepRow row = t.step(step);       // metrics reduced over ranks (meaningful on rank 0)
//   auto snap = t.snapshot();         // collective: the whole state onto rank 0 (a sharded optimizer gathers)
//   t.save(folder, step, snap);       // rank 0 writes a checkpoint payload
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "generation/rollout.h"
#include "io/step_output.h"
#include "parallel/generation_layout.h"
#include "model/model_config.h"
#include "comm/parallel_state.h"
#include "model/weights.h"
#include "task/task.h"
#include "data/response_length.h"
#include "reward/batch_reward.h"
#include "rl/grpo_batch.h"
#include "rl/grpo_settings.h"
#include "roles/rank_roles.h"
#include "rl/validation.h"
#include "runtime/timer.h"
#include "tokenizer/chat_setup.h"
#include "tokenizer/tokenizer.h"

namespace hone {
class Config;
class ProgressLine;
}

namespace hone::rl {

struct HostMemoryPlan;

// Metrics hone declares beyond the catalog of io/output_metrics.h: name, unit, description.
struct ExtraMetric {
  const char* name;
  const char* unit;
  const char* description;
};
const std::vector<ExtraMetric>& grpo_extra_metrics();

class GrpoTrainer {
 public:
  GrpoTrainer(const Config& config, const ParallelState& parallel);
  ~GrpoTrainer();

  const GrpoSettings& settings() const { return s_; }
  const ModelConfig& model_config() const { return mc_; }
  roles::RoleEngine& engine() { return *roles_.engine; }
  const data::PromptSource& prompts() const { return *task_.prompts; }
  std::string describe() const;  // one line: model, parameters, data, ranks
  // The last step's parallel layouts at work, for the line under the step line ("" without pipeline, resharding or
  // drawn response lengths): the schedule and its bubble, the time in exchanges, the refit's bytes; with
  // data.response_length, the generation's tokens/s, its last 10 % of sequences and its batch occupancy.
  const std::string& step_note() const { return step_note_; }

  // Where the progress of long phases goes (rank 0's ProgressLine; null elsewhere and by default: none). Must
  // outlive the trainer's steps.
  void set_progress(ProgressLine* progress);

  // Collective over the data-parallel ranks, once after construction (outside agreed(): it communicates):
  // NCCL communicators and the data-parallel optimizer. Releases the host copy of the initial weights.
  void connect();

  // Runs GRPO step `step` (1-based). Collective: every rank calls it, with the same num_samples. When
  // num_samples > 0 rank 0's row gets the step's first num_samples rollouts in global order (gathered from the
  // ranks that generated them, so they do not depend on the rank count).
  StepRow step(int64_t step, int64_t num_samples);

  // What a checkpoint holds, on data-parallel rank 0 (empty elsewhere).
  struct Snapshot {
    ModelWeights master;  // fp32 training weights
    Tensor exp_avg, exp_avg_sq;
    int optimizer_step = 0;
  };
  // Validation ([validation]; rl/validation.h): its settings and the held-out problems read at construction.
  const ValidationSettings& validation() const { return val_; }
  int64_t validation_problems() const { return int64_t(val_prompts_.size()); }
  // Collective: generates the held-out problems' completions with the current generation weights (sharded over the
  // data-parallel ranks like a step's prompts), scores them with the training reward and returns the metrics
  // (meaningful on rank 0) for the row of `step` (the steps trained so far). Touches neither the training data's
  // cursor nor any random stream of training.
  StepRow validate(int64_t step);

  // Collective: the whole training state onto rank 0 (the distributed optimizer gathers its shards).
  Snapshot snapshot();
  // Rank 0: the checkpoint payload: config.json + model.safetensors (f32), optimizer.safetensors, state.json, and
  // (checkpoint.hf_folder) hf/, a ready Hugging Face model folder.
  void save(const std::string& folder, int64_t step, const Snapshot& snap) const;
  // Collective: restores weights (training and generation copies), optimizer and data cursor; returns the
  // checkpoint's step.
  int64_t restore(const std::string& folder);

 private:
  struct StepState;
  void build_model(const Config& c);
  void build_data(const Config& c);
  task::TaskOptions task_options(const Config& c) const;  // [data] as make_task takes it
  // Reads the validation problems, first weighing them and their completions in the host memory plan.
  void build_validation(const Config& c, HostMemoryPlan& plan);
  std::vector<int32_t> encode_prompt(const data::Prompt& p) const;
  void phase_generation(StepState& st);
  void phase_reward(StepState& st);
  // Scores st.samples[begin..] on the generation replica that made them (rl/grpo_trainer_reward.cpp): collective
  // over the world (a failing reward ends every rank with its message) and over the replica (its first rank scores,
  // the others take its results).
  void score_samples(StepState& st, size_t begin);
  // The step's reward (the user's program or plug-in, or the data's own) on the replica's first rank, its results
  // on every rank of the replica. Collective as score_samples.
  std::vector<reward::RewardResult> score_queries(const std::vector<reward::RewardQuery>& queries);
  // The step's micro-batches, packed once for the logprob and the training phases: train.global_batch_size
  // chunks of the rollouts by global position (one optimizer step each), each packed into micro-batches.
  void pack_micro_batches(StepState& st);
  void phase_logprob(StepState& st);
  void phase_training(StepState& st);
  void phase_refit(StepState& st);
  // A generation layout of its own: the replica's counts made world totals, then the samples moved to the
  // data-parallel ranks that train them (rl/rollout_exchange.h).
  void move_rollouts_to_trainers(StepState& st);
  // An optimizer step whose gradient norm was not finite (the engine skipped it): counted, logged, and the end of
  // the run after train.max_nonfinite_updates in a row.
  void note_nonfinite_update(StepState& st, double norm);
  void record(StepState& st, StepRow& row, int64_t num_samples);
  void set_layout_metrics(StepRow& row);
  void set_generation_metrics(StepRow& row);
  void write_hf_folder(const std::string& hf, const std::string& folder, const Snapshot& snap) const;
  void record_samples(const StepState& st, StepRow& row, int64_t num_samples);
  void record_rollouts(const StepState& st, StepRow& row);  // rl/grpo_trainer_rollouts.cpp

  const ParallelState& ps_;
  GrpoSettings s_;
  GenerationLayout gen_;  // the generation replicas (parallel/generation_layout.h)
  // The replica's ranks when they are not a training tp group (generation.tp > 1 on a layout of its own): the
  // group over which the replica's leader hands out its rewards.
  std::unique_ptr<GenerationGroup> gen_group_;
  Comm* scoring_group() const;  // the ranks that hold the same rollouts as this one where they are scored
  int64_t nonfinite_in_a_row_ = 0;  // skipped optimizer updates since the last applied one
  ModelConfig mc_;
  std::string model_path_;
  bool random_weights_ = false;  // model.init = "random": model_path_'s shape, seeded random weights
  std::string tokenizer_dir_;    // tokenizer.path of an hf tokenizer (its files go into checkpoints' hf/); else empty
  std::unique_ptr<Tokenizer> tok_;
  ChatSetup chat_;
  ChatOptions chat_options_;  // add_generation_prompt, enable_thinking
  std::string system_prompt_;
  task::Task task_;
  data::ResponseLengths lengths_;  // data.response_length: each sample's drawn length (benchmarks); off by default
  std::unique_ptr<reward::BatchReward> reward_;  // on the ranks that score (a generation replica's first); null elsewhere
  int64_t reward_batch_size_ = 0;        // reward.batch_size
  ValidationSettings val_;
  std::vector<data::Prompt> val_prompts_;  // every validation problem (each rank generates its shard)

  ModelWeights initial_;  // the initial fp32 weights, until connect()
  roles::RankRoles roles_;  // this rank's roles and the engine they run on (roles/rank_roles.h)
  StopCriteria stop_;
  PhaseTimer timer_;
  std::string step_note_;
  ProgressLine* progress_ = nullptr;
};

}  // namespace hone::rl
