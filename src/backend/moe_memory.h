// Where the mixture-of-experts feed-forward (model/moe_feed_forward.h) keeps what it computes, per backend: the
// backend's memory policy, the one place the two backends differ in the feed-forward. The steps themselves are
// written once over the backend's ops (backend/moe_ops.h); they ask MoeMemory<B> for their pointers.
//
//   CPU   every sparse layer's saved routing (probabilities, top-k, plan) and its expert-side rows live in host
//         vectors of its own, kept between forwards: nothing carved by the layer body (moe_feed_forward_bytes is
//         zero), and the routing stays readable on the host after any forward (MoeFeedForward::topk). The
//         routing's counts are on the host already: nothing waits.
//   CUDA  a sparse layer's saved routing and, at ep = 1, its expert-side rows (T k of them) are carved by the layer
//         body with the layer's other activations (LayerActivations::ffn), so recompute and the arenas' release treat
//         them as the rest; the passes' scratch from LayerScratch::ffn and ffn_backward. Under expert parallelism the
//         number of rows a rank's experts receive is known only after the counts cross the group: the forward waits
//         for the routing's offsets on the host, and the expert-side rows come from the device's stream-ordered
//         memory pool, released after the layer's backward (or by release(), when nothing follows). The experts'
//         GEMMs of a large pass (training, logprobs, prefill) run through cuBLAS, one GEMM per expert, once the
//         routing's offsets are on the host (the pass waits for them); a small one (decode steps, which CUDA graphs
//         capture: nothing there waits for the host) runs the one-launch kernel over the device's offsets.
//
// Both hold the load-balancing statistics of every sparse layer ([sparse layers, E] expert counts and probability
// sums, in the backend's memory) and the load-balancing gradient [E].
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

#include "backend/backend.h"
#include "backend/moe_ops.h"
#include "model/layer_shape.h"
#include "model/transformer_layer.h"

namespace hone {

// One sparse layer's saved routing: probs [T, E], topk_w and topk [T, k], the plan (offsets [E + 1], row_of and
// token_of [T k]) and the token-side expert outputs yp [T k, C]; where the backend saves them with the routing, the
// expert-side rows at ep = 1 (xe [T k, C], gate, up, act [T k, I]; null otherwise).
template <typename A>
struct MoeSaved {
  float* probs = nullptr, *topk_w = nullptr;
  int32_t* topk = nullptr, *offsets = nullptr, *row_of = nullptr, *token_of = nullptr;
  A* yp = nullptr, *xe = nullptr, *gate = nullptr, *up = nullptr, *act = nullptr;
};

// A forward's scratch: the router's logits [T, E] (fp32), the routing plan's workspace, and under expert parallelism
// the token-side rows before the dispatch xp [T k, C].
template <typename A>
struct MoeForwardScratch {
  float* logits = nullptr;
  char* route = nullptr;
  size_t route_bytes = 0;
  A* xp = nullptr;
};

// A backward's scratch: d(yp) [T k, C], d(topk_w) [T k] and d(logits) [T, E] (fp32; dlogits_act their copy in the
// activations' type where the backend's GEMM wants one); where the backend carves them here, the expert-side
// gradients at ep = 1 (null otherwise).
template <typename A>
struct MoeBackwardScratch {
  A* dyp = nullptr, *dlogits_act = nullptr;
  float* dtopk_w = nullptr, *dlogits = nullptr;
  A* dact = nullptr, *dgate = nullptr, *dup = nullptr, *dxe = nullptr;
};

// The expert side of a layer's pass: N rows, the expert plan, the rows xe [N, C], gate, up, act [N, I] and the
// experts' outputs ye [N, C].
template <typename A>
struct MoeExperts {
  int64_t N = 0;
  MoeExpertOffsets offsets;
  A* xe = nullptr, *gate = nullptr, *up = nullptr, *act = nullptr, *ye = nullptr;
};

// The expert side's gradients: dye, dxe [N, C], dact, dgate, dup [N, I], and dxp [T k, C] where the combine of dxe
// lands under expert parallelism (block: memory to give back after it, or null).
template <typename A>
struct MoeExpertGrads {
  A* dye = nullptr, *dact = nullptr, *dgate = nullptr, *dup = nullptr, *dxe = nullptr, *dxp = nullptr;
  void* block = nullptr;
};

template <typename B>
class MoeMemory;

// Every method below has the same signature on both backends (the feed-forward calls them in this order):
//   bytes(s, T)                             what the layer body carves for it (FeedForwardBytes)
//   counts(), prob_sum(), daux()            the load-balancing statistics, [S, E], [S, E], [E]
//   saved(layer, s, T, region, forward)     the layer's saved routing (forward: for it to write)
//   forward_scratch(s, T, region), backward_scratch(s, T, region)
//   route_counts(offsets, E, x)             expert parallelism: the layer's routed rows per expert, on the host
//   expert_counts(El)                       where the plan writes the rows each of this rank's experts receives
//   dispatched_experts(layer, s, N, x)      expert parallelism: the expert side of N received rows
//   local_experts(layer, s, sv, T), local_offsets(layer, ex, offsets, x)   ep = 1: the permuted rows themselves
//   experts(layer, s, sv, T)                the backward: the forward's expert side
//   expert_grads(layer, s, ex, bs, T, x), end_backward(layer, gx, x)
//   release(x)                              memory held beyond the activations, given back
template <>
class MoeMemory<CpuBackend> {
 public:
  using A = float;
  using Exec = CpuBackend::Exec;
  static FeedForwardBytes bytes(const LayerShape&, int) { return {}; }

