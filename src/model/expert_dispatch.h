// The point of a sparse layer where routed token rows cross ranks: expert parallelism's dispatch and combine. The
// mixture-of-experts feed-forward (model/moe_feed_forward.h) calls these hooks and nowhere else; with one
// expert-parallel rank there is no hook (nullptr) and the rows stay where they are. The hooks of expert
// parallelism live in parallel/expert_parallel.h, which owns the communicator.
//
// Token side: this rank's routed rows in expert order (every expert's rows, expert 0 first), counts[e] rows for
// expert e. Expert side: the rows this rank's experts compute, from every rank of the expert-parallel group,
// grouped by this rank's expert (its first expert's rows from rank 0, then from rank 1, ..., then its second
// expert's), expert_counts[i] rows for its expert i. Dispatch moves token-side rows to the expert side, combine
// moves expert-side rows back to the token side in the order they came from; each is the other's adjoint, so the
// backward of a dispatch is a combine and the other way round. Plain header: .cu-safe.
#pragma once

#include <cstdint>

namespace hone {

// E: the element type of a row (float on the CPU, bf16 on the GPU).
template <typename E>
class ExpertDispatch {
 public:
  virtual ~ExpertDispatch() = default;
  // Collective over the expert-parallel group (the counts cross it first): the exchange of layer `layer` for this
  // pass, from this rank's token-side counts [experts_total] (host). Writes the rows each of this rank's experts
  // receives into expert_counts [experts] (host) and returns their sum. The plan is kept for the layer's dispatches
  // and combines until the layer is planned again.
  virtual int64_t plan(int layer, const int64_t* counts, int64_t* expert_counts) = 0;
  // Collective: token_rows [sum counts, row] -> expert_rows [sum expert_counts, row] under layer's plan.
  virtual void dispatch(int layer, const E* token_rows, E* expert_rows, int64_t row) = 0;
  // Collective: expert_rows -> token_rows, the inverse move.
  virtual void combine(int layer, const E* expert_rows, E* token_rows, int64_t row) = 0;
};

}  // namespace hone
