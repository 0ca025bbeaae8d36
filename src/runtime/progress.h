// The progress of a long phase (a generation of minutes, validation, the logprob and training passes), shown by
// rank 0 alone while the phase runs, so that a job's log is not silent until the step line:
//   * on a terminal: one line rewritten in place (carriage return) once the phase has run `terminal_after_s`,
//     refreshed at most every `terminal_refresh_s`, erased when the phase ends (the step line takes its place);
//   * elsewhere (a batch log; any run under mpirun or srun): a plain line every `every_s` seconds of the phase,
//     never two within one interval.
// update() is called after every batched model pass, so it is cheap unless a line is due: one clock read. A phase
// whose units can each take long (a micro-batch of a large model: rl/micro_batch_progress.h) asks for heartbeat():
// a thread then shows the line at its times with the last counts, so that the log is not silent for the whole phase.
//
//   hone::ProgressLine p(hone::ProgressOptions::for_stdout(30.0));
//   p.begin("step 12 generation", "sequences");
//   p.update(finished, total, tokens);   // many times
//   p.end();
#pragma once

#include <condition_variable>
#include <cstdint>
#include <functional>
#include <mutex>
#include <string>
#include <thread>

namespace hone {

struct ProgressOptions {
  double every_s = 30;              // seconds between lines in a log that is not a terminal; 0: no progress at all
  bool terminal = false;            // the output is a terminal: one self-updating line
  double terminal_after_s = 2;      // a terminal line appears once the phase has run this long
  double terminal_refresh_s = 0.5;  // and is rewritten at most this often

  // every_s; `terminal` when stdout is a terminal and no launcher started hone (mpirun gives every rank a
  // pseudo-terminal, whatever its own output goes to; srun a pipe).
  static ProgressOptions for_stdout(double every_s);
};

class ProgressLine {
 public:
  using Sink = std::function<void(const std::string&)>;  // writes the text as it is (default: stdout, flushed)
  using Clock = std::function<double()>;                 // monotonic seconds (default: std::chrono::steady_clock)
  explicit ProgressLine(ProgressOptions options, Sink sink = {}, Clock clock = {});
  ~ProgressLine();
  ProgressLine(const ProgressLine&) = delete;
  ProgressLine& operator=(const ProgressLine&) = delete;

  bool enabled() const { return options_.every_s > 0; }
  // A phase starts: what it is ("step 12 generation") and what its count counts ("sequences"). Ends the last.
  void begin(std::string what, std::string unit);
  // done of total units, tokens processed so far in the phase (0: not shown).
  void update(int64_t done, int64_t total, int64_t tokens);
  // The phase ended: a terminal line is erased (and the heartbeat stops). Nothing when no phase runs.
  void end();
  // Until end(): the line also appears when it is due between update() calls, with the last counts (and 0 done
  // before the first update). The sink is then called from another thread, never two calls at once.
  void heartbeat();

  // The text of one line (no newline), for the phase at `elapsed` seconds.
  static std::string format(const std::string& what, const std::string& unit, int64_t done, int64_t total,
                            int64_t tokens, double elapsed);

 private:
  void show(double now, int64_t done, int64_t total, int64_t tokens);
  void due(double now, int64_t done, int64_t total, int64_t tokens);  // shows the line if due; lock held
  void beat();  // the heartbeat thread's loop

  ProgressOptions options_;
  Sink sink_;
  Clock clock_;
  bool running_ = false;
  bool on_screen_ = false;  // a terminal line is showing
  std::string what_, unit_;
  double start_ = 0, next_ = 0;
  int64_t done_ = 0, total_ = 0, tokens_ = 0;  // the last counts (for the heartbeat)
  std::mutex mutex_;
  std::condition_variable wake_;
  std::thread beater_;
  bool stop_beat_ = false;
};

}  // namespace hone
