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
  return plan_expert_exchange(ep_, El_, counts, expert_counts, plans_.at(size_t(layer)));
}

void ExpertParallel::dispatch(int layer, const float* token_rows, float* expert_rows, int64_t row) {
  const ExpertExchangePlan& pl = plans_.at(size_t(layer));
  rows_to_elements(pl.send_rows, row, elem_a_);
  rows_to_elements(pl.send_offsets, row, elem_b_);
  rows_to_elements(pl.recv_rows, row, elem_c_);
  rows_to_elements(pl.recv_offsets, row, elem_d_);
  recv_.resize(pl.source.size() * size_t(row));
  ep_.all_to_allv(token_rows, elem_a_, elem_b_, recv_.data(), elem_c_, elem_d_);
  for (size_t p = 0; p < pl.source.size(); ++p)
    std::memcpy(expert_rows + int64_t(p) * row, recv_.data() + pl.source[p] * row, size_t(row) * sizeof(float));
}

void ExpertParallel::combine(int layer, const float* expert_rows, float* token_rows, int64_t row) {
  const ExpertExchangePlan& pl = plans_.at(size_t(layer));
  rows_to_elements(pl.recv_rows, row, elem_a_);
  rows_to_elements(pl.recv_offsets, row, elem_b_);
  rows_to_elements(pl.send_rows, row, elem_c_);
  rows_to_elements(pl.send_offsets, row, elem_d_);
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
