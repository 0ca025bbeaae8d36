// The exchange plan of one sparse layer (expert_exchange.h).
#include "parallel/expert_exchange.h"

namespace hone {

int64_t plan_expert_exchange(Comm& ep, int experts_per_rank, const int64_t* counts, int64_t* expert_counts,
                             ExpertExchangePlan& pl) {
  const int P = ep.size(), El = experts_per_rank;
  std::vector<int64_t>& got = pl.received_counts;
  // The counts first: rank s learns how many rows of each of its experts every rank sends.
  got.resize(size_t(P) * size_t(El));
  ep.all_to_all(counts, got.data(), El);
  pl.send_rows.assign(size_t(P), 0);
  pl.recv_rows.assign(size_t(P), 0);
  for (int r = 0; r < P; ++r)
    for (int i = 0; i < El; ++i) {
      pl.send_rows[size_t(r)] += counts[size_t(r) * El + size_t(i)];
      pl.recv_rows[size_t(r)] += got[size_t(r) * El + size_t(i)];
    }
  pl.send_offsets.assign(size_t(P), 0);
  pl.recv_offsets.assign(size_t(P), 0);
  for (int r = 1; r < P; ++r) {
    pl.send_offsets[size_t(r)] = pl.send_offsets[size_t(r) - 1] + pl.send_rows[size_t(r) - 1];
    pl.recv_offsets[size_t(r)] = pl.recv_offsets[size_t(r) - 1] + pl.recv_rows[size_t(r) - 1];
  }
  // Regrouping: expert i's rows from rank 0, then from rank 1, ...
  pl.source.clear();
  int64_t total = 0;
  for (int i = 0; i < El; ++i) {
    expert_counts[i] = 0;
    for (int s = 0; s < P; ++s) {
      int64_t at = pl.recv_offsets[size_t(s)];
      for (int j = 0; j < i; ++j) at += got[size_t(s) * El + size_t(j)];
      const int64_t n = got[size_t(s) * El + size_t(i)];
      for (int64_t q = 0; q < n; ++q) pl.source.push_back(at + q);
      expert_counts[i] += n;
      total += n;
    }
  }
  return total;
}

void rows_to_elements(const std::vector<int64_t>& rows, int64_t row, std::vector<int64_t>& out) {
  out.resize(rows.size());
  for (size_t r = 0; r < rows.size(); ++r) out[r] = rows[r] * row;
}

}  // namespace hone
