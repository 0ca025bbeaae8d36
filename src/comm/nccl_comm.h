// NcclComm: Comm over NCCL, device buffers, with a watchdog. One NcclComm per group of the rank grid (world, dp,
// tp, pp; src/comm/comm_factory.h makes them), bootstrapped over the host Comm of the same group: rank 0 calls
// ncclGetUniqueId, the host Comm broadcasts it (MPI_Bcast), every member calls ncclCommInitRankConfig with a
// NON-BLOCKING config (so a stuck communicator can be aborted). GPU buffers never go through MPI.
//
// Watchdog: every collective is enqueued on a stream, followed by an event; waiting polls the event and
// ncclCommGetAsyncError until it completes, NCCL reports an error, or timeout_s (parallel.nccl_timeout_s) passes
// since the enqueue. On failure the communicator is aborted (ncclCommAbort) and on_failure gets one message naming
// the collective, its byte count, the group and its world ranks, and the timeout; the default ends every rank
// through fatal_exit. The Comm interface's collectives run on options.stream and wait, unless the communicator is
// stream-ordered (options.stream_ordered: the tensor-parallel group, whose collectives sit between the layers'
// kernels): then they return at once, ordered on the stream like a kernel, and a watchdog thread (nccl_watchdog.h)
// waits for them instead. The *_on collectives of DeviceComm (a stream of the caller's) are watched by that thread
// too; the *_async ones return an NcclWork to wait() on later (overlap with compute). Collectives enqueued while
// the stream is being captured into a CUDA graph are graph nodes: they are not waited on (watch_stream() after the
// replay).
//
// A failure the watchdog thread finds aborts the communicator (which ends its kernels on the device) and is kept:
// the main thread's next call on the communicator throws it, and fatal_exit reports it as the cause
// (runtime.h's background_failure; MPI belongs to the main thread). If the main thread does not come within
// kBackgroundGraceSeconds, the rank reports it alone and exits.
// Point-to-point transfers (send, recv, send_recv, all_to_all(v)) are ncclSend/ncclRecv calls fused in one
// ncclGroupStart/End, under the same watchdog.
//
// Before the first NCCL communicator is made, NCCL_NVLS_ENABLE=0 is set unless the environment sets it: NVLink
// multicast (NVLS) can leave a shared host's GPUs unusable. Plain header (CUDA and NCCL only; MPI stays in the .cpp).
#pragma once

#if HONE_CUDA

#include <cuda_runtime.h>
#include <nccl.h>

#include <atomic>
#include <chrono>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "comm/device_comm.h"
#include "comm/nccl_watchdog.h"

namespace hone {

struct NcclOptions {
  double timeout_s = 600;         // parallel.nccl_timeout_s
  cudaStream_t stream = nullptr;  // stream of the synchronous collectives; null: a stream of the NcclComm's own
  // Called once after ncclCommAbort with the failure's message. Default (empty): fatal_exit ends every rank.
  // If it returns, the failing call throws hone::Error with the same message. For a failure the watchdog thread
  // finds, it is called on that thread, and the next call on the communicator throws.
  std::function<void(const std::string&)> on_failure = {};
  // The Comm interface's collectives return once enqueued (the watchdog thread waits for them); barrier() waits.
  bool stream_ordered = false;
};

class NcclComm;

// A collective in flight. wait() returns once it completed (the watchdog applies); dropping it without wait()
// does not wait (the event is released when the work completes).
class NcclWork {
 public:
  NcclWork() = default;
  NcclWork(NcclWork&& o) noexcept { *this = std::move(o); }
  NcclWork& operator=(NcclWork&& o) noexcept;
  NcclWork(const NcclWork&) = delete;
  NcclWork& operator=(const NcclWork&) = delete;
  ~NcclWork();

  void wait();                 // no-op when nothing is in flight
  bool pending() const { return event_ != nullptr; }
  cudaEvent_t event() const { return event_; }  // recorded after the collective (a stream may wait on it)
  const std::string& what() const { return what_; }

