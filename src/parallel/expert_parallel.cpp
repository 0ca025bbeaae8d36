// The CPU engine's expert parallelism (what crosses ranks and when: expert_parallel.h).
#include "parallel/expert_parallel.h"

#include <cstring>

#include "runtime/error.h"

namespace hone {

ExpertParallel::ExpertParallel(const ModelConfig& c, Comm& ep, int tp, int tp_rank)
    : ep_(ep),
      layout_(ShardLayout::of(c, tp, tp_rank, nullptr, 0, ep.size(), ep.rank())),
      full_(ShardLayout::of(c, tp, tp_rank)),
      E_(c.num_experts),
      El_(layout_.shape().experts) {
  HONE_CHECK(!ep.on_device(), "the CPU expert-parallel group needs a host Comm");
  HONE_CHECK(c.is_moe(), "expert parallelism over a model without experts");
  plans_.resize(size_t(c.num_hidden_layers));
  // Each (layer, matrix) stack of the experts' region: this rank's experts are one block of it.
  const int first = layout_.shape().expert_begin;
  for (const ParamShard& f : full_.params()) {
    if (!f.expert() || f.spec.expert != 0) continue;
    for (const ParamShard& p : layout_.params()) {
      if (p.expert() && p.spec.layer == f.spec.layer && p.spec.param == f.spec.param && p.spec.expert == first) {
        blocks_.push_back({p.offset, f.offset, int64_t(El_) * p.local_numel()});
        break;
      }
    }
  }
  HONE_CHECK(layout_.num_dense_params() == full_.num_dense_params(), "the dense parts of the layouts differ");
}

int64_t ExpertParallel::plan(int layer, const int64_t* counts, int64_t* expert_counts) {
  const int P = size();
  Plan& pl = plans_.at(size_t(layer));
  // The counts first: rank s learns how many rows of each of its experts every rank sends.
  counts_.resize(size_t(P) * El_);
  ep_.all_to_all(counts, counts_.data(), El_);
  pl.send_rows.assign(size_t(P), 0);
  pl.recv_rows.assign(size_t(P), 0);
  for (int r = 0; r < P; ++r)
    for (int i = 0; i < El_; ++i) {
      pl.send_rows[size_t(r)] += counts[size_t(r) * El_ + size_t(i)];
      pl.recv_rows[size_t(r)] += counts_[size_t(r) * El_ + size_t(i)];
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
  for (int i = 0; i < El_; ++i) {
    expert_counts[i] = 0;
    for (int s = 0; s < P; ++s) {
      int64_t at = pl.recv_offsets[size_t(s)];
      for (int j = 0; j < i; ++j) at += counts_[size_t(s) * El_ + size_t(j)];
      const int64_t n = counts_[size_t(s) * El_ + size_t(i)];
      for (int64_t q = 0; q < n; ++q) pl.source.push_back(at + q);
      expert_counts[i] += n;
      total += n;
    }
  }
  return total;
}

void ExpertParallel::dispatch(int layer, const float* token_rows, float* expert_rows, int64_t row) {
  const Plan& pl = plans_.at(size_t(layer));
  const int P = size();
  auto scaled = [&](const std::vector<int64_t>& v, std::vector<int64_t>& out) {
    out.resize(size_t(P));
    for (int r = 0; r < P; ++r) out[size_t(r)] = v[size_t(r)] * row;
  };
  scaled(pl.send_rows, elem_a_);
  scaled(pl.send_offsets, elem_b_);
  scaled(pl.recv_rows, elem_c_);
  scaled(pl.recv_offsets, elem_d_);
  recv_.resize(pl.source.size() * size_t(row));
  ep_.all_to_allv(token_rows, elem_a_, elem_b_, recv_.data(), elem_c_, elem_d_);
  for (size_t p = 0; p < pl.source.size(); ++p)
    std::memcpy(expert_rows + int64_t(p) * row, recv_.data() + pl.source[p] * row, size_t(row) * sizeof(float));
}

void ExpertParallel::combine(int layer, const float* expert_rows, float* token_rows, int64_t row) {
  const Plan& pl = plans_.at(size_t(layer));
  const int P = size();
  auto scaled = [&](const std::vector<int64_t>& v, std::vector<int64_t>& out) {
    out.resize(size_t(P));
    for (int r = 0; r < P; ++r) out[size_t(r)] = v[size_t(r)] * row;
  };
  scaled(pl.recv_rows, elem_a_);
  scaled(pl.recv_offsets, elem_b_);
  scaled(pl.send_rows, elem_c_);
  scaled(pl.send_offsets, elem_d_);
  send_.resize(pl.source.size() * size_t(row));
  for (size_t p = 0; p < pl.source.size(); ++p)
    std::memcpy(send_.data() + pl.source[p] * row, expert_rows + int64_t(p) * row, size_t(row) * sizeof(float));
  ep_.all_to_allv(send_.data(), elem_a_, elem_b_, token_rows, elem_c_, elem_d_);
}

void ExpertParallel::gather_experts(const float* local, float* full) const {
  std::memcpy(full, local, size_t(layout_.num_dense_params()) * sizeof(float));
  for (const ExpertBlock& b : blocks_) ep_.all_gather(local + b.local, full + b.full, b.n);
}

void ExpertParallel::extract_experts(const float* full, float* local) const {
  std::memcpy(local, full, size_t(layout_.num_dense_params()) * sizeof(float));
  for (const ExpertBlock& b : blocks_)
    std::memcpy(local + b.local, full + b.full + int64_t(rank()) * b.n, size_t(b.n) * sizeof(float));
}

}  // namespace hone
