// Moving scored rollouts from generation replicas to their training data-parallel ranks (rollout_exchange.h).
#include "rl/rollout_exchange.h"

#include <algorithm>
#include <cstring>
#include <string>
#include <utility>

#include "data/prompt_source.h"
#include "roles/rollout_wire.h"
#include "runtime/error.h"

namespace hone::rl {


std::vector<GrpoSample> exchange_rollouts(const std::vector<GrpoSample>& samples, const GenerationLayout& gen,
                                          const RankGrid& grid, int64_t prompts_per_step, int64_t generations,
                                          Comm& world) {
  const int W = world.size(), me = world.rank(), dp = grid.dp();
  HONE_CHECK(W == grid.world_size() && W == gen.world, "the world of ", W, " ranks is not the grid's");
  // The data-parallel rank training each group order.
  auto trainer_of = [&](int64_t position) {
    const int64_t o = position / generations;
    for (int d = 0; d < dp; ++d)
      if (o < data::shard_range(prompts_per_step, d, dp).end) return d;
    HONE_CHECK(false, "sample position ", position, " past the step's ", prompts_per_step, " groups");
    return 0;
  };
  // Per destination: the number of samples, then the samples.
  std::vector<std::string> out(static_cast<size_t>(W));
  for (int w = 0; w < W; ++w) {
    if (gen.rank_in_replica(w) != gen.rank_in_replica(me)) continue;  // another member of the replica sends
    const int d = grid.coord(w).dp;
    std::vector<GrpoSample> to_d;
    for (const GrpoSample& s : samples)
      if (trainer_of(s.position) == d) to_d.push_back(s);
    if (!to_d.empty()) out[size_t(w)] = wire_encode(to_d);
  }
  // Counts in 8-byte words, then the words.
  const size_t n_ranks = static_cast<size_t>(W);
  std::vector<int64_t> send_counts(n_ranks), recv_counts(n_ranks), send_displs(n_ranks), recv_displs(n_ranks);
  for (int w = 0; w < W; ++w) send_counts[size_t(w)] = int64_t((out[size_t(w)].size() + 7) / 8);
  world.all_to_all(send_counts.data(), recv_counts.data(), 1);
  int64_t send_total = 0, recv_total = 0;
  for (int w = 0; w < W; ++w) {
    send_displs[size_t(w)] = send_total, send_total += send_counts[size_t(w)];
    recv_displs[size_t(w)] = recv_total, recv_total += recv_counts[size_t(w)];
  }
  std::vector<int64_t> send(size_t(std::max<int64_t>(1, send_total)), 0), recv(size_t(std::max<int64_t>(1, recv_total)));
  for (int w = 0; w < W; ++w)
    std::memcpy(send.data() + send_displs[size_t(w)], out[size_t(w)].data(), out[size_t(w)].size());
  world.all_to_allv(send.data(), send_counts, send_displs, recv.data(), recv_counts, recv_displs);
  std::vector<GrpoSample> mine;
  for (int w = 0; w < W; ++w) {
    if (recv_counts[size_t(w)] == 0) continue;
    const char* p = reinterpret_cast<const char*>(recv.data() + recv_displs[size_t(w)]);
    WireReader r(p, size_t(recv_counts[size_t(w)]) * 8, "a rollout message");  // the last word's padding unread
    for (GrpoSample& s : r.read<std::vector<GrpoSample>>()) {
      s.prompt_index = -1;  // the trainer finds the prompt of each sample again
      mine.push_back(std::move(s));
    }
  }
  std::sort(mine.begin(), mine.end(), [](const GrpoSample& a, const GrpoSample& b) { return a.position < b.position; });
  return mine;
}

}  // namespace hone::rl
