// The last stage's logprobs and loss metrics on every pipeline rank (pipeline_broadcast.h).
#include "rl/pipeline_broadcast.h"

#include "comm/host_collectives.h"
#include "roles/rollout_wire.h"
#include "runtime/error.h"

namespace hone::rl {

void broadcast_logprobs(Comm& pp, std::vector<std::vector<float>>& lp, const std::vector<int>& sizes, int root) {
  if (pp.size() == 1) return;
  lp.resize(sizes.size());
  std::vector<float> all;
  for (size_t i = 0; i < sizes.size(); ++i) {
    if (pp.rank() == root) HONE_CHECK(int(lp[i].size()) == sizes[i], "micro-batch ", i, " has ", lp[i].size(),
                                      " logprobs, expected ", sizes[i]);
    else lp[i].assign(size_t(sizes[i]), 0.f);
    all.insert(all.end(), lp[i].begin(), lp[i].end());
  }
  pp.broadcast(all.data(), int64_t(all.size()), root);
  size_t at = 0;
  for (auto& v : lp) {
    std::copy(all.begin() + int64_t(at), all.begin() + int64_t(at + v.size()), v.begin());
    at += v.size();
  }
}


void broadcast_loss_metrics(Comm& pp, std::vector<PolicyLossMetrics>& metrics, int root) {
  if (pp.size() == 1) return;
  const std::string bytes = broadcast_string(pp, pp.rank() == root ? wire_encode(metrics) : std::string(), root);
  const size_t n = metrics.size();
  metrics = wire_decode<std::vector<PolicyLossMetrics>>(bytes, "a loss metrics broadcast");
  HONE_CHECK(metrics.size() == n, "the last stage sent ", metrics.size(), " micro-batches' metrics, expected ", n);
}

}  // namespace hone::rl
