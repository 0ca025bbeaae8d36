// Runs one pipeline rank's action list (parallel/pipeline_schedule.h) over the pipeline group's Comm: compute
// actions go to the stage's work (its forward and backward of a micro-batch on one of its chunks), exchanges post
// their sends and receives at once (Comm::exchange: MPI on the CPU, NCCL send/recv on the engine's stream on the
// GPU). The same executor serves both engines; what a stage computes and where its messages live is the work's.
// Plain header.
#pragma once

#include <cstdint>
#include <vector>

#include "comm/comm.h"
#include "parallel/pipeline_schedule.h"

namespace hone {

// One pipeline rank's share of a pass: its chunks of the model over the step's micro-batches.
class PipelineStageWork {
 public:
  virtual ~PipelineStageWork() = default;
  // Elements of a message of micro-batch mb (its hidden state or that state's gradient at a chunk boundary: the
  // same size for both, and for every chunk); 0 for an empty micro-batch (nothing moves).
  virtual int64_t message_elements(int mb) const = 0;
  // Where a received message lands (the input of chunk t.chunk's forward, or the gradient of its output), and what
  // a sent one reads (chunk t.chunk's output, or its input's gradient): message_elements(t.microbatch) elements.
  virtual void* receive_buffer(const PipeTransfer& t) = 0;
  virtual const void* send_buffer(const PipeTransfer& t) = 0;
  virtual void forward(int mb, int chunk) = 0;
  virtual void backward(int mb, int chunk) = 0;
  // Waits for queued compute (a GPU stream) so that an exchange's time is its own; nothing on the CPU.
  virtual void synchronize() {}
};

// Wall time of a pass on this rank: in compute actions, and in exchanges (the transfers and the wait for the
// neighbours: the bubble, as this rank saw it).
struct PipelineRunStats {
  double compute_s = 0, exchange_s = 0;
  int64_t messages_sent = 0, bytes_sent = 0;

  PipelineRunStats& operator+=(const PipelineRunStats& o);
};

// Executes `actions` (pipeline_actions(schedule, pp.rank())). Compute actions of micro-batches at or past
// real_microbatches (the empty ones an interleaved schedule adds) are skipped. type: the element type of the
// messages (f32 on the CPU, bf16 on the GPU).
PipelineRunStats run_pipeline(const std::vector<PipeAction>& actions, int real_microbatches, PipelineStageWork& work,
                              Comm& pp, CommType type);

}  // namespace hone