 private:
  friend class NcclComm;
  NcclComm* comm_ = nullptr;
  cudaEvent_t event_ = nullptr;
  std::string what_;  // "all_reduce_sum of 4096 bytes (f32)"
  std::chrono::steady_clock::time_point start_;
};

class NcclComm : public DeviceComm {
 public:
  // Collective over bootstrap's members (a host Comm of the same group; one rank: no MPI needed). Makes the
  // communicator on the current CUDA device.
  NcclComm(Comm& bootstrap, NcclOptions options);
  ~NcclComm() override;  // finalizes and destroys the communicator (nothing after an abort)
  NcclComm(const NcclComm&) = delete;
  NcclComm& operator=(const NcclComm&) = delete;

  int rank() const override { return rank_; }
  int size() const override { return size_; }
  const std::vector<int>& world_ranks() const override { return world_ranks_; }
  const std::string& name() const override { return name_; }

  // Enqueued on stream(), then waited for under the timeout (stream-ordered: watched by the watchdog thread).
  void all_reduce_sum_raw(const void* send, void* recv, int64_t count, CommType type) override;
  void reduce_scatter_sum_raw(const void* send, void* recv, int64_t recv_count, CommType type) override;
  void all_gather_raw(const void* send, void* recv, int64_t send_count, CommType type) override;
  void broadcast_raw(void* buf, int64_t count, CommType type, int root) override;
  void barrier() override;
  void all_reduce_max_raw(const void* send, void* recv, int64_t count, CommType type) override;
  void all_reduce_min_raw(const void* send, void* recv, int64_t count, CommType type) override;
  void send_raw(const void* buf, int64_t count, CommType type, int peer) override;
  void recv_raw(void* buf, int64_t count, CommType type, int peer) override;
  void send_recv_raw(const void* send, int64_t send_count, int dest, void* recv, int64_t recv_count, int source,
                     CommType type) override;
  void exchange_raw(std::span<const PeerTransfer> ops, CommType type) override;
  void all_to_all_raw(const void* send, void* recv, int64_t count, CommType type) override;
  void all_to_allv_raw(const void* send, std::span<const int64_t> send_counts, std::span<const int64_t> send_displs,
                       void* recv, std::span<const int64_t> recv_counts, std::span<const int64_t> recv_displs,
                       CommType type) override;

  // DeviceComm: enqueued on s, watched by the watchdog thread (the host does not wait).
  void all_gather_on_raw(const void* send, void* recv, int64_t send_count, CommType type, cudaStream_t s) override;
  void reduce_scatter_sum_on_raw(const void* send, void* recv, int64_t recv_count, CommType type,
                                 cudaStream_t s) override;

  // Asynchronous on `stream`: the collective starts after the work already queued there.
  NcclWork all_reduce_sum_async(const void* send, void* recv, int64_t count, CommType type, cudaStream_t stream);
  // op: ncclSum, ncclMax or ncclMin.
  NcclWork all_reduce_async(const void* send, void* recv, int64_t count, CommType type, ncclRedOp_t op,
                            cudaStream_t stream);
  NcclWork reduce_scatter_sum_async(const void* send, void* recv, int64_t recv_count, CommType type,
                                    cudaStream_t stream);
  NcclWork all_gather_async(const void* send, void* recv, int64_t send_count, CommType type, cudaStream_t stream);
  NcclWork broadcast_async(void* buf, int64_t count, CommType type, int root, cudaStream_t stream);
  NcclWork send_async(const void* buf, int64_t count, CommType type, int peer, cudaStream_t stream);
  NcclWork recv_async(void* buf, int64_t count, CommType type, int peer, cudaStream_t stream);
  NcclWork send_recv_async(const void* send, int64_t send_count, int dest, void* recv, int64_t recv_count,
                           int source, CommType type, cudaStream_t stream);
  NcclWork exchange_async(std::span<const PeerTransfer> ops, CommType type, cudaStream_t stream);
  NcclWork all_to_all_async(const void* send, void* recv, int64_t count, CommType type, cudaStream_t stream);
  NcclWork all_to_allv_async(const void* send, std::span<const int64_t> send_counts,
                             std::span<const int64_t> send_displs, void* recv, std::span<const int64_t> recv_counts,
                             std::span<const int64_t> recv_displs, CommType type, cudaStream_t stream);

