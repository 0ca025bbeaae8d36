// Modified first-fit-decreasing sequence packing (the steps are in packing.h).
#include "rl/packing.h"

#include <algorithm>
#include <iterator>
#include <set>
#include <utility>

#include "runtime/error.h"

namespace hone {

namespace {

// Remaining sequences of one size class, keyed (length, -index) so that among equal lengths the lower index is
// the "largest" and is taken first.
using Pool = std::set<std::pair<int64_t, int64_t>>;

// The largest entry with length <= space, or end().
Pool::iterator largest_fitting(Pool& pool, int64_t space) {
  auto it = pool.upper_bound({space, INT64_MAX});
  return it == pool.begin() ? pool.end() : std::prev(it);
}

void check_lengths(std::span<const int64_t> lengths, int64_t budget) {
  HONE_CHECK(budget > 0, "train.max_tokens_per_microbatch must be > 0, got ", budget);
  int64_t longest = 0;
  size_t at = 0;
  for (size_t i = 0; i < lengths.size(); ++i) {
    HONE_CHECK(lengths[i] > 0, "sequence ", i, " has length ", lengths[i]);
    if (lengths[i] > longest) longest = lengths[i], at = i;
  }
  HONE_USER_CHECK(longest <= budget, "sequence ", at, " has ", longest,
                  " tokens, more than train.max_tokens_per_microbatch = ", budget,
                  "; raise train.max_tokens_per_microbatch to at least ", longest,
                  " or lower generation.max_new_tokens / the prompt length");
}

struct Builder {
  std::span<const int64_t> lengths;
  int64_t budget;
  Packing out;

  size_t open(int64_t index) {
    out.bins.push_back({index});
    out.bin_tokens.push_back(lengths[index]);
    return out.bins.size() - 1;
  }
  int64_t space(size_t bin) const { return budget - out.bin_tokens[bin]; }
  void put(size_t bin, Pool& pool, Pool::iterator it) {
    const int64_t index = -it->second;
    out.bins[bin].push_back(index);
    out.bin_tokens[bin] += lengths[index];
    pool.erase(it);
  }
  // First-fit-decreasing of everything left in `pools` (largest first), over bins from `first_bin` on.
  void first_fit_decreasing(std::vector<Pool*> pools, size_t first_bin) {
    std::vector<std::pair<int64_t, int64_t>> rest;
    for (Pool* p : pools) rest.insert(rest.end(), p->begin(), p->end()), p->clear();
    std::sort(rest.rbegin(), rest.rend());
    for (const auto& [len, neg_index] : rest) {
      size_t b = first_bin;
      while (b < out.bins.size() && space(b) < len) ++b;
      if (b == out.bins.size()) {
        open(-neg_index);
      } else {
        out.bins[b].push_back(-neg_index);
        out.bin_tokens[b] += len;
      }
    }
  }
  Packing finish() {
    for (auto& bin : out.bins) std::sort(bin.begin(), bin.end());
    for (int64_t l : lengths) out.total_tokens += l;
    out.budget = budget;
    return std::move(out);
  }
};

}  // namespace

double Packing::efficiency() const {
  if (bins.empty()) return 0.0;
  return static_cast<double>(total_tokens) / (static_cast<double>(bins.size()) * static_cast<double>(budget));
}

int64_t packing_lower_bound(std::span<const int64_t> lengths, int64_t budget) {
  HONE_CHECK(budget > 0, "budget must be > 0");
  int64_t total = 0;
  for (int64_t l : lengths) total += l;
  return (total + budget - 1) / budget;
}

Packing pack_first_fit_decreasing(std::span<const int64_t> lengths, int64_t budget) {
  check_lengths(lengths, budget);
  Builder b{lengths, budget, {}};
  Pool all;
  for (size_t i = 0; i < lengths.size(); ++i) all.insert({lengths[i], -static_cast<int64_t>(i)});
  b.first_fit_decreasing({&all}, 0);
  return b.finish();
}

Packing pack_sequences(std::span<const int64_t> lengths, int64_t budget) {
  check_lengths(lengths, budget);
  Builder b{lengths, budget, {}};
  // Classes by exact integer comparisons: large 2l > C, medium 3l > C, small 6l > C, tiny otherwise.
  std::vector<std::pair<int64_t, int64_t>> large;
  Pool medium, small, tiny;
  for (size_t i = 0; i < lengths.size(); ++i) {
    const std::pair<int64_t, int64_t> key{lengths[i], -static_cast<int64_t>(i)};
    const int64_t l = lengths[i];
    if (2 * l > budget) large.push_back(key);
    else if (3 * l > budget) medium.insert(key);
    else if (6 * l > budget) small.insert(key);
    else tiny.insert(key);
  }
  // 1. One bin per large sequence, largest first.
  std::sort(large.rbegin(), large.rend());
  for (const auto& key : large) b.open(-key.second);
  const size_t m = b.out.bins.size();

  // 2. Forward: the largest medium sequence that fits.
  std::vector<char> got_medium(m, 0);
  for (size_t k = 0; k < m && !medium.empty(); ++k) {
    auto it = largest_fitting(medium, b.space(k));
    if (it != medium.end()) b.put(k, medium, it), got_medium[k] = 1;
  }

  // 3. Backward over bins without a medium: the smallest small sequence plus the largest small one that then fits.
  for (size_t k = m; k-- > 0;) {
    if (got_medium[k] || small.size() < 2) continue;
    const auto smallest = small.begin();
    if (smallest->first + std::next(smallest)->first > b.space(k)) continue;
    b.put(k, small, smallest);
    auto it = largest_fitting(small, b.space(k));
    if (it != small.end()) b.put(k, small, it);
  }

  // 4. Forward: fill each bin with the largest remaining sequence that fits, while one does.
  Pool* pools[] = {&medium, &small, &tiny};
  for (size_t k = 0; k < m; ++k) {
    for (;;) {
      Pool* best_pool = nullptr;
      Pool::iterator best;
      for (Pool* p : pools) {
        auto it = largest_fitting(*p, b.space(k));
        if (it != p->end() && (best_pool == nullptr || *it > *best)) best_pool = p, best = it;
      }
      if (best_pool == nullptr) break;
      b.put(k, *best_pool, best);
    }
  }

  // 5. The rest by first-fit-decreasing into new bins.
  b.first_fit_decreasing({&medium, &small, &tiny}, m);
  return b.finish();
}

}  // namespace hone
