// Expert parallelism over the backend (what crosses ranks and when: expert_parallel.h). Instantiated for every
// backend (backend/backend.h).
#include "parallel/expert_parallel.h"

#include "runtime/error.h"

namespace hone {

template <typename B>
ExpertParallelGroup<B>::ExpertParallelGroup(const ModelConfig& c, Comm& host, Comm& rows, Exec exec, int tp,
                                            int tp_rank)
    : host_(host),
      rows_(rows),
      exec_(exec),
      layout_(ShardLayout::of(c, tp, tp_rank, nullptr, 0, host.size(), host.rank())),
      full_(ShardLayout::of(c, tp, tp_rank)),
      El_(layout_.shape().experts) {
  HONE_CHECK(!host.on_device() && rows.on_device() == B::kDeviceMemory, "expert parallelism on the ", B::kName,
             " needs a host Comm and a ", B::kDeviceMemory ? "device" : "host", " Comm for the rows");
  HONE_CHECK(host.size() == rows.size() && host.rank() == rows.rank(), "the host and row expert groups differ");
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

template <typename B>
int64_t ExpertParallelGroup<B>::plan(int layer, const int64_t* counts, int64_t* expert_counts) {
  Plan& pl = plans_.at(size_t(layer));
  pl.rows = plan_expert_exchange(host_, El_, counts, expert_counts, pl.exchange);
  // Expert-side row p <- received row source[p], and the inverse for the combine, as row gathers in the backend's
  // memory.
  const std::vector<int64_t>& src = pl.exchange.source;
  source_.resize(src.size());
  inverse_.resize(src.size());
  for (size_t p = 0; p < src.size(); ++p) {
    source_[p] = int32_t(src[p]);
    inverse_[size_t(src[p])] = int32_t(p);
  }
  if (pl.source.size() < pl.rows) {
    pl.source = Array<int32_t>(pl.rows, "expert rows' sources");
    pl.inverse = Array<int32_t>(pl.rows, "expert rows' places");
  }
  if (pl.rows > 0) {
    B::upload(exec_, pl.source.get(), source_.data(), source_.size() * sizeof(int32_t));
    B::upload(exec_, pl.inverse.get(), inverse_.data(), inverse_.size() * sizeof(int32_t));
    B::sync(exec_);  // the next plan rewrites the host vectors
  }
  return pl.rows;
}

template <typename B>
void ExpertParallelGroup<B>::dispatch(int layer, const A* token_rows, A* expert_rows, int64_t row) {
  const Plan& pl = plans_.at(size_t(layer));
  if (stage_.size() < pl.rows * row) stage_ = Array<A>(pl.rows * row, "expert rows in transit");
  rows_to_elements(pl.exchange.send_rows, row, a_);
  rows_to_elements(pl.exchange.send_offsets, row, b_);
  rows_to_elements(pl.exchange.recv_rows, row, c_);
  rows_to_elements(pl.exchange.recv_offsets, row, d_);
  rows_.all_to_allv_raw(token_rows, a_, b_, stage_.get(), c_, d_, kRowType);
  B::moe_permute_forward(exec_, expert_rows, stage_.get(), pl.source.get(), int(pl.rows), int(row));
}

template <typename B>
void ExpertParallelGroup<B>::combine(int layer, const A* expert_rows, A* token_rows, int64_t row) {
  const Plan& pl = plans_.at(size_t(layer));
  if (stage_.size() < pl.rows * row) stage_ = Array<A>(pl.rows * row, "expert rows in transit");
  B::moe_permute_forward(exec_, stage_.get(), expert_rows, pl.inverse.get(), int(pl.rows), int(row));
  rows_to_elements(pl.exchange.recv_rows, row, a_);
  rows_to_elements(pl.exchange.recv_offsets, row, b_);
  rows_to_elements(pl.exchange.send_rows, row, c_);
  rows_to_elements(pl.exchange.send_offsets, row, d_);
  rows_.all_to_allv_raw(stage_.get(), a_, b_, token_rows, c_, d_, kRowType);
}

template <typename B>
void ExpertParallelGroup<B>::gather_experts_host(const float* local, float* full) const {
  std::memcpy(full, local, size_t(layout_.num_dense_params()) * sizeof(float));
  for (const ExpertBlock& b : blocks_) host_.all_gather(local + b.local, full + b.full, b.n);
}

template <typename B>
void ExpertParallelGroup<B>::extract_experts(const float* full, float* local) const {
  std::memcpy(local, full, size_t(layout_.num_dense_params()) * sizeof(float));
  for (const ExpertBlock& b : blocks_)
    std::memcpy(local + b.local, full + b.full + int64_t(rank()) * b.n, size_t(b.n) * sizeof(float));
}

#define HONE_INSTANTIATE_EXPERT_PARALLEL(B) template class ExpertParallelGroup<B>;
HONE_FOR_EACH_BACKEND(HONE_INSTANTIATE_EXPERT_PARALLEL)
#undef HONE_INSTANTIATE_EXPERT_PARALLEL

}  // namespace hone
