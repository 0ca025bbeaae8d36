// The GPU generation engine's host loop: scheduling, packing of prefill and decode inputs, stop rules (see
// gpu_generator.h and doc/generation-gpu.md).
#include "generation/gpu_generator.h"

#if HONE_CUDA

#include <algorithm>
#include <chrono>
#include <limits>
#include <string>

#include "cuda/check.h"
#include "generation/gpu_generation_forward.h"
#include "generation/kv_block_manager.h"
#include "generation/scheduler.h"
#include "runtime/error.h"

namespace hone {
namespace {

using Clock = std::chrono::steady_clock;
double seconds_since(Clock::time_point t0) { return std::chrono::duration<double>(Clock::now() - t0).count(); }

struct TextState {
  size_t text_size = 0;
  size_t text_end = std::string::npos;
};

}  // namespace

GpuGenerator::GpuGenerator(const ModelConfig& config, const ParamLayout& layout, const cuda::bf16* weights,
                           const cuda::GpuContext& ctx, GpuGenerationOptions options)
    : config_(config), options_(options), ctx_(ctx) {
  const int bs = options_.block_size;
  HONE_USER_CHECK(bs > 0 && (bs & (bs - 1)) == 0, "KV block size must be a power of two, got ", bs);
  HONE_USER_CHECK(options_.max_num_seqs > 0, "max_num_seqs must be > 0, got ", options_.max_num_seqs);
  HONE_USER_CHECK(options_.max_prefill_tokens > 0, "max_prefill_tokens must be > 0, got ",
                  options_.max_prefill_tokens);
  HONE_USER_CHECK(options_.kv_cache_gib >= 0, "kv_cache_gib must be >= 0, got ", options_.kv_cache_gib);
  HONE_USER_CHECK(options_.kv_cache_gib > 0 ||
                      (options_.kv_cache_memory_fraction > 0 && options_.kv_cache_memory_fraction < 1),
                  "kv_cache_memory_fraction must be in (0, 1), got ", options_.kv_cache_memory_fraction);
  fwd_ = std::make_unique<GpuGenerationForward>(config_, layout, weights, ctx_);
}

GpuGenerator::~GpuGenerator() = default;

void GpuGenerator::release() { fwd_->release(); }

std::vector<Rollout> GpuGenerator::generate(const std::vector<GenerationRequest>& requests,
                                            const SamplingParams& sampling, const StopCriteria& stop, uint64_t seed,
                                            uint32_t step, int max_total_sequence_length,
                                            const DecodeFunction& decode) {
  validate_generation_call(requests, sampling, stop, max_total_sequence_length, bool(decode), config_.vocab_size);
  int64_t longest = 0;
  for (const GenerationRequest& r : requests) longest = std::max<int64_t>(longest, int64_t(r.prompt.size()));
  stats_ = GpuGenerationStats{};
  stats_.sequences = int64_t(requests.size());
  std::vector<Rollout> out(requests.size());
  if (requests.empty()) return out;

  // The longest a sequence can get, and the cache it needs.
  const int bs = options_.block_size;
  const int max_len = int(std::min<int64_t>(max_total_sequence_length, longest + stop.max_new_tokens));
  const int64_t block_bytes = GpuGenerationForward::block_bytes(config_, bs);
  if (!fwd_->has_cache()) {
    size_t free_b = 0, total_b = 0;
    CUDA_CHECK(cudaMemGetInfo(&free_b, &total_b));
    const double bytes = options_.kv_cache_gib > 0 ? options_.kv_cache_gib * double(int64_t(1) << 30)
                                                   : options_.kv_cache_memory_fraction * double(free_b);
    const int64_t nb = std::min<int64_t>(int64_t(bytes / double(block_bytes)), std::numeric_limits<int32_t>::max() / bs);
    HONE_USER_CHECK(nb >= 1, "the KV cache (", bytes / double(int64_t(1) << 30), " GiB) holds no block of ",
                    block_bytes, " bytes: raise generation.kv_cache_gib or kv_cache_memory_fraction");
    fwd_->allocate_cache(int(nb), bs);
  }
  const int num_blocks = fwd_->num_blocks();
  const int max_blocks = (max_len + bs - 1) / bs;
  HONE_USER_CHECK(max_blocks <= num_blocks, "the KV cache holds ", int64_t(num_blocks) * bs,
                  " tokens, fewer than one sequence of up to ", max_len,
                  " tokens: raise generation.kv_cache_gib or kv_cache_memory_fraction");
  fwd_->reserve(options_.max_num_seqs, max_blocks, std::max(options_.max_prefill_tokens, max_len),
                int(stop.stop_token_ids.size()));
  const int MB = fwd_->max_blocks();
  stats_.kv_capacity_tokens = int64_t(num_blocks) * bs;
  const int64_t replays0 = fwd_->graph_replays();

  KvBlockManager kv(num_blocks, bs);
  Scheduler sched(kv, SchedulerOptions{options_.max_num_seqs, options_.max_prefill_tokens, options_.shared_prefix});
  // Consecutive requests with the same prompt form a group (group_requests makes the G samples consecutive).
  int64_t group = 0;
  for (size_t i = 0; i < requests.size(); ++i) {
    if (i == 0 || requests[i].prompt != requests[i - 1].prompt) group = int64_t(i);
    sched.add(int64_t(i), group, int(requests[i].prompt.size()));
    Rollout& r = out[i];
    r.prompt = requests[i].prompt;
    r.sample_index = requests[i].sample_index;
    r.completion.reserve(size_t(std::min<int64_t>(stop.max_new_tokens, max_len)));
    r.logprobs.reserve(r.completion.capacity());
  }
  std::vector<TextState> text(requests.size());

  cuda::GpuSamplingParams gp;
  gp.temperature = sampling.temperature;
  gp.top_k = sampling.top_k >= config_.vocab_size ? 0 : int(sampling.top_k);
  gp.top_p = sampling.top_p;
  gp.min_p = sampling.min_p;
  gp.greedy = sampling.greedy;
  const int32_t max_new = int32_t(std::min<int64_t>(stop.max_new_tokens, std::numeric_limits<int32_t>::max()));

  auto slot_of = [&](int64_t seq, int pos) {
    const std::vector<int32_t>& t = kv.block_table(seq);
    return t[size_t(pos / bs)] * bs + pos % bs;
  };
  auto length_of = [&](int64_t seq) { return int(out[size_t(seq)].prompt.size() + out[size_t(seq)].completion.size()); };

  std::vector<int64_t> rows;
  std::vector<int32_t> p_tokens, p_pos, p_slots, p_cu, p_gather;
  DecodeBatch db;
  SampleRows sr;
  for (;;) {
    const auto t0 = Clock::now();
    Scheduler::Step st = sched.schedule();
    if (st.kind == Scheduler::Step::Kind::none) break;
    rows.clear();
    if (st.kind == Scheduler::Step::Kind::prefill) {
      // Pack the computed sequences: prompt + generated tokens (a recompute after preemption).
      p_tokens.clear(), p_pos.clear(), p_slots.clear(), p_gather.clear();
      p_cu.assign(1, 0);
      std::vector<int32_t> last_row(st.prefill.size(), -1);
      int max_seqlen = 0;
      for (size_t e = 0; e < st.prefill.size(); ++e) {
        const Scheduler::PrefillSeq& ps = st.prefill[e];
        if (ps.compute_from >= 0) {
          last_row[e] = last_row[size_t(ps.compute_from)];
          continue;
        }
        const Rollout& r = out[size_t(ps.seq)];
        const int n = length_of(ps.seq);
        HONE_CHECK(n == ps.tokens, "prefill of ", ps.tokens, " tokens for a sequence of ", n);
        for (int p = 0; p < n; ++p) {
          p_tokens.push_back(p < int(r.prompt.size()) ? r.prompt[size_t(p)] : r.completion[size_t(p) - r.prompt.size()]);
          p_pos.push_back(p);
          p_slots.push_back(slot_of(ps.seq, p));
        }
        p_cu.push_back(int32_t(p_tokens.size()));
        last_row[e] = int32_t(p_tokens.size()) - 1;
        max_seqlen = std::max(max_seqlen, n);
      }
      for (size_t e = 0; e < st.prefill.size(); ++e) {
        rows.push_back(st.prefill[e].seq);
        p_gather.push_back(last_row[e]);
      }
      fwd_->prefill(p_tokens, p_pos, p_slots, p_cu, max_seqlen, p_gather);
      fwd_->copy_blocks(st.copies);
      stats_.prefill_tokens += int64_t(p_tokens.size());
      ++stats_.prefill_passes;
    } else {
      // Decode rows: shared-prefix groups first (each group's rows consecutive), then the other rows.
      std::vector<int64_t> rest;
      db.group_offsets.clear();
      db.prefix_lens.clear();
      const std::vector<int64_t>& d = st.decode;
      for (size_t i = 0; i < d.size();) {
        size_t j = i + 1;
        while (j < d.size() && sched.group(d[j]) == sched.group(d[i])) ++j;
        // Members recomputed after a preemption hold their own blocks: sub-groups by the first block.
        std::vector<std::vector<int64_t>> subs;
        for (size_t k = i; k < j; ++k) {
          const int32_t first = kv.block_table(d[k]).front();
          auto it = std::find_if(subs.begin(), subs.end(),
                                 [&](const std::vector<int64_t>& v) { return kv.block_table(v[0]).front() == first; });
          if (it == subs.end()) subs.push_back({d[k]});
          else it->push_back(d[k]);
        }
        for (const std::vector<int64_t>& sub : subs) {
          int common = std::numeric_limits<int>::max(), shortest = std::numeric_limits<int>::max();
          for (int64_t m : sub) {
            common = std::min(common, kv.common_prefix_blocks(sub[0], m));
            shortest = std::min(shortest, length_of(m));
          }
          common = std::min(common, shortest / bs);
          if (options_.shared_prefix && sub.size() >= 2 && common >= 1) {
            if (db.group_offsets.empty()) db.group_offsets.push_back(0);
            rows.insert(rows.end(), sub.begin(), sub.end());
            db.group_offsets.push_back(int32_t(rows.size()));
            db.prefix_lens.push_back(common * bs);
          } else {
            rest.insert(rest.end(), sub.begin(), sub.end());
          }
        }
        i = j;
      }
      stats_.shared_prefix_rows += int64_t(rows.size());
      rows.insert(rows.end(), rest.begin(), rest.end());
      const int B = int(rows.size());
      db.B = B;
      db.tokens.resize(size_t(B)), db.positions.resize(size_t(B)), db.slots.resize(size_t(B));
      db.seq_lens.resize(size_t(B));
      db.block_tables.assign(size_t(B) * size_t(MB), fwd_->dummy_block());
      db.max_seq_len = 0;
      for (int b = 0; b < B; ++b) {
        const int64_t seq = rows[size_t(b)];
        const int n = length_of(seq);  // the last sampled token is fed at position n - 1
        db.tokens[size_t(b)] = out[size_t(seq)].completion.back();
        db.positions[size_t(b)] = n - 1;
        db.slots[size_t(b)] = slot_of(seq, n - 1);
        db.seq_lens[size_t(b)] = n;
        db.max_seq_len = std::max(db.max_seq_len, n);
        const std::vector<int32_t>& t = kv.block_table(seq);
        HONE_CHECK(int(t.size()) <= MB, "block table longer than the reserved ", MB);
        std::copy(t.begin(), t.end(), db.block_tables.begin() + int64_t(b) * MB);
      }
      fwd_->decode(db, options_.cuda_graphs);
      ++stats_.decode_steps;
    }

    // Sample one token per row and apply the stop rules.
    const int R = int(rows.size());
    sr.R = R;
    for (auto* v : {&sr.sample_index, &sr.position, &sr.gen_len, &sr.seq_len, &sr.max_new}) v->resize(size_t(R));
    for (int r = 0; r < R; ++r) {
      const int64_t seq = rows[size_t(r)];
      const int g = int(out[size_t(seq)].completion.size());
      sr.sample_index[size_t(r)] = int32_t(uint32_t(out[size_t(seq)].sample_index));
      sr.position[size_t(r)] = g;
      sr.gen_len[size_t(r)] = g;
      sr.seq_len[size_t(r)] = length_of(seq);
      sr.max_new[size_t(r)] = max_new;
    }
    fwd_->sample(sr, gp, seed, step, max_total_sequence_length, stop.stop_token_ids);
    for (int r = 0; r < R; ++r) {
      const int64_t seq = rows[size_t(r)];
      Rollout& o = out[size_t(seq)];
      const int32_t tok = fwd_->tokens()[r];
      HONE_CHECK(tok >= 0 && tok < config_.vocab_size, "sampled token ", tok, " outside the vocabulary");
      o.completion.push_back(tok);
      o.logprobs.push_back(fwd_->logprobs()[r]);
      sched.on_token(seq);
      ++stats_.generated_tokens;
      const int32_t done = fwd_->done()[r];
      FinishReason reason = done == 1 ? FinishReason::stop : FinishReason::none;
      if (!stop.stop_strings.empty()) {  // on the host, as the CPU engine does
        TextState& ts = text[size_t(seq)];
        const std::string s = decode(o.completion);
        const StopDecision sd = check_stop(stop, tok, int64_t(o.completion.size()), s, ts.text_size);
        ts.text_size = s.size();
        if (reason == FinishReason::none && sd.reason == FinishReason::stop) {
          reason = FinishReason::stop;
          ts.text_end = sd.text_end;
        }
      }
      if (reason == FinishReason::none && done == 2) reason = FinishReason::length;
      if (reason != FinishReason::none) {
        o.finish_reason = reason;
        sched.finish(seq);
      }
    }
    (st.kind == Scheduler::Step::Kind::prefill ? stats_.prefill_seconds : stats_.decode_seconds) += seconds_since(t0);
  }
  HONE_CHECK(kv.num_free() == num_blocks, "KV blocks leaked: ", num_blocks - kv.num_free(), " still in use");

  if (decode) {
    for (size_t i = 0; i < out.size(); ++i) {
      out[i].text = decode(out[i].completion);
      if (text[i].text_end != std::string::npos) out[i].text.resize(text[i].text_end);
    }
  }
  stats_.waves = stats_.prefill_passes;
  stats_.preemptions = sched.preemptions();
  stats_.peak_kv_bytes = int64_t(kv.peak_used()) * block_bytes;
  stats_.cuda_graph_replays = fwd_->graph_replays() - replays0;
  return out;
}

}  // namespace hone

#endif  // HONE_CUDA
