// Progress by micro-batch in the logprob and training phases (see micro_batch_progress.h).
#include "rl/micro_batch_progress.h"

#include <algorithm>

namespace hone::rl {

MicroBatchProgress::MicroBatchProgress(ProgressLine* line, roles::RoleEngine& engine, std::string what, int64_t total)
    : line_(line && line->enabled() ? line : nullptr), engine_(engine), total_(total) {
  if (!line_) return;
  line_->begin(std::move(what), "micro-batches");
  line_->update(0, total_, 0);
  line_->heartbeat();  // one micro-batch of a large model may outlast the interval
}

MicroBatchProgress::~MicroBatchProgress() {
  if (!line_) return;
  engine_.set_pass_progress({});
  line_->end();
}

void MicroBatchProgress::begin_call() {
  done_before_ += int64_t(prefix_tokens_.size()) - 1;
  tokens_before_ += prefix_tokens_.back();
  prefix_tokens_.assign(1, 0);
  engine_.set_pass_progress([this](int64_t done) { show(done); });
}

void MicroBatchProgress::next_call(const std::vector<MicroBatch>& micro_batches) {
  if (!line_) return;
  begin_call();
  for (const MicroBatch& mb : micro_batches) prefix_tokens_.push_back(prefix_tokens_.back() + mb.batch.num_tokens());
}

void MicroBatchProgress::next_call(const std::vector<MicroBatch*>& micro_batches) {
  if (!line_) return;
  begin_call();
  for (const MicroBatch* mb : micro_batches) prefix_tokens_.push_back(prefix_tokens_.back() + mb->batch.num_tokens());
}

void MicroBatchProgress::show(int64_t done_in_call) {
  // The engine counts from this rank's first micro-batch; passes past its own (expert parallelism's empty ones) add
  // nothing.
  const int64_t d = std::clamp<int64_t>(done_in_call, 0, int64_t(prefix_tokens_.size()) - 1);
  line_->update(done_before_ + d, total_, tokens_before_ + prefix_tokens_[size_t(d)]);
}

}  // namespace hone::rl
