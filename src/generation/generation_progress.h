// How far a generate() call has come, for the progress line of a long generation phase (runtime/progress.h).
// The generators call the hook after every batched model pass (a decode step or a prefill pass), so it must be
// cheap: a clock read and a comparison, printing only when its interval is due.
#pragma once

#include <cstdint>
#include <functional>

namespace hone {

struct GenerationProgress {
  int64_t finished = 0;          // sequences of the call that have stopped
  int64_t total = 0;             // sequences of the call
  int64_t generated_tokens = 0;  // completion tokens sampled so far in the call
};

// Called on the generating thread; empty: no progress is reported.
using GenerationProgressFn = std::function<void(const GenerationProgress&)>;

}  // namespace hone
