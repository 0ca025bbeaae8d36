// The generation engine's host loop over B: scheduling, packing of prefill and decode inputs, stop rules (see
// generator.h and doc/generation-gpu.md).
#include "generation/generator.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <limits>
#include <string>
#include <utility>

#include "backend/backend.h"
#include "generation/generation_forward.h"
#include "generation/kv_block_manager.h"
#include "generation/scheduler.h"
#include "model/weights.h"
#include "parallel/expert_parallel.h"
#include "parallel/shard_layout.h"
#include "parallel/tensor_parallel.h"
#include "runtime/error.h"

namespace hone {
namespace {

using Clock = std::chrono::steady_clock;
double seconds_since(Clock::time_point t0) { return std::chrono::duration<double>(Clock::now() - t0).count(); }

// Stop strings are matched on the host, as the CPU engine does: how much text was checked, and where it stops.
struct TextState {
  size_t text_size = 0;
  size_t text_end = std::string::npos;
};

// What the sampler needs besides the rows: the sampling settings and the Philox key.
struct SamplerSettings {
  SamplingParams params;
  uint64_t seed = 0;
  uint32_t step = 0;
  int max_total_sequence_length = 0;
};

// The longest a sequence of this call can get: a prompt and its request's max_new_tokens.
int longest_sequence(const std::vector<GenerationRequest>& requests, const StopCriteria& stop,
                     int max_total_sequence_length) {
  int64_t longest = 0;
  for (const GenerationRequest& r : requests)
    longest = std::max<int64_t>(longest, int64_t(r.prompt.size()) + max_new_tokens_of(r, stop));
  return int(std::min<int64_t>(max_total_sequence_length, longest));
}

// One generate() call: the rollouts being built, the KV blocks and the scheduler that hands out passes over them,
// and the packing buffers reused from pass to pass. A pass lists its sequences in rows_, in the order of the
// logits rows the sampler reads.
template <typename B>
class GenerationCall {
 public:
  GenerationCall(GenerationForward<B>& fwd, const ModelConfig& config, const GenerationOptions& options,
                 GenerationStats& stats, const std::vector<GenerationRequest>& requests, const StopCriteria& stop,
                 int max_len);
  GenerationCall(const GenerationCall&) = delete;
  GenerationCall& operator=(const GenerationCall&) = delete;

  Scheduler::Step schedule() { return sched_.schedule(); }
  void run_prefill(const Scheduler::Step& st);
  void run_decode(const Scheduler::Step& st);
  // Samples one token per row and applies the stop rules.
  void sample_next_tokens(const SamplerSettings& s, const DecodeFunction& decode);
  void record_routing();
  // After the last pass: the rollouts with their text, and the call's cache statistics.
  std::vector<Rollout> finish(const DecodeFunction& decode);
  int64_t finished() const { return finished_; }  // sequences that have stopped

 private:
  int slot_of(int64_t seq, int pos) const;
  int length_of(int64_t seq) const;
  std::vector<std::vector<int64_t>> split_by_first_block(const std::vector<int64_t>& d, size_t begin,
                                                         size_t end) const;
  int shared_prefix_blocks(const std::vector<int64_t>& members) const;
  void order_decode_rows(const std::vector<int64_t>& running);
  void pack_decode_batch();
  void append_sampled_token(int row, const DecodeFunction& decode);
  FinishReason finish_reason(int64_t seq, int32_t token, int32_t done, const DecodeFunction& decode);

