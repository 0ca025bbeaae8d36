// The CPU generation engine (behaviour in cpu_generator.h, doc/generation.md).
#include "generation/cpu_generator.h"

#include <algorithm>
#include <chrono>
#include <map>
#include <span>

#include "parallel/shard_weights.h"
#include "runtime/error.h"

namespace hone {

struct CpuGenerator::Sequence {
  int slot = 0;          // KV cache slot in the wave (also the request's offset in the wave)
  int prompt_len = 0;
  int64_t max_new = 0;   // the request's length limit
  bool done = false;
  size_t text_size = 0;  // bytes of decoded completion text already checked for stop strings
  size_t text_end = std::string::npos;
};

namespace {

using Clock = std::chrono::steady_clock;

double seconds_since(Clock::time_point t0) { return std::chrono::duration<double>(Clock::now() - t0).count(); }

}  // namespace

CpuGenerator::CpuGenerator(const ModelConfig& config, const ModelWeights& weights, GenerationOptions options,
                           TensorParallel* tp, ExpertParallel* ep, ExpertLockstep* lockstep)
    : config_(config), weights_(weights), options_(options), forward_(config, tp, ep, lockstep) {
  HONE_USER_CHECK(options_.max_batch > 0, "generation max_batch must be > 0, got ", options_.max_batch);
}

std::vector<Rollout> CpuGenerator::generate(const std::vector<GenerationRequest>& requests,
                                            const SamplingParams& sampling, const StopCriteria& stop, uint64_t seed,
                                            uint32_t step, int max_total_sequence_length,
                                            const DecodeFunction& decode) {
  validate_generation_call(requests, sampling, stop, max_total_sequence_length, bool(decode), config_.vocab_size);
  sampling_ = &sampling;
  stop_ = &stop;
  decode_ = &decode;
  seed_ = seed;
  step_ = step;
  max_total_ = max_total_sequence_length;
  stats_ = GenerationStats{};
  stats_.sequences = int64_t(requests.size());
  finished_ = 0;
  call_start_ = Clock::now();
  timeline_ = GenerationTimeline{};
  timeline_.sequences = stats_.sequences;
  timeline_.max_num_seqs = options_.max_batch;

  std::vector<Rollout> out(requests.size());
  for (size_t b = 0; b < requests.size(); b += size_t(options_.max_batch))
    generate_wave(requests, b, std::min(requests.size(), b + size_t(options_.max_batch)), out);
  const int64_t idle = forward_.finish(weights_);
  timeline_.end(seconds_since(call_start_), stats_.generated_tokens);
  stats_.tail = generation_tail(timeline_);
  stats_.tail.idle_passes = idle;
  return out;
}

void CpuGenerator::generate_wave(const std::vector<GenerationRequest>& requests, size_t begin, size_t end,
                                 std::vector<Rollout>& out) {
  const int n = int(end - begin);
  const int V = config_.vocab_size;
  ++stats_.waves;
  reshape_cache(requests, begin, end);

  // Prefill each distinct prompt once, into the slot of its first request; the others copy its K and V.
  const auto t0 = Clock::now();
  const std::vector<int> distinct_of = prefill_distinct_prompts(requests, begin, end);
  std::vector<Sequence> seqs = start_sequences(requests, begin, end, distinct_of, out);
  stats_.prefill_seconds += seconds_since(t0);

  // The first token of every sample comes from its prompt's last-token logits; then one batched decode step per
  // token for the sequences still running.
  const auto t1 = Clock::now();
  for (int i = 0; i < n; ++i)
    take_token(seqs[size_t(i)], out[begin + size_t(i)], logits_.data() + int64_t(distinct_of[size_t(i)]) * V);
  end_pass();
  decode_until_done(seqs, begin, out);
  stats_.decode_seconds += seconds_since(t1);

  if (*decode_) {
    for (int i = 0; i < n; ++i) {
      Rollout& r = out[begin + size_t(i)];
      r.text = (*decode_)(r.completion);
      if (seqs[size_t(i)].text_end != std::string::npos) r.text.resize(seqs[size_t(i)].text_end);
    }
  }
}

// The cache holds what this wave can reach: the longest prompt plus its request's max_new_tokens, capped by the
// total length.
void CpuGenerator::reshape_cache(const std::vector<GenerationRequest>& requests, size_t begin, size_t end) {
  int64_t longest = 0;
  for (size_t i = begin; i < end; ++i)
    longest = std::max<int64_t>(longest, int64_t(requests[i].prompt.size()) + max_new_tokens_of(requests[i], *stop_));
  const int max_len = int(std::min<int64_t>(max_total_, longest));
  cache_.reshape(config_.num_hidden_layers, int(end - begin), max_len, forward_.shape().kv_heads, config_.head_dim);
  stats_.peak_kv_bytes = std::max(stats_.peak_kv_bytes, cache_.bytes());
}

// One prefill pass over the wave's distinct prompts, each into the slot of its first request (kept in slots_);
// returns, for each request, the index of its distinct prompt (its row of logits_).
std::vector<int> CpuGenerator::prefill_distinct_prompts(const std::vector<GenerationRequest>& requests, size_t begin,
                                                        size_t end) {
  const int n = int(end - begin);
  const int V = config_.vocab_size;
  std::map<std::vector<int32_t>, int> first_of;  // prompt -> index among the distinct prompts
  std::vector<int> distinct_of(static_cast<size_t>(n));       // request -> its distinct prompt
  tokens_.clear();
  slots_.clear();
  cu_seqlens_.assign(1, 0);
  for (int i = 0; i < n; ++i) {
    const std::vector<int32_t>& prompt = requests[begin + size_t(i)].prompt;
    auto [it, inserted] = first_of.try_emplace(prompt, int(slots_.size()));
    distinct_of[size_t(i)] = it->second;
    if (!inserted) continue;
    tokens_.insert(tokens_.end(), prompt.begin(), prompt.end());
    cu_seqlens_.push_back(int32_t(tokens_.size()));
    slots_.push_back(i);
  }
  const int num_distinct = int(slots_.size());
  if (logits_.size() < size_t(n) * size_t(V)) logits_.resize(size_t(n) * size_t(V));  // distinct prompts <= n
  forward_.prefill(weights_, cache_, tokens_.data(), cu_seqlens_.data(), slots_.data(), num_distinct, logits_.data());
  stats_.prefill_tokens += int64_t(tokens_.size());
  prefill_routing_ = forward_.routing();
  return distinct_of;
}

// One sequence per request in its own slot; a request that shares its prompt with an earlier one copies that one's
// K and V.
std::vector<CpuGenerator::Sequence> CpuGenerator::start_sequences(const std::vector<GenerationRequest>& requests,
                                                                  size_t begin, size_t end,
                                                                  const std::vector<int>& distinct_of,
                                                                  std::vector<Rollout>& out) {
  const int n = int(end - begin);
  std::vector<Sequence> seqs(static_cast<size_t>(n));
  for (int i = 0; i < n; ++i) {
    Sequence& s = seqs[size_t(i)];
    s.slot = i;
    s.prompt_len = int(requests[begin + size_t(i)].prompt.size());
    s.max_new = max_new_tokens_of(requests[begin + size_t(i)], *stop_);
    const int src = slots_[size_t(distinct_of[size_t(i)])];
    if (src != i) cache_.copy_prefix(src, i, s.prompt_len);
    Rollout& r = out[begin + size_t(i)];
    r.prompt = requests[begin + size_t(i)].prompt;
    r.sample_index = requests[begin + size_t(i)].sample_index;
    // A mixture of experts: the prompt's routing, from its distinct prompt's prefill rows.
    if (const int W = forward_.routing_width(); W > 0) {
      const int64_t first = int64_t(cu_seqlens_[size_t(distinct_of[size_t(i)])]) * W;
      r.routing.assign(prefill_routing_.begin() + first, prefill_routing_.begin() + first + int64_t(s.prompt_len) * W);
    }
    r.completion.reserve(size_t(s.max_new));
    r.logprobs.reserve(size_t(s.max_new));
  }
  return seqs;
}

void CpuGenerator::decode_until_done(std::vector<Sequence>& seqs, size_t begin, std::vector<Rollout>& out) {
  const int n = int(seqs.size());
  const int V = config_.vocab_size;
  for (;;) {
    active_.clear();
    tokens_.clear();
    positions_.clear();
    slots_.clear();
    for (int i = 0; i < n; ++i) {
      const Sequence& s = seqs[size_t(i)];
      if (s.done) continue;
      const Rollout& r = out[begin + size_t(i)];
      active_.push_back(i);
      tokens_.push_back(r.completion.back());
      positions_.push_back(int32_t(s.prompt_len + int(r.completion.size()) - 1));
      slots_.push_back(s.slot);
    }
    if (active_.empty()) break;
    const int B = int(active_.size());
    forward_.decode(weights_, cache_, tokens_.data(), positions_.data(), slots_.data(), B, logits_.data());
    ++stats_.decode_steps;
    if (const int W = forward_.routing_width(); W > 0)
      for (int b = 0; b < B; ++b) {
        std::vector<uint16_t>& rt = out[begin + size_t(active_[size_t(b)])].routing;
        const int32_t* row = forward_.routing().data() + int64_t(b) * W;
        rt.insert(rt.end(), row, row + W);
      }
    timeline_.decode_step(B);
    for (int b = 0; b < B; ++b)
      take_token(seqs[size_t(active_[size_t(b)])], out[begin + size_t(active_[size_t(b)])],
                 logits_.data() + int64_t(b) * V);
    end_pass();
  }
}

void CpuGenerator::take_token(Sequence& seq, Rollout& r, const float* logits_row) {
  const uint32_t position = uint32_t(r.completion.size());
  const SampledToken t =
      sample_token(std::span<const float>(logits_row, size_t(config_.vocab_size)), *sampling_, seed_, step_,
                   uint32_t(r.sample_index), position);
  r.completion.push_back(t.token);
  r.logprobs.push_back(t.logprob);
  ++stats_.generated_tokens;

  // Stop strings need the text; without them check_stop never looks at it, so nothing is decoded per token.
  std::string text;
  if (!stop_->stop_strings.empty()) text = (*decode_)(r.completion);
  StopDecision d = check_stop(*stop_, t.token, int64_t(r.completion.size()), text, seq.text_size);
  // The request's own limit comes last, as the call's max_new_tokens does in check_stop.
  if (!d.stopped() && int64_t(r.completion.size()) >= seq.max_new) d.reason = FinishReason::length;
  seq.text_size = text.size();
  if (d.stopped()) {
    r.finish_reason = d.reason;
    seq.text_end = d.text_end;
    seq.done = true;
    ++finished_;
  } else if (seq.prompt_len + int64_t(r.completion.size()) >= max_total_) {
    r.finish_reason = FinishReason::length;
    seq.done = true;
    ++finished_;
  }
}

void CpuGenerator::end_pass() {
  timeline_.pass(seconds_since(call_start_), finished_, stats_.generated_tokens);
  if (progress_) progress_({finished_, stats_.sequences, stats_.generated_tokens});
}

std::unique_ptr<CpuGenerator> make_generator(const ModelConfig& config, const ShardLayout& layout, float* weights,
                                             const CpuBackend::Exec&, const GeneratorSettings& settings,
                                             TensorParallel* tp, ExpertParallel* ep, ExpertLockstep* lockstep) {
  GenerationOptions go;
  go.max_batch = std::max(1, std::min(256, settings.max_seqs));
  return std::make_unique<CpuGenerator>(config, shard_weights_view(layout, config, weights), go, tp, ep, lockstep);
}

}  // namespace hone
