// Wall-clock timing: Timer (one stopwatch) and PhaseTimer (seconds accumulated per named phase, e.g. the GRPO
// phases generation, reward, logprob, training, refit, total).
// On the GPU, work is asynchronous: a phase must wait for the device before reading the clock. PhaseTimer takes
// a sync hook for that (e.g. [] { CUDA_CHECK(cudaDeviceSynchronize()); }), called at every start and stop.
#pragma once

#include <chrono>
#include <exception>
#include <functional>
#include <string>
#include <vector>

namespace hone {

class Timer {
 public:
  Timer() { reset(); }
  void reset() { start_ = std::chrono::steady_clock::now(); }
  double seconds() const {  // since construction or the last reset
    return std::chrono::duration<double>(std::chrono::steady_clock::now() - start_).count();
  }

 private:
  std::chrono::steady_clock::time_point start_;
};

class PhaseTimer {
 public:
  using SyncHook = std::function<void()>;
  explicit PhaseTimer(SyncHook sync = {}) : sync_(std::move(sync)) {}

  void start(const std::string& phase);  // Error when the phase is already running
  void stop(const std::string& phase);   // adds the time since start; Error when the phase is not running
  bool running(const std::string& phase) const;
  double seconds(const std::string& phase) const;  // accumulated; 0 for a phase never timed
  const std::vector<std::string>& phases() const { return names_; }  // in order of first start
  void clear();                                                      // forget every phase (e.g. each step)

  // RAII: starts the phase now, stops it at scope exit.
  class Scope {
   public:
    Scope(PhaseTimer& t, std::string phase)
        : t_(t), phase_(std::move(phase)), unwinding_at_start_(std::uncaught_exceptions()) {
      t_.start(phase_);
    }
    // A failing sync hook throws from here, except while an exception is already unwinding (then it is dropped).
    ~Scope() noexcept(false) {
      if (!t_.running(phase_)) return;
      if (std::uncaught_exceptions() == unwinding_at_start_) {
        t_.stop(phase_);
      } else {
        try {
          t_.stop(phase_);
        } catch (...) {
        }
      }
    }
    Scope(const Scope&) = delete;
    Scope& operator=(const Scope&) = delete;

   private:
    PhaseTimer& t_;
    std::string phase_;
    int unwinding_at_start_;
  };
  Scope scope(const std::string& phase) { return Scope(*this, phase); }

 private:
  struct Phase {
    double seconds = 0;
    bool running = false;
    std::chrono::steady_clock::time_point started;
  };
  Phase* find(const std::string& phase);
  const Phase* find(const std::string& phase) const;

  SyncHook sync_;
  std::vector<std::string> names_;
  std::vector<Phase> data_;  // parallel to names_: a handful of phases, a linear search is fastest
};

}  // namespace hone
