// The five phases of one GRPO step (doc/grpo.md, "One step"): generation, reward, logprob, training, refit.
#include <algorithm>
#include <cmath>
#include <cstring>

#include "comm/host_collectives.h"
#include "rl/grpo_trainer_state.h"
#include "rl/micro_batch_progress.h"
#include "rl/rollout_exchange.h"
#include "runtime/error.h"
#include "runtime/log.h"
#include "runtime/progress.h"

namespace hone::rl {

void GrpoTrainer::set_progress(ProgressLine* progress) {
  progress_ = progress;
  GenerationProgressFn fn;
  if (progress) fn = [progress](const GenerationProgress& g) { progress->update(g.finished, g.total, g.generated_tokens); };
  roles_.generator->set_generation_progress(std::move(fn));
}

StepRow GrpoTrainer::step(int64_t step, int64_t num_samples) {
  timer_.clear();
  roles_.engine->reset_memory();
  StepState st;
  st.step = step;
  StepRow row(step);
  {
    auto total = timer_.scope("total");
    phase_generation(st);
    phase_reward(st);
    phase_logprob(st);
    phase_training(st);
    phase_refit(st);
  }
  record(st, row, num_samples);
  return row;
}

namespace {

bool group_has_signal(const std::vector<GrpoSample>& samples, size_t begin, size_t G) {
  for (size_t g = 1; g < G; ++g)
    if (samples[begin + g].reward != samples[begin].reward) return true;
  return false;
}

// A value of every generation replica, in replica order (its members hold the same: the leader's is taken).
std::vector<int64_t> per_replica(Comm& world, const GenerationLayout& gen, int64_t v) {
  const std::vector<int64_t> all = all_gather_value(world, v);
  std::vector<int64_t> out;
  for (int j = 0; j < gen.replicas(); ++j) out.push_back(all[size_t(gen.leader(j))]);
  return out;
}

}  // namespace

// Generation: this replica's share of the step's prompts (parallel/generation_layout.h: the data-parallel ranks'
// share, when generation runs on the training layout), G samples each, every sample keyed by its global index so
// a rollout does not depend on the layout. Dynamic sampling scores each batch at once and keeps only groups with
// signal, drawing more batches until num_prompts_per_step groups are collected (over all replicas) or the batch
// limit is reached. A generation layout of its own then moves the samples to the ranks that train them.
void GrpoTrainer::phase_generation(StepState& st) {
  const int64_t P = s_.prompts_per_step, G = s_.generations;
  const int rank = gen_.replica(ps_.world_rank()), size = gen_.replicas();
  const data::ShardRange shard = data::shard_range(P, rank, size);
  const DecodeFunction decode = [this](const std::vector<int32_t>& ids) { return tok_->decode(ids, true); };
  const int64_t max_batches = s_.dynamic_sampling ? s_.dynamic_max_batches : 1;
  timer_.start("generation");
  for (int64_t b = 0; b < max_batches; ++b) {
    std::vector<data::Prompt> batch = task_.prompts->next_batch(P, rank, size);
    ++st.batches;
    std::vector<GenerationRequest> requests;
    std::vector<int64_t> global_prompt;  // per kept prompt of this batch
    const size_t first_prompt = st.prompts.size();
    for (size_t i = 0; i < batch.size(); ++i) {
      std::vector<int32_t> ids = encode_prompt(batch[i]);
      if (ids.empty() || int64_t(ids.size()) + s_.max_new_tokens > s_.max_total_sequence_length) {
        ++st.prompts_too_long;
        continue;
      }
      const int64_t gp = b * P + shard.begin + int64_t(i);
      // A drawn response length (benchmarks) is keyed by the prompt's stream index, not its place in this rank's
      // share: the same on every layout.
      for (int64_t g = 0; g < G; ++g) requests.push_back({ids, gp * G + g, lengths_.draw(batch[i].id, g)});
      global_prompt.push_back(shard.begin + int64_t(i));
      st.prompts.push_back(std::move(batch[i]));
    }
    std::vector<Rollout> rollouts;
    if (progress_) progress_->begin(cat("step ", st.step, " generation", b > 0 ? cat(" (batch ", b + 1, ")") : "",
                                        size > 1 ? " on rank 0" : ""), "sequences");
    if (!requests.empty())
      rollouts = roles_.generator->generate(requests, s_.sampling, stop_, s_.seed, uint32_t(st.step),
                                   int(s_.max_total_sequence_length), decode);
    if (progress_) progress_->end();
    const size_t first_sample = st.samples.size();
    for (size_t k = 0; k < rollouts.size(); ++k) {
      GrpoSample s;
      s.prompt_index = int64_t(first_prompt + k / size_t(G));
      s.position = global_prompt[k / size_t(G)] * G + int64_t(k % size_t(G));
      st.generated_tokens_all += int64_t(rollouts[k].completion.size());
      s.rollout = std::move(rollouts[k]);
      st.samples.push_back(std::move(s));
    }
    const int64_t groups = int64_t(global_prompt.size());
    st.groups_generated += groups;
    if (!s_.dynamic_sampling) break;

    // Dynamic sampling: score now, keep the groups with signal whose global order is below P.
    timer_.stop("generation");
    timer_.start("reward");
    score_samples(st, first_sample);
    timer_.stop("reward");
    std::vector<int64_t> signal;  // group index within this batch
    for (int64_t gi = 0; gi < groups; ++gi)
      if (group_has_signal(st.samples, first_sample + size_t(gi * G), size_t(G))) signal.push_back(gi);
    st.groups_zero_variance += groups - int64_t(signal.size());
    const std::vector<int64_t> counts = per_replica(ps_.world(), gen_, int64_t(signal.size()));
    int64_t order = st.groups_kept_global;
    for (int r = 0; r < rank; ++r) order += counts[size_t(r)];
    int64_t total_signal = 0;
    for (int64_t n : counts) total_signal += n;
    std::vector<GrpoSample> kept(std::make_move_iterator(st.samples.begin()),
                                 std::make_move_iterator(st.samples.begin() + int64_t(first_sample)));
    for (int64_t gi : signal) {
      if (order >= P) break;
      for (int64_t g = 0; g < G; ++g) {
        GrpoSample s = std::move(st.samples[first_sample + size_t(gi * G + g)]);
        s.position = order * G + g;
        kept.push_back(std::move(s));
      }
      ++order;
    }
    st.samples = std::move(kept);
    st.groups_kept_global = std::min(P, st.groups_kept_global + total_signal);
    timer_.start("generation");
    if (st.groups_kept_global >= P) break;
  }
  roles_.generator->end_generation();
  st.scored = s_.dynamic_sampling;
  if (!s_.dynamic_sampling) {
    int64_t groups = 0;
    for (int64_t n : per_replica(ps_.world(), gen_, st.groups_generated)) groups += n;
    st.groups_kept_global = groups;
  }
  if (!gen_.same_as_training) move_rollouts_to_trainers(st);
  timer_.stop("generation");
  for (size_t i = 0; i < st.samples.size(); i += size_t(G)) st.prompt_tokens += int64_t(st.samples[i].rollout.prompt.size());
}

void GrpoTrainer::move_rollouts_to_trainers(StepState& st) {
  const int64_t G = s_.generations;
  if (!st.scored) {  // scored where the prompts are (their answers stay on the replica)
    timer_.stop("generation");
    timer_.start("reward");
    score_samples(st, 0);
    for (size_t i = 0; i < st.samples.size(); i += size_t(G))
      if (!group_has_signal(st.samples, i, size_t(G))) ++st.groups_zero_variance;
    st.scored = true;
    timer_.stop("reward");
    timer_.start("generation");
  }
  // The replica's counts as world totals, kept by data-parallel rank 0 alone: the step's metrics sum them over dp.
  int64_t counts[4] = {st.groups_generated, st.groups_zero_variance, st.prompts_too_long, st.generated_tokens_all};
  for (int64_t& c : counts) {
    int64_t total = 0;
    for (int64_t n : per_replica(ps_.world(), gen_, c)) total += n;
    c = ps_.dp_rank() == 0 ? total : 0;
  }
  st.groups_generated = counts[0], st.groups_zero_variance = counts[1];
  st.prompts_too_long = counts[2], st.generated_tokens_all = counts[3];
  st.samples = exchange_rollouts(st.samples, gen_, ps_.grid(), s_.prompts_per_step, G, ps_.world());
  st.prompts.clear();
}

// Reward: score the completions (unless dynamic sampling did already), then group-relative advantages.
void GrpoTrainer::phase_reward(StepState& st) {
  auto scope = timer_.scope("reward");
  const int64_t G = s_.generations;
  if (!st.scored) {
    score_samples(st, 0);
    for (size_t i = 0; i < st.samples.size(); i += size_t(G))
      if (!group_has_signal(st.samples, i, size_t(G))) ++st.groups_zero_variance;
  }
  std::vector<float> rewards;
  rewards.reserve(st.samples.size());
  for (const auto& s : st.samples) rewards.push_back(float(s.reward));
  const std::vector<float> adv = compute_advantages(rewards, G, s_.advantages);
  for (size_t i = 0; i < st.samples.size(); ++i) {
    st.samples[i].advantage = adv[i];
    st.samples[i].trained = !(s_.overlong_filtering && st.samples[i].rollout.finish_reason == FinishReason::length);
  }
}

// The step's micro-batches, packed once: the rollouts in train.global_batch_size chunks (by global position), one
// optimizer step each, each chunk packed into micro-batches of at most train.max_tokens_per_microbatch tokens. The
// logprob phase fills their old and reference logprobs, the training phase trains on them.
void GrpoTrainer::pack_micro_batches(StepState& st) {
  const int64_t K = s_.optimizer_steps_per_step(), B = s_.global_batch_size;
  st.chunks.assign(size_t(std::max<int64_t>(K, 0)), {});
  for (int64_t k = 0; k < K; ++k) {
    std::vector<int64_t> which;
    for (size_t i = 0; i < st.samples.size(); ++i)
      if (st.samples[i].position >= k * B && st.samples[i].position < (k + 1) * B) which.push_back(int64_t(i));
    if (which.empty()) continue;
    Packing packing;
    for (const auto& bin : pack_samples(st.samples, which, s_.max_tokens_per_microbatch, &packing))
      st.chunks[size_t(k)].push_back(build_micro_batch(st.samples, bin));
    st.packed_tokens += packing.total_tokens;
    st.packed_slots += int64_t(packing.bins.size()) * packing.budget;
  }
}

// Logprob: previous-policy logprobs with the training weights (skipped when exactly on-policy) and reference
// logprobs with the frozen reference weights (only when kl_coef > 0), over the step's micro-batches (every
// optimizer step's, in order): one pass of all of them per role (under pipeline parallelism a forward-only pipelined
// pass). Under expert parallelism every rank of the group runs as many passes (empty ones after its own
// micro-batches).
void GrpoTrainer::phase_logprob(StepState& st) {
  auto scope = timer_.scope("logprob");
  pack_micro_batches(st);
  const bool need_old = !s_.skip_prev_logprobs(), need_ref = s_.loss.kl_coef > 0;
  Comm* lockstep = roles_.learner->lockstep_group();
  if ((!need_old && !need_ref) || (st.samples.empty() && !lockstep)) return;
  const float T = s_.sampling.temperature;
  std::vector<MicroBatch*> mbs;
  std::vector<const PackedBatch*> batches;
  std::vector<const int32_t*> replay;
  for (std::vector<MicroBatch>& chunk : st.chunks)
    for (MicroBatch& mb : chunk) {
      mbs.push_back(&mb);
      st.logprob_tokens += mb.batch.num_tokens();
      batches.push_back(&mb.batch);
      replay.push_back(s_.router_replay && !mb.gen_routing.empty() ? mb.gen_routing.data() : nullptr);
    }
  // Expert parallelism: as many passes as the group's busiest rank, empty ones after this rank's own.
  const PackedBatch empty = empty_pass_batch();
  const int64_t passes_here =
      lockstep ? all_reduce_max_value(*lockstep, int64_t(batches.size())) : int64_t(batches.size());
  while (int64_t(batches.size()) < passes_here) {
    batches.push_back(&empty);
    replay.push_back(nullptr);
  }
  const bool any_replay = std::any_of(replay.begin(), replay.end(), [](const int32_t* r) { return r != nullptr; });
  if (!any_replay) replay.clear();
  // Progress by this rank's micro-batches over the phase's passes (policy, then reference).
  const int passes = int(need_old) + int(need_ref);
  const char* where = ps_.dp_size() > 1 ? " on rank 0" : "";
  MicroBatchProgress shown(progress_, *roles_.engine, cat("step ", st.step, " logprob", where),
                           passes * int64_t(mbs.size()));
  for (const bool policy : {true, false}) {
    if (policy ? !need_old : !need_ref) continue;
    shown.next_call(mbs);
    // The old policy's logprobs are the learner's, the reference's the scorer's, written straight into the
    // micro-batches (0 where targets < 0; the empty passes' are not wanted).
    std::vector<std::vector<float>*> out(batches.size(), nullptr);
    for (size_t i = 0; i < mbs.size(); ++i) out[i] = policy ? &mbs[i]->old : &mbs[i]->ref;
    if (policy) roles_.learner->policy_logprobs(batches, T, replay, out);
    else roles_.scorer->reference_logprobs(batches, T, replay, out);
  }
}

// Training: one optimizer step per chunk of the step's micro-batches: global loss denominator, then the engine's
// forward, loss and backward per micro-batch (the last one reduces the gradients over the data-parallel ranks while
// it runs on the GPU), gradient reduction, clip, AdamW.
void GrpoTrainer::phase_training(StepState& st) {
  auto scope = timer_.scope("training");
  const int64_t K = int64_t(st.chunks.size());
  TrainLoss loss;
  loss.config = s_.loss;
  loss.temperature = s_.sampling.temperature;
  loss.on_policy = s_.skip_prev_logprobs();
  loss.moe_aux_loss_coef = s_.moe_aux_loss_coef;
  // The progress line counts this rank's micro-batches (the ranks' shares differ; the line shows rank 0's, as
  // generation's does).
  int64_t own = 0;
  for (const std::vector<MicroBatch>& chunk : st.chunks) own += int64_t(chunk.size());
  const char* where = ps_.dp_size() > 1 ? " on rank 0" : "";
  MicroBatchProgress shown(progress_, *roles_.engine, cat("step ", st.step, " training", where), own);
  for (int64_t k = 0; k < K; ++k) {
    const std::vector<MicroBatch>& mbs = st.chunks[size_t(k)];
    int64_t sums[2] = {0, 0};  // the loss denominator, the tokens
    for (const auto& mb : mbs) {
      sums[0] += loss_denominator(s_.loss.aggregation, mb.mask, mb.seq_offsets);
      sums[1] += mb.batch.num_tokens();
    }
    ps_.dp().all_reduce_sum(sums, 2);
    const int64_t denom = sums[0];
    shown.next_call(mbs);  // (a chunk skipped below counts as done at the next call)
    if (denom == 0) continue;  // nothing to train on in this chunk on any rank (e.g. all truncated and filtered)

    loss.denominator = double(denom);
    loss.total_tokens = double(sums[1]);
    for (const PolicyLossMetrics& m : roles_.learner->train(mbs, loss)) {
      st.loss.merge(m);
      st.entropy_sum += m.entropy_sum;
    }
    for (const auto& mb : mbs) st.training_tokens += mb.batch.num_tokens();
    st.microbatches += int64_t(mbs.size());
    const float lr = s_.lr.lr(roles_.learner->optimizer_step_count() + 1);
    const double norm = roles_.learner->optimizer_step(lr, s_.max_grad_norm, /*last_of_step=*/k + 1 == K);
    st.lr = lr;
    ++st.optimizer_steps;
    if (std::isfinite(norm)) {
      st.grad_norm_sum += norm;
      nonfinite_in_a_row_ = 0;
    } else {
      note_nonfinite_update(st, norm);
    }
  }
}

void GrpoTrainer::note_nonfinite_update(StepState& st, double norm) {
  ++st.skipped_updates;
  ++nonfinite_in_a_row_;
  const int64_t limit = s_.max_nonfinite_updates;
  HONE_USER_CHECK(limit == 0 || nonfinite_in_a_row_ < limit, "step ", st.step, ": ", nonfinite_in_a_row_,
                  " optimizer updates in a row had a non-finite gradient norm (", norm, ") and were skipped "
                  "(train.max_nonfinite_updates = ", limit, "); the weights are those of the last applied update "
                  "and the last checkpoint holds them: lower train.learning_rate, keep train.max_grad_norm > 0, or "
                  "look for a loss term that overflows (loss.entropy_coef, loss.kl_coef)");
  log_warn("step ", st.step, ": the gradient norm is ", norm, ": optimizer update skipped (", nonfinite_in_a_row_,
           " in a row; train.max_nonfinite_updates = ", limit, ")");
}

// Refit: the generation weights take the new training weights (a flat copy on the CPU; a bf16 cast on the GPU).
void GrpoTrainer::phase_refit(StepState&) {
  auto scope = timer_.scope("refit");
  roles_.weights->publish();
}

}  // namespace hone::rl
