// Expert parallelism (Megatron's expert_model_parallel_size with the alltoall token dispatcher), written once over a
// backend B. The experts of every sparse layer are split over the ep ranks of the group (rank r holds experts
// [r E/ep, (r+1) E/ep): parallel/shard_layout.h); the group is carved out of the data-parallel ranks of one tensor-
// and pipeline-parallel place (runtime/rank_grid.h), so each of its ranks routes its own micro-batch, and the routed
// rows cross the group at the mixture-of-experts feed-forward's dispatch and combine hooks (model/expert_dispatch.h):
//
//   plan       the rows each rank sends to each expert: one all-to-all of E/ep counts per rank pair over the group's
//              host Comm (the counts go first, as the rows' sizes depend on them; the host has them, it needed them
//              to size the rows)
//   dispatch   the routed rows [rows, C] to the ranks of their experts: one all-to-allv over the group's Comm of the
//              backend's memory (MPI on the CPU; NCCL on the engine's stream on a GPU: grouped ncclSend/ncclRecv);
//              the receiver regroups them by its expert (rows of its first expert from rank 0, 1, ..., then its
//              second expert's) with a row gather (B::moe_permute_forward)
//   combine    the expert outputs back to where their rows came from: the inverse row gather, one all-to-allv
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
#include <cstring>
#include <type_traits>
#include <vector>

#include "backend/backend.h"
#include "comm/comm.h"
#include "model/expert_dispatch.h"
#include "model/model_config.h"
#include "parallel/expert_exchange.h"
#include "parallel/shard_layout.h"

namespace hone {

template <typename B>
class ExpertParallelGroup final : public ExpertDispatch<typename B::Act> {
 public:
  using A = typename B::Act;
  using Exec = typename B::Exec;

  // host: the expert-parallel group's host Comm (the counts, host buffers); rows: its Comm over the backend's memory
  // (a device one on exec's stream on a GPU; the host one itself on the CPU). Both outlive this object. The layouts
  // are this rank's shard at (tp, tp_rank): with its experts only (layout()), and with every expert (full_layout(),
  // what generation holds).
  ExpertParallelGroup(const ModelConfig& c, Comm& host, Comm& rows, Exec exec, int tp = 1, int tp_rank = 0);
  // The CPU: one host Comm for the counts and the rows.
  ExpertParallelGroup(const ModelConfig& c, Comm& ep, int tp = 1, int tp_rank = 0)
    requires std::is_same_v<B, CpuBackend>
      : ExpertParallelGroup(c, ep, ep, Exec{}, tp, tp_rank) {}
  ExpertParallelGroup(const ExpertParallelGroup&) = delete;
  ExpertParallelGroup& operator=(const ExpertParallelGroup&) = delete;

  const ShardLayout& layout() const { return layout_; }
  const ShardLayout& full_layout() const { return full_; }
  const LayerShape& shape() const { return layout_.shape(); }
  Comm& host() const { return host_; }  // the group's host Comm (lockstep votes, host sums)
  int size() const { return host_.size(); }
  int rank() const { return host_.rank(); }

  // ---- the feed-forward's hooks ----
  int64_t plan(int layer, const int64_t* counts, int64_t* expert_counts) override;
  void dispatch(int layer, const A* token_rows, A* expert_rows, int64_t row) override;
  void combine(int layer, const A* expert_rows, A* token_rows, int64_t row) override;

  // ---- this rank's experts and every expert: flat buffers of layout() and full_layout() ----
  // Collective over the group: full (full_layout) gets local's dense part (layout) and every rank's experts, in the
  // backend's memory. T: the buffers' element type (compute weights, fp32 master weights or moments).
  template <typename T>
  void gather_experts(const T* local, T* full) const;
  // Host buffers (checkpoints): the same over the host Comm.
  void gather_experts_host(const float* local, float* full) const;
  // Host buffers: local gets this rank's part of full (no communication).
  void extract_experts(const float* full, float* local) const;

 private:
  template <typename T>
  using Array = typename B::template Array<T>;
  static constexpr CommType kRowType = std::is_same_v<A, float> ? CommType::f32 : CommType::bf16;
  struct Plan {
    ExpertExchangePlan exchange;
    Array<int32_t> source, inverse;  // expert-side row p <- received row source[p]; inverse the other way
    int64_t rows = 0;
  };
  // A run of the experts' region: this rank's block of one (layer, matrix) stack and where it lands in the full one.
  struct ExpertBlock {
    int64_t local = 0, full = 0, n = 0;
  };

  Comm& host_;
  Comm& rows_;
  const Exec exec_;
  ShardLayout layout_, full_;
  int El_ = 0;
  std::vector<Plan> plans_;  // per layer
  std::vector<ExpertBlock> blocks_;
  Array<A> stage_;  // received (dispatch) or regrouped (combine) rows
  std::vector<int64_t> a_, b_, c_, d_;
  std::vector<int32_t> source_, inverse_;  // host staging of a plan's row gathers
};

template <typename B>
template <typename T>
void ExpertParallelGroup<B>::gather_experts(const T* local, T* full) const {
  using Wire = std::conditional_t<sizeof(T) == 2, uint16_t, float>;  // bf16 travels as its bits
  static_assert(sizeof(T) == sizeof(Wire), "experts gather as bf16 or fp32");
  B::copy(exec_, full, local, size_t(layout_.num_dense_params()) * sizeof(T));
  for (const ExpertBlock& b : blocks_)
    rows_.all_gather(reinterpret_cast<const Wire*>(local + b.local), reinterpret_cast<Wire*>(full + b.full), b.n);
}

// The engines' names for the two instantiations.
struct CudaBackend;
using ExpertParallel = ExpertParallelGroup<CpuBackend>;
using GpuExpertParallel = ExpertParallelGroup<CudaBackend>;

}  // namespace hone
