// Rank 0's progress line over the micro-batches of the logprob and training phases: the engine reports each of
// this rank's micro-batches as it finishes (roles::RoleEngine::set_pass_progress), so a phase of one optimizer step
// over many micro-batches shows how far it is ("step 3 training: 5/12 micro-batches, ..."). Lines come at the
// progress line's own interval (ProgressLine rate-limits them), and its heartbeat shows the last count while one
// micro-batch runs long. Local to the rank: no collective. With no progress line it does nothing.
//
//   MicroBatchProgress p(progress, engine, "step 3 training", total);   // this rank's micro-batches in the phase
//   p.next_call(mbs); engine.train(mbs, loss);                           // once per engine call, in order
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "rl/grpo_batch.h"
#include "roles/rank_roles.h"
#include "runtime/progress.h"

namespace hone::rl {

class MicroBatchProgress {
 public:
  // Begins the phase on `line` (null: nothing at all) with `total` micro-batches of this rank.
  MicroBatchProgress(ProgressLine* line, roles::RoleEngine& engine, std::string what, int64_t total);
  ~MicroBatchProgress();  // ends the phase and takes the hook back from the engine
  MicroBatchProgress(const MicroBatchProgress&) = delete;
  MicroBatchProgress& operator=(const MicroBatchProgress&) = delete;

  // The next engine call runs these micro-batches of this rank (the earlier calls' count as done).
  void next_call(const std::vector<MicroBatch>& micro_batches);
  void next_call(const std::vector<MicroBatch*>& micro_batches);

 private:
  void show(int64_t done_in_call);
  void begin_call();  // the earlier calls' micro-batches count as done, then the caller lists the new call's

  ProgressLine* line_;
  roles::RoleEngine& engine_;
  int64_t total_;
  int64_t done_before_ = 0, tokens_before_ = 0;  // the earlier calls'
  std::vector<int64_t> prefix_tokens_{0};         // the current call's first i micro-batches' tokens
};

}  // namespace hone::rl
