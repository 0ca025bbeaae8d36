// NcclWatchdog: the thread that waits for stream-ordered collectives (what and why: nccl_watchdog.h).
#include "comm/nccl_watchdog.h"

#if HONE_CUDA

#include <algorithm>

#include "cuda/check.h"
#include "runtime/error.h"

namespace hone {
namespace {

using Clock = std::chrono::steady_clock;

// The host does not wait for these collectives: polling every millisecond costs nothing on the critical path and
// keeps the thread's share of a core small.
constexpr auto kPollInterval = std::chrono::milliseconds(1);

double seconds_since(Clock::time_point t) { return std::chrono::duration<double>(Clock::now() - t).count(); }

}  // namespace

NcclWatchdog::NcclWatchdog(int device, double timeout_s, Hooks hooks)
    : device_(device), timeout_s_(timeout_s), hooks_(std::move(hooks)) {
  thread_ = std::thread([this] { run(); });
}

NcclWatchdog::~NcclWatchdog() {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    stop_ = true;
  }
  wake_.notify_all();
  if (thread_.joinable()) thread_.join();
  release_all();
}

void NcclWatchdog::watch(cudaEvent_t event, std::string what, Clock::time_point enqueued) {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    if (failed_.load()) {  // nothing is watched after a failure
      cudaEventDestroy(event);
      return;
    }
    queue_.push_back(Item{event, std::move(what), enqueued});
  }
  wake_.notify_one();
}

size_t NcclWatchdog::pending() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return queue_.size();
}

void NcclWatchdog::release_all() {
  std::lock_guard<std::mutex> lock(mutex_);
  for (const Item& i : queue_) cudaEventDestroy(i.event);
  queue_.clear();
}

std::string NcclWatchdog::wait_for(const Item& item, Clock::time_point since) {
  for (;;) {
    const cudaError_t e = cudaEventQuery(item.event);
    if (e == cudaSuccess || stop_.load()) return "";
    if (e != cudaErrorNotReady) return cat("failed on the device: ", detail::cuda_status_text(e));
    std::string nccl = hooks_.async_error();
    if (!nccl.empty()) return nccl;
    const double waited = seconds_since(since);
    if (waited > timeout_s_) return cat("did not complete within ", timeout_s_, " s (waited ", waited, " s)");
    std::this_thread::sleep_for(kPollInterval);
  }
}

void NcclWatchdog::run() {
  cudaSetDevice(device_);
  Clock::time_point last_done = Clock::now();
  for (;;) {
    Item item;
    {
      std::unique_lock<std::mutex> lock(mutex_);
      wake_.wait(lock, [&] { return stop_.load() || !queue_.empty(); });
      if (stop_.load()) return;
      item = queue_.front();  // only this thread removes items; the event stays owned by the queue
    }
    const std::string why = wait_for(item, std::max(item.enqueued, last_done));
    if (stop_.load()) return;
    if (!why.empty()) {
      failed_ = true;
      release_all();
      hooks_.failed(item.what, why);
      return;
    }
    {
      std::lock_guard<std::mutex> lock(mutex_);
      cudaEventDestroy(queue_.front().event);
      queue_.pop_front();
    }
    last_done = Clock::now();
  }
}

}  // namespace hone

#endif  // HONE_CUDA
