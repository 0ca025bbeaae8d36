// Continuous batching with preemption by recompute (behaviour in scheduler.h).
#include "generation/scheduler.h"

#include <algorithm>
#include <utility>

#include "runtime/error.h"

namespace hone {

Scheduler::Scheduler(KvBlockManager& kv, SchedulerOptions options) : kv_(kv), opt_(options) {
  HONE_CHECK(opt_.max_num_seqs > 0 && opt_.max_prefill_tokens > 0, "scheduler limits must be positive");
}

const Scheduler::Info& Scheduler::info(int64_t seq) const {
  HONE_CHECK(seq >= 0 && seq < int64_t(infos_.size()) && infos_[size_t(seq)].prompt_len > 0, "unknown sequence ",
             seq);
  return infos_[size_t(seq)];
}
Scheduler::Info& Scheduler::info(int64_t seq) { return const_cast<Info&>(std::as_const(*this).info(seq)); }

void Scheduler::add(int64_t seq, int64_t group, int prompt_len) {
  HONE_CHECK(seq >= 0 && prompt_len > 0, "bad request ", seq, " of ", prompt_len, " tokens");
  if (seq >= int64_t(infos_.size())) infos_.resize(size_t(seq) + 1);
  HONE_CHECK(infos_[size_t(seq)].prompt_len == 0, "sequence ", seq, " added twice");
  infos_[size_t(seq)] = Info{group, prompt_len, 0, State::waiting, -1};
  waiting_.push_back(seq);
}

bool Scheduler::try_admit(Step& step) {
  int budget = opt_.max_prefill_tokens;
  auto admit = [&](int64_t seq, int compute_from, int tokens) {
    HONE_CHECK(!waiting_.empty() && waiting_.front() == seq, "admission out of queue order");
    waiting_.pop_front();
    Info& in = info(seq);
    in.state = State::running;
    in.admitted_at = admissions_++;
    running_.push_back(seq);
    step.prefill.push_back({seq, compute_from, tokens});
    budget -= tokens;
  };
  while (!waiting_.empty() && int(running_.size()) < opt_.max_num_seqs) {
    const int64_t seq = waiting_.front();
    const Info& in = info(seq);
    const int tokens = in.prompt_len + in.generated;  // computed by this pass
    if (!step.prefill.empty() && tokens > budget) break;
    if (in.generated > 0) {  // a preempted sequence: recompute prompt + generated tokens
      if (!kv_.allocate(seq, tokens + 1)) break;
      admit(seq, -1, tokens);
      continue;
    }
    // A fresh group: the leader computes the prompt, the following waiting members of its group fork onto it.
    if (!kv_.allocate(seq, tokens + 1)) break;
    const int leader = int(step.prefill.size());
    admit(seq, -1, tokens);
    bool all = true;
    while (!waiting_.empty() && int(running_.size()) < opt_.max_num_seqs) {
      const int64_t m = waiting_.front();
      const Info& mi = info(m);
      if (mi.group != in.group || mi.generated > 0 || mi.prompt_len != in.prompt_len) break;
      if (!kv_.fork(seq, m, in.prompt_len, in.prompt_len + 1, opt_.share_prefix, step.copies)) {
        all = false;
        break;
      }
      admit(m, leader, 0);
    }
    if (!all) break;
  }
  return !step.prefill.empty();
}

void Scheduler::preempt_for_decode(Step& step) {
  auto need_of = [&](int64_t s) { return kv_.blocks_to_grow(s, int64_t(info(s).prompt_len) + info(s).generated); };
  int need = 0;
  for (int64_t s : running_) need += need_of(s);
  while (need > kv_.num_free()) {
    HONE_CHECK(running_.size() > 1, "the KV cache (", kv_.num_blocks(), " blocks of ", kv_.block_size(),
               " tokens) cannot hold one sequence of ", info(running_[0]).prompt_len + info(running_[0]).generated,
               " tokens");
    auto victim_it = std::max_element(running_.begin(), running_.end(), [&](int64_t a, int64_t b) {
      return info(a).admitted_at < info(b).admitted_at;
    });
    const int64_t victim = *victim_it;
    need -= need_of(victim);
    kv_.free(victim);
    running_.erase(victim_it);
    info(victim).state = State::waiting;
    waiting_.push_front(victim);  // the oldest preempted ends up first
    step.preempted.push_back(victim);
    ++preemptions_;
  }
  for (int64_t s : running_) {
    const bool ok = kv_.grow(s, int64_t(info(s).prompt_len) + info(s).generated);
    HONE_CHECK(ok, "KV block accounting error while growing sequence ", s);
  }
}

Scheduler::Step Scheduler::schedule() {
  Step step;
  // After a preemption, admit nothing until a sequence finishes (unless nothing runs): re-admitting at once would
  // only be preempted again.
  if (!waiting_.empty() && (!hold_admission_ || running_.empty()) && try_admit(step)) {
    step.kind = Step::Kind::prefill;
    return step;
  }
  if (running_.empty()) {
    HONE_CHECK(waiting_.empty(), "the KV cache (", kv_.num_free(), " free blocks of ", kv_.block_size(),
               " tokens) cannot admit sequence ", waiting_.front(), " of ",
               info(waiting_.front()).prompt_len + info(waiting_.front()).generated, " tokens");
    return step;
  }
  preempt_for_decode(step);
  if (!step.preempted.empty()) hold_admission_ = true;
  step.kind = Step::Kind::decode;
  step.decode = running_;
  std::sort(step.decode.begin(), step.decode.end(), [&](int64_t a, int64_t b) {
    const int64_t ga = info(a).group, gb = info(b).group;
    return ga != gb ? ga < gb : a < b;
  });
  return step;
}

void Scheduler::on_token(int64_t seq) {
  Info& in = info(seq);
  HONE_CHECK(in.state == State::running, "token for sequence ", seq, " that is not running");
  ++in.generated;
}

void Scheduler::finish(int64_t seq) {
  Info& in = info(seq);
  HONE_CHECK(in.state == State::running, "finish of sequence ", seq, " that is not running");
  in.state = State::done;
  kv_.free(seq);
  running_.erase(std::find(running_.begin(), running_.end(), seq));
  hold_admission_ = false;
}

}  // namespace hone
