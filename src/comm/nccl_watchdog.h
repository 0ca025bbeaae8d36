// The thread that watches an NcclComm's collectives when the host does not wait for them (a stream-ordered
// communicator, and the collectives the tensor-parallel layers run on a communication stream): the host enqueues a
// collective and its completion event and goes on; this thread waits for the events in the order they were
// enqueued (one communicator runs its collectives in that order). A collective's clock starts when it was enqueued
// or when the one before it completed, whichever is later; one that fails on the device, that NCCL reports failed,
// or that has not completed after timeout_s is reported once through `failed`, on this thread, and nothing is
// watched after it. Plain header (CUDA runtime only).
#pragma once

#if HONE_CUDA

#include <cuda_runtime.h>

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <deque>
#include <functional>
#include <mutex>
#include <string>
#include <thread>

namespace hone {

class NcclWatchdog {
 public:
  struct Hooks {
    // The communicator's asynchronous state: "" while it is well, else why it failed ("failed: ...").
    std::function<std::string()> async_error;
    // Called once, on the watchdog's thread, with the failed collective and why.
    std::function<void(const std::string& what, const std::string& why)> failed;
  };

  // device: the CUDA device of the events (made current on the thread).
  NcclWatchdog(int device, double timeout_s, Hooks hooks);
  ~NcclWatchdog();  // stops the thread; events still watched are released (CUDA frees them once they complete)
  NcclWatchdog(const NcclWatchdog&) = delete;
  NcclWatchdog& operator=(const NcclWatchdog&) = delete;

  // event: recorded on the collective's stream right after it (owned by the watchdog from now on); what names the
  // collective; enqueued: when the host enqueued it.
  void watch(cudaEvent_t event, std::string what, std::chrono::steady_clock::time_point enqueued);
  // Collectives enqueued and not yet seen complete.
  size_t pending() const;
  bool failed() const { return failed_.load(); }

 private:
  struct Item {
    cudaEvent_t event;
    std::string what;
    std::chrono::steady_clock::time_point enqueued;
  };
  void run();
  // "" once item completed (or the watchdog is stopping), else why it failed.
  std::string wait_for(const Item& item, std::chrono::steady_clock::time_point since);
  void release_all();

  const int device_;
  const double timeout_s_;
  const Hooks hooks_;
  mutable std::mutex mutex_;
  std::condition_variable wake_;
  std::deque<Item> queue_;  // front: the oldest collective, being waited for
  std::atomic<bool> stop_{false}, failed_{false};
  std::thread thread_;
};

}  // namespace hone

#endif  // HONE_CUDA
