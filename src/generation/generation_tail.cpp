// The tail metrics of a generation call from its timeline (see generation_tail.h).
#include "generation/generation_tail.h"

#include <algorithm>
#include <cmath>

namespace hone {

void GenerationTail::add(const GenerationTail& o) {
  seconds += o.seconds;
  generated_tokens += o.generated_tokens;
  tail_seconds += o.tail_seconds;
  tail_tokens += o.tail_tokens;
  decode_steps += o.decode_steps;
  decode_rows += o.decode_rows;
  batch_slots += o.batch_slots;
  if (o.idle_passes >= 0) idle_passes = std::max<int64_t>(idle_passes, 0) + o.idle_passes;
}

GenerationTail generation_tail(const GenerationTimeline& t, double finished_fraction) {
  GenerationTail g;
  g.seconds = t.seconds;
  g.generated_tokens = t.generated_tokens;
  g.decode_steps = t.decode_steps;
  g.decode_rows = t.decode_rows;
  g.batch_slots = t.decode_steps * int64_t(t.max_num_seqs);
  if (t.sequences <= 0) return g;
  // The count that makes the share: 90 % of 10 sequences is the 9th to stop. The small epsilon keeps an exact
  // product (0.9 x 10 computes as 9.000000000000002) from rounding up to the next sequence.
  const int64_t k = std::clamp<int64_t>(int64_t(std::ceil(finished_fraction * double(t.sequences) - 1e-9)), 1,
                                        t.sequences);
  const auto it = std::find_if(t.marks.begin(), t.marks.end(),
                               [&](const GenerationTimeline::Mark& m) { return m.finished >= k; });
  if (it == t.marks.end()) return g;  // a call cut short: no tail to speak of
  g.tail_seconds = std::max(0.0, t.seconds - it->seconds);
  g.tail_tokens = std::max<int64_t>(0, t.generated_tokens - it->tokens);
  return g;
}

}  // namespace hone
