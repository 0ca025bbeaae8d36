// The last stage's logprobs and loss metrics on every pipeline rank (pipeline_broadcast.h).
#include "rl/pipeline_broadcast.h"

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

namespace {

constexpr int kFields = 17;

void pack(const PolicyLossMetrics& m, double* x) {
  const double v[kFields] = {m.loss, m.pg_loss, m.kl_loss, m.entropy_loss, double(m.valid_tokens),
                             double(m.valid_seqs), double(m.clipped_tokens), double(m.dual_clipped_tokens),
                             double(m.is_masked_tokens), double(m.is_masked_seqs), m.ratio_sum, m.ratio_min,
                             m.ratio_max, m.kl_sum, m.is_weight_sum, m.mult_prob_error_sum, m.entropy_sum};
  std::copy(v, v + kFields, x);
}

PolicyLossMetrics unpack(const double* x) {
  PolicyLossMetrics m;
  m.loss = x[0], m.pg_loss = x[1], m.kl_loss = x[2], m.entropy_loss = x[3];
  m.valid_tokens = int64_t(x[4]), m.valid_seqs = int64_t(x[5]), m.clipped_tokens = int64_t(x[6]);
  m.dual_clipped_tokens = int64_t(x[7]), m.is_masked_tokens = int64_t(x[8]), m.is_masked_seqs = int64_t(x[9]);
  m.ratio_sum = x[10], m.ratio_min = x[11], m.ratio_max = x[12], m.kl_sum = x[13], m.is_weight_sum = x[14];
  m.mult_prob_error_sum = x[15], m.entropy_sum = x[16];
  return m;
}

}  // namespace

void broadcast_loss_metrics(Comm& pp, std::vector<PolicyLossMetrics>& metrics, int root) {
  if (pp.size() == 1) return;
  std::vector<double> x(metrics.size() * kFields);
  for (size_t i = 0; i < metrics.size(); ++i) pack(metrics[i], x.data() + i * kFields);
  pp.broadcast(x.data(), int64_t(x.size()), root);
  for (size_t i = 0; i < metrics.size(); ++i) metrics[i] = unpack(x.data() + i * kFields);
}

}  // namespace hone::rl
