// A pipeline schedule as data: for one pipeline rank, the list of actions the engine executes in order (forward
// micro-batch i on virtual chunk v, backward, and the exchanges of activations and gradients with the neighbouring
// ranks), built by a pure function from the pipeline's size, the virtual chunks per rank and the micro-batch count.
// The executor (parallel/pipeline_executor.h) runs the list; simulate_pipeline (parallel/pipeline_simulation.h)
// runs every rank's list together without a model, to prove that each send meets its receive and to count the
// bubble.
//
// Schedules (Narayanan et al., 2021; Megatron-LM's forward_backward_pipelining_*):
//   1F1B          training, vpp = 1: rank r runs min(pp - r - 1, m) warm-up forwards, then alternates one forward
//                 and one backward (steady state), then the remaining backwards (cool-down). At most pp - r
//                 micro-batches' activations are alive on rank r. Bubble: (pp - 1) / (m + pp - 1) of the time.
//   interleaved   training, vpp = V > 1: the micro-batches run in groups of pp, each group through chunk 0 of every
//                 rank, then chunk 1, ..; warm-up of 2 (pp - r - 1) + (V - 1) pp forwards (capped at m V), then
//                 1F1B over (micro-batch, chunk) pairs, backwards in reverse chunk order. Bubble:
//                 (pp - 1) / (V m + pp - 1) when pp divides m, at the price of V times the messages. Another m
//                 runs as the next multiple of pp with empty micro-batches (Megatron asks pp to divide m).
//   forward-only  the logprob phase: every forward in the (interleaved) order, no backward, nothing kept.
//
// Communication: between two compute actions a rank posts one exchange: the send of what the action before produced
// (its activations to the next chunk's rank, or its input gradient to the previous chunk's rank) together with the
// receive of what the action after needs. Both halves are posted at once (Comm::send_recv), so the steady state's
// "send my activation, receive my gradient" never waits for the neighbour's opposite half (Megatron's
// send_forward_recv_backward). Under interleaving the last rank sends to rank 0 (a ring).
// Plain header.
#pragma once

#include <string>
#include <vector>

namespace hone {

struct PipelineSchedule {
  int pp = 1;             // pipeline ranks
  int vpp = 1;            // virtual chunks per rank (interleaving when > 1)
  int microbatches = 0;   // m
  bool forward_only = false;

  // The micro-batches the schedule is built for: m, except that interleaved training rounds m up to a multiple of
  // pp (its groups of pp micro-batches meet without deadlock only when whole); micro-batches m and above are empty
  // (no tokens: nothing to compute, zero-size messages that NCCL and MPI skip on both sides).
  int scheduled_microbatches() const;
  // "1F1B", "interleaved 1F1B (vpp 2)", "forward-only", "interleaved forward-only (vpp 2)".
  std::string name() const;
  // The formula's bubble: (pp - 1) / (vpp m + pp - 1), the idle fraction of a rank's time with equal chunks and no
  // transfer time (exact for 1F1B and forward-only; for interleaving when pp divides m).
  double bubble_formula() const;
};

enum class PipeMessage : unsigned char { activation, gradient };

// One half of an exchange. The message is identified by (what, microbatch, chunk): for a send, the output of this
// rank's virtual chunk `chunk` (its activations forward, or its input gradient backward); for a receive, the input
// of this rank's chunk `chunk` (the activations entering it, or the gradient of its output).
struct PipeTransfer {
  int peer = -1;  // pipeline rank on the other side; -1: no transfer
  PipeMessage what = PipeMessage::activation;
  int microbatch = -1;
  int chunk = -1;
  explicit operator bool() const { return peer >= 0; }
};

struct PipeAction {
  enum class Kind : unsigned char { forward, backward, exchange };
  Kind kind = Kind::forward;
  int microbatch = -1, chunk = -1;  // forward and backward: the micro-batch and this rank's virtual chunk
  // exchange: every half posted together (Comm::exchange); at most two of each (an activation and a gradient)
  std::vector<PipeTransfer> sends, recvs;
};

// The actions of pipeline rank pp_rank, in order. Error on sizes < 1 or pp_rank outside [0, pp).
std::vector<PipeAction> pipeline_actions(const PipelineSchedule& s, int pp_rank);

// The compute order alone: (kind, micro-batch, chunk) of every forward and backward of pp_rank, in order.
std::vector<PipeAction> pipeline_compute_order(const PipelineSchedule& s, int pp_rank);

// "F3.1" / "B0.0" / "send act 3.1 to 1 + recv grad 0.0 from 1": for messages and tests.
std::string describe(const PipeAction& a);

}  // namespace hone