  // Waits, under the watchdog, for everything queued on stream() so far (e.g. a CUDA graph whose captured
  // collectives cannot be waited on one by one); `what` names it in a failure message.
  void watch_stream(const std::string& what) override;

  cudaStream_t stream() const override { return stream_; }
  double timeout_s() const { return options_.timeout_s; }
  bool stream_ordered() const { return options_.stream_ordered; }
  bool aborted() const { return aborted_.load(); }
  // Collectives the watchdog thread still waits for (0 without one).
  size_t watched() const { return watchdog_ ? watchdog_->pending() : 0; }

  // How long a failure found by the watchdog thread waits for the main thread to report it.
  static constexpr double kBackgroundGraceSeconds = 30;

  ncclComm_t handle() const { return comm_; }
  int device() const { return device_; }

 private:
  friend class NcclWork;
  void wait(NcclWork& work);
  // After an NCCL call on the non-blocking communicator: waits while it reports ncclInProgress; fails on an error.
  void settle(ncclResult_t r, const std::string& what, std::chrono::steady_clock::time_point start);
  NcclWork launched(std::string what, cudaStream_t stream, std::chrono::steady_clock::time_point start);
  [[noreturn]] void fail(const std::string& what, const std::string& why);
  // The watchdog thread's failure: abort, keep the message, tell on_failure or the runtime.
  void fail_in_background(const std::string& what, const std::string& why);
  std::string failure_message(const std::string& what, const std::string& why) const;
  std::string background_message() const;
  // A collective the Comm interface enqueued: waited for, or watched when stream-ordered.
  void finish(NcclWork&& work);
  // Hands work to the watchdog thread (made on first use).
  void watch(NcclWork&& work);
  // One ncclSend (send) or ncclRecv of count elements with peer.
  struct P2p {
    bool send;
    const void* buf;
    int64_t count;
    int peer;
  };
  // The transfers as one NCCL group (they progress together: no ordering between peers needed); those of 0
  // elements are left out. Nothing to move: an empty work.
  NcclWork p2p_group(std::string what, const std::vector<P2p>& ops, CommType type, cudaStream_t stream);
  void check_usable(const char* op) const;

  NcclOptions options_;
  std::string name_;
  int rank_ = 0, size_ = 1, device_ = 0;
  std::vector<int> world_ranks_;
  ncclComm_t comm_ = nullptr;
  cudaStream_t stream_ = nullptr;
  bool own_stream_ = false;
  std::atomic<bool> aborted_{false};
  // Held while calling NCCL on the communicator, so that the watchdog thread's ncclCommAbort never runs during
  // an enqueue (NCCL calls on one communicator must not overlap); recursive: a failing enqueue aborts. Polling
  // ncclCommGetAsyncError too: while the watchdog thread polled beside the main thread's enqueues, the
  // sequence-parallel step (thousands of collectives) failed inside NCCL's group launch with a garbage job error.
  mutable std::recursive_mutex nccl_mutex_;
  std::string background_message_;  // the watchdog thread's failure (under nccl_mutex_)
  std::unique_ptr<NcclWatchdog> watchdog_;
  float* scratch_ = nullptr;  // one float for barrier()
};

namespace detail {
// Sets NCCL_NVLS_ENABLE=0 unless the environment already sets it (says so at debug level). Returns whether it set it.
bool disable_nvls_unless_set();
// Sets NCCL_GRAPH_REGISTER=0 unless the environment already sets it (says so at debug level). Returns whether it set
// it. Registration would let the peers map the buffers of a generation decode graph's collectives, and that mapping
// would keep the old memory alive past the generator's release(), while the kept graph goes on with new memory at
// the same address (src/generation/generation_forward.h).
bool disable_graph_register_unless_set();
}  // namespace detail

}  // namespace hone

#endif  // HONE_CUDA
