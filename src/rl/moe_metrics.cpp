// The mixture-of-experts step metrics (what each one is: moe_metrics.h).
#include "rl/moe_metrics.h"

#include <algorithm>

#include "runtime/error.h"

namespace hone::rl {

std::vector<MetricDeclaration> moe_metric_declarations(const ModelConfig& c) {
  std::vector<MetricDeclaration> m;
  if (!c.is_moe()) return m;
  m.push_back({"moe/aux_loss", "1", "load-balancing loss of the training micro-batches (before loss.moe_aux_loss_coef), their mean"});
  m.push_back({"moe/routing_mismatch", "1",
               "fraction of (token, sparse layer) pairs whose k experts in training differ from generation's"});
  m.push_back({"moe/load_imbalance/max", "1", "the largest load imbalance of the sparse layers"});
  m.push_back({"moe/token_mult_prob_error_unreplayed", "1",
               "loss.router_replay: token_mult_prob_error of a training forward that routes by itself"});
  for (int l = 0; l < c.num_hidden_layers; ++l)
    if (c.is_moe_layer(l))
      m.push_back({cat("moe/load_imbalance/layer_", l), "1",
                   cat("layer ", l, ": tokens of the busiest expert over the mean tokens per expert in training (1 = even)")});
  return m;
}

void set_moe_metrics(StepRow& row, const MoeStepStats& stats, const ModelConfig& c, Comm& dp) {
  if (!c.is_moe()) return;
  const int E = c.num_experts, S = c.num_moe_layers();
  // Every rank reduces the same sizes, whether or not it trained this step.
  std::vector<double> v(size_t(S) * E + 6, 0.0);
  if (!stats.expert_tokens.empty()) {
    HONE_CHECK(int(stats.expert_tokens.size()) == S * E, "expert loads of ", stats.expert_tokens.size(),
               " values for ", S, " sparse layers of ", E, " experts");
    std::copy(stats.expert_tokens.begin(), stats.expert_tokens.end(), v.begin());
  }
  double* tail = v.data() + size_t(S) * E;
  tail[0] = stats.aux_loss_sum;
  tail[1] = double(stats.aux_count);
  tail[2] = double(stats.routing_compared);
  tail[3] = double(stats.routing_differ);
  tail[4] = stats.unreplayed_mpe_sum;
  tail[5] = double(stats.unreplayed_tokens);
  dp.all_reduce_sum(v.data(), int64_t(v.size()));
  if (tail[1] > 0) row.set("moe/aux_loss", tail[0] / tail[1]);
  if (tail[2] > 0) row.set("moe/routing_mismatch", tail[3] / tail[2]);
  if (tail[5] > 0) row.set("moe/token_mult_prob_error_unreplayed", tail[4] / tail[5]);
  double worst = 0;
  int i = 0;
  for (int l = 0; l < c.num_hidden_layers; ++l) {
    if (!c.is_moe_layer(l)) continue;
    const double* load = v.data() + size_t(i++) * E;
    double sum = 0, mx = 0;
    for (int e = 0; e < E; ++e) sum += load[e], mx = std::max(mx, load[e]);
    if (sum <= 0) continue;
    const double imbalance = mx / (sum / E);
    row.set(cat("moe/load_imbalance/layer_", l), imbalance);
    worst = std::max(worst, imbalance);
  }
  if (worst > 0) row.set("moe/load_imbalance/max", worst);
}

void add_moe_routing(MoeStepStats& st, int S, int E, int k, const std::vector<int64_t>& counts, double aux_loss,
                     const std::vector<int32_t>& mine, const MicroBatch& mb) {
  if (st.expert_tokens.empty()) {
    st.sparse_layers = S, st.experts = E;
    st.expert_tokens.assign(size_t(S) * E, 0.0);
  }
  for (size_t i = 0; i < counts.size() && i < st.expert_tokens.size(); ++i) st.expert_tokens[i] += double(counts[i]);
  st.aux_loss_sum += aux_loss;
  ++st.aux_count;
  if (mine.empty() || mb.gen_routing.empty() || mb.routing_width != S * k) return;
  const int64_t rows = int64_t(mb.batch.num_tokens()) * S;
  for (int64_t r = 0; r < rows; ++r) {
    const int32_t* gen = mb.gen_routing.data() + r * k;
    if (gen[0] < 0) continue;
    std::vector<int32_t> a(gen, gen + k), b(mine.begin() + r * k, mine.begin() + (r + 1) * k);
    std::sort(a.begin(), a.end());
    std::sort(b.begin(), b.end());
    ++st.routing_compared;
    if (a != b) ++st.routing_differ;
  }
}

}  // namespace hone::rl
