// Continuous batching over a paged KV cache: which sequences run in the next model pass. Pure host code, driven by
// the generator:
//
//   Scheduler s(kv, options);  s.add(seq, group, prompt_len) for every request;
//   while (!s.finished()) { step = s.schedule(); run it; for each sampled row s.on_token(seq);
//                           for each row that stopped s.finish(seq); }
//
// A step is either a PREFILL (sequences admitted from the waiting queue: a fresh group's prompt computed once by
// its leader, the other members forked onto the leader's prompt blocks; or a preempted sequence recomputed from
// its prompt + generated tokens) or a DECODE (one token for every running sequence). Admission comes first when
// blocks and max_num_seqs allow; every admitted sequence gets blocks for one more token than it computes, so its
// first decode needs no new block. When a decode needs blocks that are not free, the most recently admitted
// sequences are preempted: their blocks are freed and they go back to the head of the queue, keeping their
// generated tokens, to be recomputed later. A sequence is never lost or duplicated; the generator's Philox keying
// makes its tokens independent of when it ran.
//
// Token accounting (P prompt tokens, g generated so far): between steps a running sequence has P + g - 1 tokens in
// the cache (the last sampled token is not yet fed); its next decode feeds that token at position P + g - 1 and
// needs room for P + g tokens. A recompute prefill feeds all P + g tokens.
#pragma once

#include <cstdint>
#include <deque>
#include <utility>
#include <vector>

#include "generation/kv_block_manager.h"

namespace hone {

struct SchedulerOptions {
  int max_num_seqs = 512;         // running sequences at most
  int max_prefill_tokens = 16384;  // tokens computed by one prefill (a single longer sequence is still admitted)
  bool share_prefix = true;        // fork group members onto the leader's full prompt blocks (else private copies)
};

class Scheduler {
 public:
  struct PrefillSeq {
    int64_t seq = 0;
    int compute_from = -1;  // -1: this sequence's tokens are computed in the pass; else the index (in `prefill`)
                            // of the leader whose last-token logits it samples from (a fork of a fresh group)
    int tokens = 0;         // tokens computed (0 for a fork)
  };
  struct Step {
    enum class Kind { none, prefill, decode };
    Kind kind = Kind::none;
    std::vector<PrefillSeq> prefill;                     // leaders precede their forks
    std::vector<std::pair<int32_t, int32_t>> copies;     // KV blocks to copy (src, dst) after the prefill pass
    std::vector<int64_t> decode;                         // running sequences, a group's members consecutive
    std::vector<int64_t> preempted;                      // sent back to the queue by this step
  };

  Scheduler(KvBlockManager& kv, SchedulerOptions options);

  // A request: its group (requests of one group share the prompt; add them consecutively) and prompt length.
  void add(int64_t seq, int64_t group, int prompt_len);
  Step schedule();
  void on_token(int64_t seq);  // a token was sampled for seq
  void finish(int64_t seq);    // seq stopped: its blocks are freed
  bool finished() const { return waiting_.empty() && running_.empty(); }

  int generated(int64_t seq) const { return info(seq).generated; }
  int prompt_len(int64_t seq) const { return info(seq).prompt_len; }
  int64_t group(int64_t seq) const { return info(seq).group; }
  bool is_running(int64_t seq) const { return info(seq).state == State::running; }
  int num_running() const { return int(running_.size()); }
  int num_waiting() const { return int(waiting_.size()); }
  int64_t preemptions() const { return preemptions_; }

 private:
  enum class State { waiting, running, done };
  struct Info {
    int64_t group = 0;
    int prompt_len = 0;
    int generated = 0;
    State state = State::waiting;
    int64_t admitted_at = -1;  // admission counter: larger = more recent
  };
  const Info& info(int64_t seq) const;
  Info& info(int64_t seq);
  bool try_admit(Step& step);
  void preempt_for_decode(Step& step);

  KvBlockManager& kv_;
  SchedulerOptions opt_;
  std::vector<Info> infos_;            // by sequence id (ids are 0..n-1 in practice; grown as needed)
  std::deque<int64_t> waiting_;
  std::vector<int64_t> running_;
  int64_t admissions_ = 0, preemptions_ = 0;
  bool hold_admission_ = false;
};

}  // namespace hone