  MoeMemory(int layers, int sparse_layers, int experts, bool dispatched);
  int32_t* counts() const { return counts_.get(); }
  float* prob_sum() const { return prob_sum_.get(); }
  float* daux() const { return daux_.get(); }

  MoeSaved<A> saved(int layer, const LayerShape& s, int T, char* region, bool forward);
  MoeForwardScratch<A> forward_scratch(const LayerShape& s, int T, char* region);
  MoeBackwardScratch<A> backward_scratch(const LayerShape& s, int T, char* region);
  const int64_t* route_counts(const int32_t* offsets, int E, const Exec& x);
  int64_t* expert_counts(int El);
  MoeExperts<A> dispatched_experts(int layer, const LayerShape& s, int64_t N, const Exec& x);
  MoeExperts<A> local_experts(int layer, const LayerShape& s, const MoeSaved<A>& sv, int T);
  void local_offsets(int layer, MoeExperts<A>& ex, const int32_t* offsets, int El, const Exec& x);
  MoeExperts<A> experts(int layer, const LayerShape& s, const MoeSaved<A>& sv, int T);
  MoeExpertGrads<A> expert_grads(int layer, const LayerShape& s, const MoeExperts<A>& ex,
                                 const MoeBackwardScratch<A>& bs, int T, const Exec& x);
  void end_backward(int, MoeExpertGrads<A>&, const Exec&) {}
  void release(const Exec&) {}

 private:
  struct Layer {
    int T = 0;
    std::vector<float> probs, topk_w, yp, xe, gate, up, act;
    std::vector<int32_t> topk, offsets, row_of, token_of, expert_offsets;
  };
  bool dispatched_ = false;
  std::vector<Layer> layers_;
  HostArray<int32_t> counts_;
  HostArray<float> prob_sum_, daux_;
  std::vector<int64_t> route_counts_, expert_counts_;
  // Scratch of one layer pass (not kept between layers).
  std::vector<float> logits_, xp_, ye_, dyp_, dtopk_w_, dlogits_, dye_, dact_, dgate_, dup_, dxe_, dxp_;
};

#if HONE_CUDA

template <>
class MoeMemory<CudaBackend> {
 public:
  using A = bf16;
  using Exec = CudaBackend::Exec;
  static FeedForwardBytes bytes(const LayerShape& s, int T);

  MoeMemory(int layers, int sparse_layers, int experts, bool dispatched);
  int32_t* counts() const { return counts_.get(); }
  float* prob_sum() const { return prob_sum_.get(); }
  float* daux() const { return daux_.get(); }

  MoeSaved<A> saved(int layer, const LayerShape& s, int T, char* region, bool forward);
  MoeForwardScratch<A> forward_scratch(const LayerShape& s, int T, char* region);
  MoeBackwardScratch<A> backward_scratch(const LayerShape& s, int T, char* region);
  const int64_t* route_counts(const int32_t* offsets, int E, const Exec& x);
  int64_t* expert_counts(int El);
  MoeExperts<A> dispatched_experts(int layer, const LayerShape& s, int64_t N, const Exec& x);
  MoeExperts<A> local_experts(int layer, const LayerShape& s, const MoeSaved<A>& sv, int T);
  void local_offsets(int layer, MoeExperts<A>& ex, const int32_t* offsets, int El, const Exec& x);
  MoeExperts<A> experts(int layer, const LayerShape& s, const MoeSaved<A>& sv, int T);
  MoeExpertGrads<A> expert_grads(int layer, const LayerShape& s, const MoeExperts<A>& ex,
                                 const MoeBackwardScratch<A>& bs, int T, const Exec& x);
  void end_backward(int layer, MoeExpertGrads<A>& gx, const Exec& x);
  void release(const Exec& x);

 private:
  bool dispatched_ = false;
  DeviceArray<int32_t> counts_;
  DeviceArray<float> prob_sum_, daux_;
  // Expert parallelism: per layer, the expert-side row offsets (device), the rows' number and their pool memory.
  std::vector<DeviceArray<int32_t>> expert_offsets_;
  std::vector<int64_t> expert_rows_;
  std::vector<void*> pool_;
  std::vector<int32_t> host_offsets_;
  // Per layer, the expert-side row offsets on the host when its last forward ran the experts' GEMMs through cuBLAS
  // (empty: the kernel ran them; the backward follows the forward's choice).
  std::vector<std::vector<int32_t>> host_eo_;
  std::vector<int64_t> host_counts_, host_expert_counts_;
};

#endif  // HONE_CUDA

}  // namespace hone