  GenerationForward<B>& fwd_;
  const GenerationOptions& options_;
  GenerationStats& stats_;
  const StopCriteria& stop_;
  int64_t finished_ = 0;
  const int vocab_size_;
  const int64_t block_bytes_;
  const int bs_;
  const int num_blocks_;
  const int max_blocks_;  // the decode batch's block-table width
  KvBlockManager kv_;
  Scheduler sched_;
  std::vector<Rollout> out_;
  std::vector<int32_t> max_new_;  // each sequence's length limit (its request's, or the call's)
  std::vector<TextState> text_;
  std::vector<int64_t> rows_;
  std::vector<std::pair<int64_t, int64_t>> routing_rows_;  // prefill: (sequence, its first packed row)
  std::vector<int32_t> p_tokens_, p_pos_, p_slots_, p_cu_, p_gather_;
  DecodeBatch db_;
  SampleRows sr_;
};

template <typename B>
GenerationCall<B>::GenerationCall(GenerationForward<B>& fwd, const ModelConfig& config,
                                  const GenerationOptions& options, GenerationStats& stats,
                               const std::vector<GenerationRequest>& requests, const StopCriteria& stop, int max_len)
    : fwd_(fwd),
      options_(options),
      stats_(stats),
      stop_(stop),
      vocab_size_(config.vocab_size),
      block_bytes_(fwd.block_bytes(options.block_size)),
      bs_(options.block_size),
      num_blocks_(fwd.num_blocks()),
      max_blocks_(fwd.max_blocks()),
      kv_(num_blocks_, bs_),
      sched_(kv_, SchedulerOptions{options.max_num_seqs, options.max_prefill_tokens, options.shared_prefix}),
      out_(requests.size()),
      max_new_(requests.size()),
      text_(requests.size()) {
  // Consecutive requests with the same prompt form a group (group_requests makes the G samples consecutive).
  int64_t group = 0;
  for (size_t i = 0; i < requests.size(); ++i) {
    if (i == 0 || requests[i].prompt != requests[i - 1].prompt) group = int64_t(i);
    sched_.add(int64_t(i), group, int(requests[i].prompt.size()));
    Rollout& r = out_[i];
    r.prompt = requests[i].prompt;
    r.sample_index = requests[i].sample_index;
    const int64_t max_new = max_new_tokens_of(requests[i], stop);
    max_new_[i] = int32_t(std::min<int64_t>(max_new, std::numeric_limits<int32_t>::max()));
    r.completion.reserve(size_t(std::min<int64_t>(max_new, max_len)));
    r.logprobs.reserve(r.completion.capacity());
  }
}

template <typename B>
int GenerationCall<B>::slot_of(int64_t seq, int pos) const {
  const std::vector<int32_t>& t = kv_.block_table(seq);
  return t[size_t(pos / bs_)] * bs_ + pos % bs_;
}

template <typename B>
int GenerationCall<B>::length_of(int64_t seq) const {
  return int(out_[size_t(seq)].prompt.size() + out_[size_t(seq)].completion.size());
}

// Packs the computed sequences into one pass: prompt + generated tokens (a recompute after preemption); a fork
// samples from its leader's last row. Then copies the blocks the step asked for.
template <typename B>
void GenerationCall<B>::run_prefill(const Scheduler::Step& st) {
  rows_.clear();
  p_tokens_.clear(), p_pos_.clear(), p_slots_.clear(), p_gather_.clear();
  p_cu_.assign(1, 0);
  std::vector<int32_t> last_row(st.prefill.size(), -1);
  int max_seqlen = 0;
  for (size_t e = 0; e < st.prefill.size(); ++e) {
    const Scheduler::PrefillSeq& ps = st.prefill[e];
    if (ps.compute_from >= 0) {
      last_row[e] = last_row[size_t(ps.compute_from)];
      continue;
    }
    const Rollout& r = out_[size_t(ps.seq)];
    const int n = length_of(ps.seq);
    HONE_CHECK(n == ps.tokens, "prefill of ", ps.tokens, " tokens for a sequence of ", n);
    for (int p = 0; p < n; ++p) {
      p_tokens_.push_back(p < int(r.prompt.size()) ? r.prompt[size_t(p)] : r.completion[size_t(p) - r.prompt.size()]);
      p_pos_.push_back(p);
      p_slots_.push_back(slot_of(ps.seq, p));
    }
    p_cu_.push_back(int32_t(p_tokens_.size()));
    last_row[e] = int32_t(p_tokens_.size()) - 1;
    max_seqlen = std::max(max_seqlen, n);
  }
  for (size_t e = 0; e < st.prefill.size(); ++e) {
    rows_.push_back(st.prefill[e].seq);
    p_gather_.push_back(last_row[e]);
  }
  // A mixture of experts: each sequence's routing is its packed rows' (a fork's its leader's), read after sampling.
  routing_rows_.clear();
  for (size_t e = 0; e < st.prefill.size(); ++e) {
    const int32_t last = last_row[e];
    routing_rows_.push_back({st.prefill[e].seq, int64_t(last) + 1 - length_of(st.prefill[e].seq)});
  }
  fwd_.prefill(p_tokens_, p_pos_, p_slots_, p_cu_, max_seqlen, p_gather_);
  fwd_.copy_blocks(st.copies);
  stats_.prefill_tokens += int64_t(p_tokens_.size());
  ++stats_.prefill_passes;
}

template <typename B>
void GenerationCall<B>::run_decode(const Scheduler::Step& st) {
  rows_.clear();
  routing_rows_.clear();
  order_decode_rows(st.decode);
  pack_decode_batch();
  fwd_.decode(db_, options_.cuda_graphs);
  ++stats_.decode_steps;
}

// A group's members d[begin, end) by their first KV block: members recomputed after a preemption hold their own
// blocks.
template <typename B>
std::vector<std::vector<int64_t>> GenerationCall<B>::split_by_first_block(const std::vector<int64_t>& d, size_t begin,
                                                                       size_t end) const {
  std::vector<std::vector<int64_t>> subs;
  for (size_t k = begin; k < end; ++k) {
    const int32_t first = kv_.block_table(d[k]).front();
    auto it = std::find_if(subs.begin(), subs.end(),
                           [&](const std::vector<int64_t>& v) { return kv_.block_table(v[0]).front() == first; });
    if (it == subs.end()) subs.push_back({d[k]});
    else it->push_back(d[k]);
  }
  return subs;
}

// The full blocks every member shares with the first one, within the shortest member's tokens.
template <typename B>
int GenerationCall<B>::shared_prefix_blocks(const std::vector<int64_t>& members) const {
  int common = std::numeric_limits<int>::max(), shortest = std::numeric_limits<int>::max();
  for (int64_t m : members) {
    common = std::min(common, kv_.common_prefix_blocks(members[0], m));
    shortest = std::min(shortest, length_of(m));
  }
  return std::min(common, shortest / bs_);
}

// Decode rows: the rows that share prompt blocks first, each group's rows consecutive (with prefix attention, its
// bounds and prefix length in db_), then the other rows.
template <typename B>
void GenerationCall<B>::order_decode_rows(const std::vector<int64_t>& d) {
  std::vector<int64_t> rest;
  db_.group_offsets.clear();
  db_.prefix_lens.clear();
  for (size_t i = 0; i < d.size();) {
    size_t j = i + 1;
    while (j < d.size() && sched_.group(d[j]) == sched_.group(d[i])) ++j;
    for (const std::vector<int64_t>& sub : split_by_first_block(d, i, j)) {
      const int common = shared_prefix_blocks(sub);
      if (options_.shared_prefix && sub.size() >= 2 && common >= 1) {
        rows_.insert(rows_.end(), sub.begin(), sub.end());  // side by side, whichever path reads their prompt
        if (options_.prefix_attention) {
          if (db_.group_offsets.empty()) db_.group_offsets.push_back(0);
          db_.group_offsets.push_back(int32_t(rows_.size()));
          db_.prefix_lens.push_back(common * bs_);
        }
      } else {
        rest.insert(rest.end(), sub.begin(), sub.end());
      }
    }
    i = j;
  }
  stats_.shared_prefix_rows += int64_t(rows_.size());
  rows_.insert(rows_.end(), rest.begin(), rest.end());
}

// Each row feeds its last sampled token at position n - 1 and reads its blocks through its block table.
template <typename B>
void GenerationCall<B>::pack_decode_batch() {
  const int n_rows = int(rows_.size());
  db_.B = n_rows;
  db_.tokens.resize(size_t(n_rows)), db_.positions.resize(size_t(n_rows)), db_.slots.resize(size_t(n_rows));
  db_.seq_lens.resize(size_t(n_rows));
  db_.block_tables.assign(size_t(n_rows) * size_t(max_blocks_), fwd_.dummy_block());
  db_.max_seq_len = 0;
  for (int b = 0; b < n_rows; ++b) {
    const int64_t seq = rows_[size_t(b)];
    const int n = length_of(seq);
    db_.tokens[size_t(b)] = out_[size_t(seq)].completion.back();
    db_.positions[size_t(b)] = n - 1;
    db_.slots[size_t(b)] = slot_of(seq, n - 1);
    db_.seq_lens[size_t(b)] = n;
    db_.max_seq_len = std::max(db_.max_seq_len, n);
    const std::vector<int32_t>& t = kv_.block_table(seq);
    HONE_CHECK(int(t.size()) <= max_blocks_, "block table longer than the reserved ", max_blocks_);
    std::copy(t.begin(), t.end(), db_.block_tables.begin() + int64_t(b) * max_blocks_);
  }
}

template <typename B>
void GenerationCall<B>::sample_next_tokens(const SamplerSettings& s, const DecodeFunction& decode) {
  const int R = int(rows_.size());
  sr_.R = R;
  for (auto* v : {&sr_.sample_index, &sr_.position, &sr_.gen_len, &sr_.seq_len, &sr_.max_new}) v->resize(size_t(R));
  for (int r = 0; r < R; ++r) {
    const int64_t seq = rows_[size_t(r)];
    const int g = int(out_[size_t(seq)].completion.size());
    sr_.sample_index[size_t(r)] = int32_t(uint32_t(out_[size_t(seq)].sample_index));
    sr_.position[size_t(r)] = g;
    sr_.gen_len[size_t(r)] = g;
    sr_.seq_len[size_t(r)] = length_of(seq);
    sr_.max_new[size_t(r)] = max_new_[size_t(seq)];
  }
  fwd_.sample(sr_, s.params, s.seed, s.step, s.max_total_sequence_length, stop_.stop_token_ids);
  record_routing();
  for (int r = 0; r < R; ++r) append_sampled_token(r, decode);
}

// A mixture of experts: the experts of every token fed to the model, position by position (valid once sample()
// returned). A prefill (or the recompute of a preempted sequence) sets a sequence's rows from its packed rows; a
// decode step appends the row of the token it fed.
template <typename B>
void GenerationCall<B>::record_routing() {
  const int W = fwd_.routing_width();
  if (W == 0) return;
  const int32_t* h = fwd_.routing();
  for (const auto& [seq, first] : routing_rows_) {
    std::vector<uint16_t>& r = out_[size_t(seq)].routing;
    const int64_t n = length_of(seq);
    r.assign(h + first * W, h + (first + n) * W);
  }
  if (!routing_rows_.empty()) return;
  for (size_t b = 0; b < rows_.size(); ++b) {
    std::vector<uint16_t>& r = out_[size_t(rows_[b])].routing;
    r.insert(r.end(), h + int64_t(b) * W, h + int64_t(b + 1) * W);
  }
}

template <typename B>
void GenerationCall<B>::append_sampled_token(int row, const DecodeFunction& decode) {
  const int64_t seq = rows_[size_t(row)];
  Rollout& o = out_[size_t(seq)];
  const int32_t tok = fwd_.tokens()[row];
  const float logprob = fwd_.logprobs()[row];
  // The sampler finds no token, or gives a NaN logprob, only when a row's logits are NaN or Inf.
  if (tok < 0 || tok >= vocab_size_) non_finite_logits(cat("the sampler found no token: ", tok));
  if (std::isnan(logprob)) non_finite_logits(cat("the sampler's logprob of token ", tok, " is NaN"));
  o.completion.push_back(tok);
  o.logprobs.push_back(logprob);
  sched_.on_token(seq);
  ++stats_.generated_tokens;
  const FinishReason reason = finish_reason(seq, tok, fwd_.done()[row], decode);
  if (reason != FinishReason::none) {
    o.finish_reason = reason;
    sched_.finish(seq);
    ++finished_;
  }
}

// `done` is the device's verdict (1: a stop token, 2: a length limit); a stop string outranks a length limit.
template <typename B>
FinishReason GenerationCall<B>::finish_reason(int64_t seq, int32_t token, int32_t done, const DecodeFunction& decode) {
  FinishReason reason = done == 1 ? FinishReason::stop : FinishReason::none;
  if (!stop_.stop_strings.empty()) {
    TextState& ts = text_[size_t(seq)];
    const Rollout& o = out_[size_t(seq)];
    const std::string s = decode(o.completion);
    const StopDecision sd = check_stop(stop_, token, int64_t(o.completion.size()), s, ts.text_size);
    ts.text_size = s.size();
    if (reason == FinishReason::none && sd.reason == FinishReason::stop) {
      reason = FinishReason::stop;
      ts.text_end = sd.text_end;
    }
  }
  if (reason == FinishReason::none && done == 2) reason = FinishReason::length;
  return reason;
}

template <typename B>
std::vector<Rollout> GenerationCall<B>::finish(const DecodeFunction& decode) {
  HONE_CHECK(kv_.num_free() == num_blocks_, "KV blocks leaked: ", num_blocks_ - kv_.num_free(), " still in use");
  if (decode) {
    for (size_t i = 0; i < out_.size(); ++i) {
      out_[i].text = decode(out_[i].completion);
      if (text_[i].text_end != std::string::npos) out_[i].text.resize(text_[i].text_end);
    }
  }
  stats_.waves = stats_.prefill_passes;
  stats_.preemptions = sched_.preemptions();
  stats_.peak_kv_bytes = int64_t(kv_.peak_used()) * block_bytes_;
  return std::move(out_);
}

}  // namespace


// Allocates the KV cache at the first call, checks that one sequence of max_len tokens fits, and reserves the
// per-pass buffers. The cache holds kv_cache_gib; else on the GPU a fraction of the free memory now, and on the CPU
// what this call's sequences need at once (the most that run together, each of max_len tokens: no preemption), sized
// again when a later call needs more. A cache kept by release() comes back at its addresses, with the decode graphs,
// when it holds one such sequence and the device has room for it now; otherwise it is freed and sized anew.
template <typename B>
void Generator<B>::prepare_cache(const GenerationOptions& call, int64_t sequences, int max_len,
                                 const StopCriteria& stop) {
  GenerationForward<B>& fwd = *fwd_;
  const int bs = options_.block_size;
  const int64_t block_bytes = fwd.block_bytes(bs);
  const int max_blocks = (max_len + bs - 1) / bs;
  if (fwd.suspended()) {  // the same answer on every rank of a tensor-parallel group: same sizes, same requests
    if (max_blocks <= fwd.num_blocks()) fwd.resume();
    else fwd.release_all();
  }
  const bool per_call = options_.kv_cache_gib <= 0 && !B::kDeviceMemory;
  const int64_t running = std::max<int64_t>(1, std::min<int64_t>(sequences, call.max_num_seqs));
  const int64_t call_blocks = running * max_blocks;
  if (per_call && fwd.has_cache() && fwd.num_blocks() < call_blocks) fwd.release_all();
  if (!fwd.has_cache()) {
    double bytes = 0;
    if (options_.kv_cache_gib > 0) bytes = options_.kv_cache_gib * double(int64_t(1) << 30);
    else if constexpr (B::kDeviceMemory) bytes = options_.kv_cache_memory_fraction * double(B::free_memory_bytes(fwd.exec()));
    else bytes = double(call_blocks) * double(block_bytes);
    int64_t nb = std::min<int64_t>(int64_t(bytes / double(block_bytes)), std::numeric_limits<int32_t>::max() / bs);
    // The ranks of a tensor-parallel group schedule the same sequences: they need the same number of blocks.
    if (TensorParallelGroup<B>* tp = fwd.tensor_parallel()) nb = tp->min_over_group(nb);
    HONE_USER_CHECK(nb >= 1, "the KV cache (", bytes / double(int64_t(1) << 30), " GiB) holds no block of ",
                    block_bytes, " bytes: raise generation.kv_cache_gib or kv_cache_memory_fraction");
    fwd.allocate_cache(int(nb), bs);
  }
  const int num_blocks = fwd.num_blocks();
  HONE_USER_CHECK(max_blocks <= num_blocks, "the KV cache holds ", int64_t(num_blocks) * bs,
                  " tokens, fewer than one sequence of up to ", max_len,
                  " tokens: raise generation.kv_cache_gib or kv_cache_memory_fraction");
  fwd.reserve(call.max_num_seqs, max_blocks, std::max(call.max_prefill_tokens, max_len),
              int(stop.stop_token_ids.size()));
}

template <typename B>
Generator<B>::Generator(const ModelConfig& config, const ParamLayout& layout, const A* weights,
                        const typename B::Exec& x, GenerationOptions options, TensorParallelGroup<B>* tp,
                        ExpertParallelGroup<B>* ep, ExpertLockstep* lockstep)
    : config_(config), options_(options) {
  const int bs = options_.block_size;
  HONE_USER_CHECK(bs > 0 && (bs & (bs - 1)) == 0, "KV block size must be a power of two, got ", bs);
  HONE_USER_CHECK(options_.max_num_seqs > 0, "max_num_seqs must be > 0, got ", options_.max_num_seqs);
  HONE_USER_CHECK(options_.max_prefill_tokens > 0, "max_prefill_tokens must be > 0, got ",
                  options_.max_prefill_tokens);
  HONE_USER_CHECK(options_.kv_cache_gib >= 0, "kv_cache_gib must be >= 0, got ", options_.kv_cache_gib);
  HONE_USER_CHECK(options_.kv_cache_gib > 0 ||
                      (options_.kv_cache_memory_fraction > 0 && options_.kv_cache_memory_fraction < 1),
                  "kv_cache_memory_fraction must be in (0, 1), got ", options_.kv_cache_memory_fraction);
  fwd_ = std::make_unique<GenerationForward<B>>(config_, layout, weights, x, tp, options_.keep_graphs, ep, lockstep);
}

template <typename B>
Generator<B>::~Generator() = default;

template <typename B>
void Generator<B>::release() {
  fwd_->release();
}

template <typename B>
std::vector<Rollout> Generator<B>::generate(const std::vector<GenerationRequest>& requests,
                                            const SamplingParams& sampling, const StopCriteria& stop, uint64_t seed,
                                            uint32_t step, int max_total_sequence_length,
                                            const DecodeFunction& decode) {
  validate_generation_call(requests, sampling, stop, max_total_sequence_length, bool(decode), config_.vocab_size);
  const auto call_start = Clock::now();  // the tail's clock: cache allocation and graph capture count, as in the phase
  stats_ = GenerationStats{};
  stats_.sequences = int64_t(requests.size());
  if (requests.empty() && !fwd_->splits_experts()) return {};

  // Nothing of its own to generate with the experts split: buffers for the idle passes (the group's rows) all the same.
  const int max_len = requests.empty() ? 2 : longest_sequence(requests, stop, max_total_sequence_length);
  // In host memory (freed by release() every step) the buffers hold what this call runs: no more rows than it has
  // sequences, no longer prefills than its prompts (a group's once). Device memory keeps the configured sizes, so
  // that the kept addresses and graphs fit every step.
  GenerationOptions call_options = options_;
  if constexpr (!B::kDeviceMemory) {
    int64_t prompt_tokens = 0;
    for (size_t i = 0; i < requests.size(); ++i)
      if (i == 0 || requests[i].prompt != requests[i - 1].prompt) prompt_tokens += int64_t(requests[i].prompt.size());
    call_options.max_num_seqs =
        int(std::max<int64_t>(1, std::min<int64_t>(options_.max_num_seqs, int64_t(requests.size()))));
    call_options.max_prefill_tokens =
        int(std::max<int64_t>(max_len, std::min<int64_t>(options_.max_prefill_tokens, prompt_tokens)));
  }
  prepare_cache(call_options, int64_t(requests.size()), max_len, stop);
  stats_.kv_capacity_tokens = int64_t(fwd_->num_blocks()) * options_.block_size;
  const int64_t replays0 = fwd_->graph_replays(), captures0 = fwd_->graph_captures();
  const SamplerSettings sampler{sampling, seed, step, max_total_sequence_length};

  GenerationCall<B> call(*fwd_, config_, call_options, stats_, requests, stop, max_len);
  GenerationTimeline timeline;
  timeline.sequences = stats_.sequences;
  timeline.max_num_seqs = options_.max_num_seqs;
  for (;;) {
    const auto t0 = Clock::now();
    const Scheduler::Step st = call.schedule();
    if (st.kind == Scheduler::Step::Kind::none) break;
    const bool prefill = st.kind == Scheduler::Step::Kind::prefill;
    if (prefill) call.run_prefill(st);
    else call.run_decode(st);
    call.sample_next_tokens(sampler, decode);
    (prefill ? stats_.prefill_seconds : stats_.decode_seconds) += seconds_since(t0);
    // The sampler's tokens are on the host by now: the clock has seen the pass end on the device.
    if (!prefill) timeline.decode_step(int(st.decode.size()));
    timeline.pass(seconds_since(call_start), call.finished(), stats_.generated_tokens);
    if (progress_) progress_({call.finished(), stats_.sequences, stats_.generated_tokens});
  }
  const int64_t idle = fwd_->finish();  // the experts split: idle passes until the expert-parallel group is done
  std::vector<Rollout> out = call.finish(decode);
  stats_.cuda_graph_replays = fwd_->graph_replays() - replays0;
  stats_.cuda_graph_captures = fwd_->graph_captures() - captures0;
  timeline.end(seconds_since(call_start), stats_.generated_tokens);
  stats_.tail = generation_tail(timeline);
  stats_.tail.idle_passes = idle;
  return out;
}

template <typename B>
std::unique_ptr<Generator<B>> make_generator(const ModelConfig& config, const ShardLayout& layout,
                                             typename B::Act* weights, const typename B::Exec& x,
                                             GenerationOptions options, TensorParallelGroup<B>* tp,
                                             ExpertParallelGroup<B>* ep, ExpertLockstep* lockstep) {
  options.max_num_seqs = std::max(1, std::min(B::kMaxDecodeRows, options.max_num_seqs));
  return std::make_unique<Generator<B>>(config, layout.param_layout(), weights, x, options, tp, ep, lockstep);
}

std::unique_ptr<Generator<CpuBackend>> make_cpu_generator(const ModelConfig& config, const ModelWeights& weights,
                                                          GenerationOptions options, TensorParallelGroup<CpuBackend>* tp,
                                                          ExpertParallelGroup<CpuBackend>* ep,
                                                          ExpertLockstep* lockstep) {
  return std::make_unique<Generator<CpuBackend>>(config, param_layout_of(weights), weights.flat.f32(),
                                                 CpuBackend::Exec{}, options, tp, ep, lockstep);
}

#define INSTANTIATE(B)                                                                                          \
  template class Generator<B>;                                                                                  \
  template std::unique_ptr<Generator<B>> make_generator<B>(const ModelConfig&, const ShardLayout&, B::Act*,    \
                                                           const B::Exec&, GenerationOptions,                   \
                                                           TensorParallelGroup<B>*, ExpertParallelGroup<B>*,    \
                                                           ExpertLockstep*);
HONE_FOR_EACH_BACKEND(INSTANTIATE)
#undef INSTANTIATE

}  // namespace hone
