// One sparse layer's exchange plan over the expert-parallel group (parallel/expert_parallel.h, written once over the
// backend): the token-side counts cross the group first (one all-to-all of E/ep counts per rank pair over the host
// Comm), then each rank knows how many rows it sends to and receives from every rank, and where each of its
// expert-side rows sits in what it received (received rows come grouped by source rank, then by expert; the expert
// side wants expert i's rows from rank 0, then rank 1, ...).
#pragma once

#include <cstdint>
#include <vector>

#include "comm/comm.h"

namespace hone {

struct ExpertExchangePlan {
  std::vector<int64_t> send_rows, send_offsets, recv_rows, recv_offsets;  // rows per rank of the group
  std::vector<int64_t> source;  // [expert-side rows]: expert-side row p is received row source[p]
  std::vector<int64_t> received_counts;  // [ranks x experts_per_rank]: scratch of the counts' all-to-all
};

// Collective over ep (a host Comm). counts: this rank's token-side rows per expert of the whole model [ep size x
// experts_per_rank] (rank r's experts at r experts_per_rank). Fills plan, writes the rows each of this rank's
// experts receives into expert_counts [experts_per_rank] and returns their sum.
int64_t plan_expert_exchange(Comm& ep, int experts_per_rank, const int64_t* counts, int64_t* expert_counts,
                             ExpertExchangePlan& plan);

// v [ranks] in rows, scaled to elements of `row` each.
void rows_to_elements(const std::vector<int64_t>& rows, int64_t row, std::vector<int64_t>& out);

}  // namespace hone
