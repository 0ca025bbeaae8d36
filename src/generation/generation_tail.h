// The tail of a generate() call: how long its last sequences keep the engine busy, and how full its decode batches
// are. With long-tailed response lengths the end of a call belongs to a few long sequences, each decode step reading
// all the weights for a handful of rows; continuous batching fills the freed rows from the queue while there is one.
// The generators record a timeline as they run (a mark after each model pass in which sequences stopped, the rows
// of each decode step); generation_tail() turns it into the numbers the step writes (generation/* in doc/output.md).
// Plain header.
#pragma once

#include <cstdint>
#include <vector>

namespace hone {

// What a generate() call records as it runs. Times are seconds from the start of the call.
struct GenerationTimeline {
  // After a model pass in which sequences stopped: the time, and the call's stopped sequences and generated tokens
  // so far.
  struct Mark {
    double seconds = 0;
    int64_t finished = 0;
    int64_t tokens = 0;
  };
  int64_t sequences = 0;  // of the call
  int max_num_seqs = 0;   // the most sequences one decode step may hold (the engine's batch limit)
  std::vector<Mark> marks;
  int64_t decode_steps = 0;
  int64_t decode_rows = 0;  // running sequences summed over the decode steps
  double seconds = 0;       // the end of the call
  int64_t generated_tokens = 0;

  void decode_step(int rows) {
    ++decode_steps;
    decode_rows += rows;
  }
  // After every model pass; a mark only when sequences stopped in it.
  void pass(double at, int64_t finished, int64_t tokens) {
    if (finished > (marks.empty() ? 0 : marks.back().finished)) marks.push_back({at, finished, tokens});
  }
  void end(double at, int64_t tokens) {
    seconds = at;
    generated_tokens = tokens;
  }
};

// The tail starts when this share of the call's sequences has stopped: the last 10 % run alone.
inline constexpr double kTailFinishedFraction = 0.9;

// One call's numbers, or the sum of a phase's calls (add()).
struct GenerationTail {
  double seconds = 0;         // wall time of the call
  int64_t generated_tokens = 0;
  double tail_seconds = 0;    // from the moment 90 % of the sequences had stopped to the end of the call
  int64_t tail_tokens = 0;    // tokens generated in that window
  int64_t decode_steps = 0;
  int64_t decode_rows = 0;    // running sequences summed over the decode steps
  int64_t batch_slots = 0;    // max_num_seqs summed over the decode steps
  // generation.experts = parallel: passes run over none of this rank's own rows while other ranks of its
  // expert-parallel group still worked (parallel/expert_lockstep.h); -1 when generation does not run in lockstep.
  int64_t idle_passes = -1;

  double tokens_per_s() const { return seconds > 0 ? double(generated_tokens) / seconds : 0.0; }
  // Running sequences per decode step.
  double mean_running() const { return decode_steps > 0 ? double(decode_rows) / double(decode_steps) : 0.0; }
  // The same over max_num_seqs: how full admission keeps the decode batch (1 = every step at the limit).
  double occupancy() const { return batch_slots > 0 ? double(decode_rows) / double(batch_slots) : 0.0; }
  // Another call of the same phase (dynamic sampling draws several): times, tokens and steps add up.
  void add(const GenerationTail& o);
};

// The tail of a recorded call: the window starts at the mark where at least ceil(fraction x sequences) had stopped
// (zero without sequences).
GenerationTail generation_tail(const GenerationTimeline& t, double finished_fraction = kTailFinishedFraction);

}  // namespace hone
