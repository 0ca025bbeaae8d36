// Activation recompute choices (train.recompute): what a decoder layer keeps from its forward for the backward.
//   none       every activation the backward reads is kept
//   selective  the outputs of the GEMMs and of attention are kept (q, k, v, attention output and lse, gate, up,
//              the residual after attention); the elementwise ops between them are rerun before the layer's
//              backward: both RMSNorm outputs, the q/k norms and RoPE (attention's inputs), SwiGLU (down_proj's
//              input). No GEMM, no attention and no communication is repeated. Megatron's selective recompute reruns
//              the core attention instead, which pays where the attention probabilities are stored; with fused
//              attention (only the log-sum-exp is kept) rerunning attention would cost more than a layer's GEMMs
//              at long sequences (and repeat the ring under context parallelism), so hone reruns the cheap ops.
//   full       only the layer's input is kept; its whole forward reruns into a scratch shared by all layers
// The layers' side: model/layer_recompute.h (over either backend). Plain header.
#pragma once

#include <string>

#include "runtime/error.h"

namespace hone {

enum class Recompute { none, selective, full };

inline const char* recompute_name(Recompute r) {
  return r == Recompute::none ? "none" : r == Recompute::selective ? "selective" : "full";
}

// The deck's value (train.recompute); hone::Error on another string (the schema admits only these three).
inline Recompute parse_recompute(const std::string& name) {
  if (name == "none") return Recompute::none;
  if (name == "selective") return Recompute::selective;
  HONE_CHECK(name == "full", "unknown recompute choice '", name, "' (none, selective or full)");
  return Recompute::full;
}

}  // namespace hone
