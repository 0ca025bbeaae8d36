// Expert parallelism on the CPU engine (Megatron's expert_model_parallel_size with the alltoall token dispatcher),
// over the expert-parallel group's host Comm (MPI). The experts of every sparse layer are split over the ep ranks of
// the group (rank r holds experts [r E/ep, (r+1) E/ep): parallel/shard_layout.h); the group is carved out of the
// data-parallel ranks of one tensor- and pipeline-parallel place (runtime/rank_grid.h), so each of its ranks routes
// its own micro-batch, and the routed rows cross the group at the mixture-of-experts feed-forward's dispatch and
// combine hooks (model/expert_dispatch.h):
//
//   plan       the rows each rank sends to each expert: one all-to-all of E/ep counts per rank pair (the counts
//              go first, as the rows' sizes depend on them)
//   dispatch   the routed rows [rows, C] to the ranks of their experts: one all-to-allv; the receiver regroups them
//              by its expert (rows of its first expert from rank 0, 1, ..., then its second expert's)
//   combine    the expert outputs back to where their rows came from: the inverse regrouping, one all-to-allv
//
// Per sparse layer: forward dispatch + combine, backward the same two (the gradient of a combine is a dispatch),
// and the recompute of a layer repeats the forward's; each moves the layer's T k routed rows (less the rows that
// stay on their rank). Dense parameters are reduced over dp as without experts; the experts' gradients over the
// expert-data-parallel group (the ranks holding the same experts, edp = dp / ep): the optimizers take the expert
// region of the flat buffer (after every dense parameter) with that group.
//
// Generation keeps every expert on every rank (a replica of the whole model's experts, filled by gather_experts at
// refit: a generating rank never waits for another's decode steps), or with generation.experts = parallel this
// rank's experts, its passes in lockstep with the group's (parallel/expert_lockstep.h) through these same hooks.
#pragma once

#include <cstdint>
#include <vector>

#include "comm/comm.h"
#include "model/expert_dispatch.h"
#include "parallel/expert_exchange.h"
#include "model/model_config.h"
#include "parallel/shard_layout.h"

namespace hone {

class ExpertParallel final : public ExpertDispatch<float> {
 public:
  // ep must outlive this object. The layouts are this rank's shard at (tp, tp_rank): with its experts only
  // (layout()), and with every expert (full_layout(), what generation holds).
  ExpertParallel(const ModelConfig& c, Comm& ep, int tp = 1, int tp_rank = 0);
  ExpertParallel(const ExpertParallel&) = delete;
  ExpertParallel& operator=(const ExpertParallel&) = delete;

  const ShardLayout& layout() const { return layout_; }
  const ShardLayout& full_layout() const { return full_; }
  const LayerShape& shape() const { return layout_.shape(); }
  Comm& comm() const { return ep_; }
  int size() const { return ep_.size(); }
  int rank() const { return ep_.rank(); }

  // ---- the feed-forward's hooks ----
  int64_t plan(int layer, const int64_t* counts, int64_t* expert_counts) override;
  void dispatch(int layer, const float* token_rows, float* expert_rows, int64_t row) override;
  void combine(int layer, const float* expert_rows, float* token_rows, int64_t row) override;

  // ---- this rank's experts and every expert: flat buffers of layout() and full_layout() ----
  // Collective over the group: full gets the dense part of local and every rank's experts.
  void gather_experts(const float* local, float* full) const;
  // local gets this rank's part of full (no communication).
  void extract_experts(const float* full, float* local) const;

 private:
  // A run of the experts' region: this rank's block of one (layer, matrix) stack and where it lands in the full one.
  struct ExpertBlock {
    int64_t local = 0, full = 0, n = 0;
  };

  Comm& ep_;
  ShardLayout layout_, full_;
  int E_ = 0, El_ = 0;
  std::vector<ExpertExchangePlan> plans_;  // per layer
  std::vector<ExpertBlock> blocks_;
  std::vector<float> recv_, send_;  // scratch of one exchange
  std::vector<int64_t> elem_a_, elem_b_, elem_c_, elem_d_;
};

}  // namespace hone
