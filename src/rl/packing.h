// Sequence packing: sequences (by token count) into micro-batches of at most train.max_tokens_per_microbatch
// tokens, with modified first-fit-decreasing (MFFD, Johnson and Garey 1985: worst case 71/60 of the optimum, against
// 11/9 for plain FFD).
//
// Size classes relative to the budget C: large > C/2, medium in (C/3, C/2], small in (C/6, C/3], tiny <= C/6.
//   1. each large sequence opens its own bin, largest first (bins B1..Bm)
//   2. forward over B1..Bm: put the largest medium sequence that fits
//   3. backward over the bins that got no medium: if the two smallest small sequences fit, put the smallest one and
//      then the largest small one that still fits
//   4. forward over B1..Bm: put the largest remaining sequence that fits, again and again while one fits
//   5. what remains goes into new bins by first-fit-decreasing
// Ties between equal lengths go to the lower index. Each bin lists its sequence indices in ascending order; bins
// keep the order in which they were opened. The result depends only on the lengths and the budget.
#pragma once

#include <cstdint>
#include <span>
#include <vector>

namespace hone {

struct Packing {
  std::vector<std::vector<int64_t>> bins;  // sequence indices per micro-batch, ascending
  std::vector<int64_t> bin_tokens;         // tokens per micro-batch
  int64_t total_tokens = 0;
  int64_t budget = 0;
  // total tokens / (bins * budget); 0 when there is nothing to pack.
  double efficiency() const;
};

// Throws hone::UserError when a sequence is longer than the budget (naming its index, its length and the budget).
Packing pack_sequences(std::span<const int64_t> lengths, int64_t max_tokens_per_microbatch);

// Plain first-fit-decreasing, for comparison.
Packing pack_first_fit_decreasing(std::span<const int64_t> lengths, int64_t max_tokens_per_microbatch);

// ceil(total tokens / budget): no packing can use fewer micro-batches.
int64_t packing_lower_bound(std::span<const int64_t> lengths, int64_t max_tokens_per_microbatch);

}  // namespace hone
