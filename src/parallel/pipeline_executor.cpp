// The pipeline executor (pipeline_executor.h).
#include "parallel/pipeline_executor.h"

#include <chrono>

#include "runtime/error.h"

namespace hone {

PipelineRunStats& PipelineRunStats::operator+=(const PipelineRunStats& o) {
  compute_s += o.compute_s, exchange_s += o.exchange_s;
  messages_sent += o.messages_sent, bytes_sent += o.bytes_sent;
  return *this;
}

PipelineRunStats run_pipeline(const std::vector<PipeAction>& actions, int real_microbatches, PipelineStageWork& work,
                              Comm& pp, CommType type) {
  using Clock = std::chrono::steady_clock;
  auto seconds = [](Clock::time_point a, Clock::time_point b) { return std::chrono::duration<double>(b - a).count(); };
  PipelineRunStats stats;
  std::vector<PeerTransfer> ops;
  for (const PipeAction& a : actions) {
    if (a.kind != PipeAction::Kind::exchange) {
      if (a.microbatch >= real_microbatches) continue;  // an empty micro-batch: nothing to compute
      const Clock::time_point t0 = Clock::now();
      if (a.kind == PipeAction::Kind::forward) work.forward(a.microbatch, a.chunk);
      else work.backward(a.microbatch, a.chunk);
      stats.compute_s += seconds(t0, Clock::now());
      continue;
    }
    ops.clear();
    for (const PipeTransfer& t : a.sends) {
      const int64_t n = work.message_elements(t.microbatch);
      if (n == 0) continue;  // the peer leaves its receive out too
      ops.push_back({true, work.send_buffer(t), n, t.peer});
      ++stats.messages_sent;
      stats.bytes_sent += n * int64_t(comm_type_size(type));
    }
    for (const PipeTransfer& t : a.recvs) {
      const int64_t n = work.message_elements(t.microbatch);
      if (n > 0) ops.push_back({false, work.receive_buffer(t), n, t.peer});
    }
    if (ops.empty()) continue;
    const Clock::time_point t0 = Clock::now();
    work.synchronize();
    const Clock::time_point t1 = Clock::now();
    stats.compute_s += seconds(t0, t1);  // compute still queued on the device
    pp.exchange_raw(ops, type);
    stats.exchange_s += seconds(t1, Clock::now());
  }
  const Clock::time_point t0 = Clock::now();
  work.synchronize();
  stats.compute_s += seconds(t0, Clock::now());
  return stats;
}

}  // namespace hone
