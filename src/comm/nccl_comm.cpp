// NcclComm: NCCL bootstrap over a host Comm, non-blocking communicators, and the watchdog that turns a stuck or
// failed collective into one message and the end of the run instead of a hang.
#include "comm/nccl_comm.h"

#if HONE_CUDA

#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <thread>
#include <utility>

#include "cuda/check.h"
#include "runtime/error.h"
#include "runtime/log.h"
#include "runtime/runtime.h"

namespace hone {
namespace {

using Clock = std::chrono::steady_clock;

ncclDataType_t nccl_type(CommType t) {
  switch (t) {
    case CommType::f32: return ncclFloat32;
    case CommType::bf16: return ncclBfloat16;
    case CommType::f64: return ncclFloat64;
    case CommType::i64: return ncclInt64;
    case CommType::i32: return ncclInt32;
  }
  return ncclFloat32;
}

std::string describe_op(const char* op, int64_t count, CommType type) {
  return cat(op, " of ", count * int64_t(comm_type_size(type)), " bytes (", count, " x ", comm_type_name(type), ")");
}

double seconds_since(Clock::time_point t) { return std::chrono::duration<double>(Clock::now() - t).count(); }

// Polls fast at first, then backs off to 50 us so a long wait does not burn a core.
void pause(int& spins) {
  if (++spins < 200)
    std::this_thread::yield();
  else
    std::this_thread::sleep_for(std::chrono::microseconds(50));
}

}  // namespace

namespace detail {
bool disable_nvls_unless_set() {
  if (std::getenv("NCCL_NVLS_ENABLE") != nullptr) return false;
  setenv("NCCL_NVLS_ENABLE", "0", /*overwrite=*/0);
  log_debug("NCCL_NVLS_ENABLE=0 set (NVLink multicast off; set the variable to choose otherwise)");
  return true;
}

bool disable_graph_register_unless_set() {
  if (std::getenv("NCCL_GRAPH_REGISTER") != nullptr) return false;
  setenv("NCCL_GRAPH_REGISTER", "0", /*overwrite=*/0);
  log_debug("NCCL_GRAPH_REGISTER=0 set (no registration of the buffers of graph-captured collectives; the kept ",
            "decode graphs of generation need it: set the variable to choose otherwise)");
  return true;
}
}  // namespace detail

// ---- NcclWork ----------------------------------------------------------------------------------------------------

NcclWork& NcclWork::operator=(NcclWork&& o) noexcept {
  if (this != &o) {
    if (event_) cudaEventDestroy(event_);
    comm_ = o.comm_, event_ = o.event_, what_ = std::move(o.what_), start_ = o.start_;
    o.event_ = nullptr, o.comm_ = nullptr;
  }
  return *this;
}

NcclWork::~NcclWork() {
  if (event_) cudaEventDestroy(event_);  // released by CUDA once the work completes
}

void NcclWork::wait() {
  if (event_) comm_->wait(*this);
}

// ---- NcclComm ----------------------------------------------------------------------------------------------------

NcclComm::NcclComm(Comm& bootstrap, NcclOptions options)
    : options_(std::move(options)), name_(bootstrap.name()), rank_(bootstrap.rank()), size_(bootstrap.size()),
      world_ranks_(bootstrap.world_ranks()) {
  HONE_CHECK(!bootstrap.on_device(), "an NcclComm is bootstrapped over a host Comm");
  HONE_CHECK(options_.timeout_s > 0, "the NCCL timeout must be positive, not ", options_.timeout_s);
  detail::disable_nvls_unless_set();
  detail::disable_graph_register_unless_set();
  CUDA_CHECK(cudaGetDevice(&device_));

  ncclUniqueId id;
  std::memset(&id, 0, sizeof(id));
  if (rank_ == 0) NCCL_CHECK(ncclGetUniqueId(&id));
  static_assert(sizeof(ncclUniqueId) % sizeof(int64_t) == 0, "the NCCL id travels as int64 words");
  int64_t words[sizeof(ncclUniqueId) / sizeof(int64_t)];
  std::memcpy(words, &id, sizeof(id));
  bootstrap.broadcast(words, int64_t(sizeof(words) / sizeof(int64_t)), 0);
  std::memcpy(&id, words, sizeof(id));

  ncclConfig_t config = NCCL_CONFIG_INITIALIZER;
  config.blocking = 0;  // every call returns at once; ncclCommGetAsyncError says when it is done (abortable)
  const Clock::time_point start = Clock::now();
  const ncclResult_t r = ncclCommInitRankConfig(&comm_, size_, id, rank_, &config);
  settle(r, "ncclCommInitRankConfig", start);

  if (options_.stream) {
    stream_ = options_.stream;
  } else {
    CUDA_CHECK(cudaStreamCreateWithFlags(&stream_, cudaStreamNonBlocking));
    own_stream_ = true;
  }
  CUDA_CHECK(cudaMalloc(&scratch_, sizeof(float)));
  CUDA_CHECK(cudaMemset(scratch_, 0, sizeof(float)));
  log_debug("NCCL communicator for the ", describe(), " on device ", device_, ": rank ", rank_, " of ", size_);
}

NcclComm::~NcclComm() {
  watchdog_.reset();  // stops watching; finalize below waits for what is still in flight
  if (comm_ && !aborted_) {
    // Finalize flushes outstanding work; on the non-blocking communicator it may answer ncclInProgress.
    ncclResult_t r = ncclCommFinalize(comm_);
    const Clock::time_point start = Clock::now();
    ncclResult_t state = r;
    while (r == ncclSuccess || r == ncclInProgress) {
      if (ncclCommGetAsyncError(comm_, &state) != ncclSuccess || state != ncclInProgress) break;
      if (seconds_since(start) > options_.timeout_s) break;
      std::this_thread::sleep_for(std::chrono::microseconds(100));
    }
    if (state == ncclSuccess)
      ncclCommDestroy(comm_);
    else
      ncclCommAbort(comm_);
  }
  if (scratch_) cudaFree(scratch_);
  if (own_stream_ && stream_) cudaStreamDestroy(stream_);
}

std::string NcclComm::failure_message(const std::string& what, const std::string& why) const {
  return cat("NCCL ", what, " on the ", describe(), " ", why, "; the communicator was aborted (timeout ",
             options_.timeout_s, " s, parallel.nccl_timeout_s)");
}

std::string NcclComm::background_message() const {
  std::lock_guard<std::recursive_mutex> lock(nccl_mutex_);
  return background_message_;
}

// On the main thread. A failure the watchdog thread found first was reported there: it is the one thrown.
void NcclComm::fail(const std::string& what, const std::string& why) {
  std::string message = failure_message(what, why);
  bool first = false;
  {
    std::lock_guard<std::recursive_mutex> lock(nccl_mutex_);
    if (!background_message_.empty()) message = background_message_;
    first = !aborted_.exchange(true);
    if (first && comm_) ncclCommAbort(comm_);
  }
  if (first) {
    if (options_.on_failure)
      options_.on_failure(message);
    else
      fatal_exit(kExitFailure, message, /*collective=*/false);
  }
  throw Error(message);
}

// On the watchdog thread: abort (its kernels end, so the main thread does not wait on the device forever), keep
// the message for the main thread's next call, and report it.
void NcclComm::fail_in_background(const std::string& what, const std::string& why) {
  const std::string message = failure_message(what, why);
  {
    std::lock_guard<std::recursive_mutex> lock(nccl_mutex_);
    if (aborted_.exchange(true)) return;  // the main thread failed first and reported it
    background_message_ = message;
    ncclCommAbort(comm_);
  }
  if (options_.on_failure)
    options_.on_failure(message);
  else
    background_failure(kExitFailure, message, kBackgroundGraceSeconds);
}

void NcclComm::check_usable(const char* op) const {
  if (!aborted_.load()) return;
  const std::string background = background_message();
  if (!background.empty()) throw Error(background);
  HONE_CHECK(false, "NCCL ", op, " on the ", describe(), " after its communicator was aborted");
}

void NcclComm::settle(ncclResult_t r, const std::string& what, Clock::time_point start) {
  if (r == ncclSuccess) {
    // A non-blocking call may still be finishing (the init, or a collective's enqueue): check the state too.
    ncclResult_t state = ncclSuccess;
    const ncclResult_t q = ncclCommGetAsyncError(comm_, &state);
    if (q != ncclSuccess) fail(what, cat("failed: ", detail::nccl_status_text(q)));
    r = state;
  }
  int spins = 0;
  while (r == ncclInProgress) {
    if (seconds_since(start) > options_.timeout_s)
      fail(what, cat("did not complete within ", options_.timeout_s, " s"));
    pause(spins);
    const ncclResult_t q = ncclCommGetAsyncError(comm_, &r);
    if (q != ncclSuccess) fail(what, cat("failed: ", detail::nccl_status_text(q)));
  }
  if (r != ncclSuccess) fail(what, cat("failed: ", detail::nccl_status_text(r)));
}

// A collective enqueued while `stream` is being captured into a CUDA graph (tensor-parallel decode steps) becomes a
// node of the graph: there is nothing to wait for on the host until the graph is launched, so no event is recorded
// (the work is empty and wait() returns at once). The caller watches the replay instead (watch_stream()).
NcclWork NcclComm::launched(std::string what, cudaStream_t stream, Clock::time_point start) {
  cudaStreamCaptureStatus capture = cudaStreamCaptureStatusNone;
  CUDA_CHECK(cudaStreamIsCapturing(stream, &capture));
  if (capture != cudaStreamCaptureStatusNone) return {};
  NcclWork w;
  w.comm_ = this;
  w.what_ = std::move(what);
  w.start_ = start;
  CUDA_CHECK(cudaEventCreateWithFlags(&w.event_, cudaEventDisableTiming));
  CUDA_CHECK(cudaEventRecord(w.event_, stream));
  return w;
}

void NcclComm::wait(NcclWork& w) {
  int spins = 0;
  for (;;) {
    if (aborted_.load()) fail(w.what_, "was aborted");  // by the watchdog thread: its failure is thrown
    const cudaError_t e = cudaEventQuery(w.event_);
    if (e == cudaSuccess) break;
    if (e != cudaErrorNotReady) fail(w.what_, cat("failed on the device: ", detail::cuda_status_text(e)));
    ncclResult_t state = ncclSuccess, q = ncclSuccess;
    {
      std::lock_guard<std::recursive_mutex> lock(nccl_mutex_);
      if (aborted_.load()) continue;  // by the watchdog thread since the check above: the loop's top throws
      q = ncclCommGetAsyncError(comm_, &state);
    }
    if (q != ncclSuccess) fail(w.what_, cat("failed: ", detail::nccl_status_text(q)));
    if (state != ncclSuccess && state != ncclInProgress)
      fail(w.what_, cat("failed: ", detail::nccl_status_text(state)));
    const double waited = seconds_since(w.start_);
    if (waited > options_.timeout_s)
      fail(w.what_, cat("did not complete within ", options_.timeout_s, " s (waited ", waited, " s)"));
    pause(spins);
  }
  cudaEventDestroy(w.event_);
  w.event_ = nullptr;
}

void NcclComm::watch(NcclWork&& w) {
  if (!w.event_) return;  // nothing in flight (no data, or a collective captured into a graph)
  if (!watchdog_) {
    NcclWatchdog::Hooks hooks;
    hooks.async_error = [this]() -> std::string {
      // The main thread holds the lock while it enqueues (and polls the same state): skip this round then.
      std::unique_lock<std::recursive_mutex> lock(nccl_mutex_, std::try_to_lock);
      if (!lock.owns_lock() || aborted_.load()) return "";
      ncclResult_t state = ncclSuccess;
      const ncclResult_t q = ncclCommGetAsyncError(comm_, &state);
      if (q != ncclSuccess) return cat("failed: ", detail::nccl_status_text(q));
      if (state != ncclSuccess && state != ncclInProgress) return cat("failed: ", detail::nccl_status_text(state));
      return "";
    };
    hooks.failed = [this](const std::string& what, const std::string& why) { fail_in_background(what, why); };
    watchdog_ = std::make_unique<NcclWatchdog>(device_, options_.timeout_s, std::move(hooks));
  }
  watchdog_->watch(std::exchange(w.event_, nullptr), std::move(w.what_), w.start_);
}

void NcclComm::finish(NcclWork&& w) {
  if (options_.stream_ordered) watch(std::move(w));
  else w.wait();
}

NcclWork NcclComm::all_reduce_sum_async(const void* send, void* recv, int64_t count, CommType type,
                                        cudaStream_t stream) {
  return all_reduce_async(send, recv, count, type, ncclSum, stream);
}

NcclWork NcclComm::all_reduce_async(const void* send, void* recv, int64_t count, CommType type, ncclRedOp_t op,
                                    cudaStream_t stream) {
  HONE_CHECK(op == ncclSum || op == ncclMax || op == ncclMin, "all_reduce with NCCL operation ", int(op));
  const char* name = op == ncclSum ? "all_reduce_sum" : op == ncclMax ? "all_reduce_max" : "all_reduce_min";
  check_usable(name);
  if (count == 0) return {};
  const Clock::time_point start = Clock::now();
  std::string what = describe_op(name, count, type);
  {
    std::lock_guard<std::recursive_mutex> lock(nccl_mutex_);
    check_usable(name);
    settle(ncclAllReduce(send, recv, size_t(count), nccl_type(type), op, comm_, stream), what, start);
  }
  return launched(std::move(what), stream, start);
}

NcclWork NcclComm::reduce_scatter_sum_async(const void* send, void* recv, int64_t recv_count, CommType type,
                                            cudaStream_t stream) {
  check_usable("reduce_scatter_sum");
  if (recv_count == 0) return {};
  const Clock::time_point start = Clock::now();
  std::string what = describe_op("reduce_scatter_sum", recv_count * size_, type);
  {
    std::lock_guard<std::recursive_mutex> lock(nccl_mutex_);
    check_usable("reduce_scatter_sum");
    settle(ncclReduceScatter(send, recv, size_t(recv_count), nccl_type(type), ncclSum, comm_, stream), what, start);
  }
  return launched(std::move(what), stream, start);
}

NcclWork NcclComm::all_gather_async(const void* send, void* recv, int64_t send_count, CommType type,
                                    cudaStream_t stream) {
  check_usable("all_gather");
  if (send_count == 0) return {};
  const Clock::time_point start = Clock::now();
  std::string what = describe_op("all_gather", send_count * size_, type);
  {
    std::lock_guard<std::recursive_mutex> lock(nccl_mutex_);
    check_usable("all_gather");
    settle(ncclAllGather(send, recv, size_t(send_count), nccl_type(type), comm_, stream), what, start);
  }
  return launched(std::move(what), stream, start);
}

NcclWork NcclComm::broadcast_async(void* buf, int64_t count, CommType type, int root, cudaStream_t stream) {
  check_usable("broadcast");
  HONE_CHECK(root >= 0 && root < size_, "broadcast root ", root, " outside the ", describe());
  if (count == 0) return {};
  const Clock::time_point start = Clock::now();
  std::string what = describe_op("broadcast", count, type);
  {
    std::lock_guard<std::recursive_mutex> lock(nccl_mutex_);
    check_usable("broadcast");
    settle(ncclBroadcast(buf, buf, size_t(count), nccl_type(type), root, comm_, stream), what, start);
  }
  return launched(std::move(what), stream, start);
}

NcclWork NcclComm::p2p_group(std::string what, const std::vector<P2p>& ops, CommType type, cudaStream_t stream) {
  bool any = false;
  for (const P2p& op : ops) any = any || op.count > 0;
  if (!any) return {};
  const Clock::time_point start = Clock::now();
  std::lock_guard<std::recursive_mutex> lock(nccl_mutex_);
  check_usable("a point-to-point transfer");
  const ncclResult_t g = ncclGroupStart();
  if (g != ncclSuccess) fail(what, cat("failed: ncclGroupStart: ", detail::nccl_status_text(g)));
  // Inside the group the calls only record the transfers; the group is closed whatever they answer.
  ncclResult_t first = ncclSuccess;
  for (const P2p& op : ops) {
    if (op.count == 0) continue;
    const ncclResult_t r = op.send ? ncclSend(op.buf, size_t(op.count), nccl_type(type), op.peer, comm_, stream)
                                   : ncclRecv(const_cast<void*>(op.buf), size_t(op.count), nccl_type(type), op.peer,
                                              comm_, stream);
    if (r != ncclSuccess && r != ncclInProgress && first == ncclSuccess) first = r;
  }
  const ncclResult_t end = ncclGroupEnd();
  if (first != ncclSuccess) fail(what, cat("failed: ", detail::nccl_status_text(first)));
  settle(end, what, start);
  return launched(std::move(what), stream, start);
}

NcclWork NcclComm::send_async(const void* buf, int64_t count, CommType type, int peer, cudaStream_t stream) {
  check_usable("send");
  check_peer("send", peer, /*self_allowed=*/false);
  return p2p_group(cat(describe_op("send", count, type), " to rank ", peer), {{true, buf, count, peer}}, type,
                   stream);
}

NcclWork NcclComm::recv_async(void* buf, int64_t count, CommType type, int peer, cudaStream_t stream) {
  check_usable("recv");
  check_peer("recv", peer, /*self_allowed=*/false);
  return p2p_group(cat(describe_op("recv", count, type), " from rank ", peer), {{false, buf, count, peer}}, type,
                   stream);
}

NcclWork NcclComm::send_recv_async(const void* send, int64_t send_count, int dest, void* recv, int64_t recv_count,
                                   int source, CommType type, cudaStream_t stream) {
  check_usable("send_recv");
  check_peer("send_recv", dest, /*self_allowed=*/true);
  check_peer("send_recv", source, /*self_allowed=*/true);
  const size_t esize = comm_type_size(type);
  check_disjoint("send_recv", send, size_t(send_count) * esize, recv, size_t(recv_count) * esize);
  return p2p_group(cat(describe_op("send_recv", send_count, type), " to rank ", dest, ", ", recv_count,
                       " elements from rank ", source),
                   {{true, send, send_count, dest}, {false, recv, recv_count, source}}, type, stream);
}

NcclWork NcclComm::exchange_async(std::span<const PeerTransfer> ops, CommType type, cudaStream_t stream) {
  check_usable("exchange");
  std::vector<P2p> p2p;
  int64_t sent = 0;
  for (const PeerTransfer& t : ops) {
    if (t.count == 0) continue;
    check_peer("exchange", t.peer, /*self_allowed=*/false);
    HONE_CHECK(t.count > 0 && t.buf, "exchange of ", t.count, " elements on the ", describe());
    p2p.push_back({t.send, t.buf, t.count, t.peer});
    if (t.send) sent += t.count;
  }
  return p2p_group(cat(describe_op("exchange", sent, type), " (", p2p.size(), " transfers)"), p2p, type, stream);
}

NcclWork NcclComm::all_to_all_async(const void* send, void* recv, int64_t count, CommType type, cudaStream_t stream) {
  check_usable("all_to_all");
  HONE_CHECK(count >= 0, "all_to_all of ", count, " elements per rank");
  const size_t esize = comm_type_size(type), block = size_t(count) * esize;
  check_disjoint("all_to_all", send, block * size_t(size_), recv, block * size_t(size_));
  std::vector<P2p> ops;
  for (int r = 0; r < size_; ++r) {
    ops.push_back({true, static_cast<const char*>(send) + size_t(r) * block, count, r});
    ops.push_back({false, static_cast<char*>(recv) + size_t(r) * block, count, r});
  }
  return p2p_group(describe_op("all_to_all", count * size_, type), ops, type, stream);
}

NcclWork NcclComm::all_to_allv_async(const void* send, std::span<const int64_t> send_counts,
                                     std::span<const int64_t> send_displs, void* recv,
                                     std::span<const int64_t> recv_counts, std::span<const int64_t> recv_displs,
                                     CommType type, cudaStream_t stream) {
  check_usable("all_to_allv");
  check_all_to_allv(send_counts, send_displs, recv_counts, recv_displs);
  const size_t esize = comm_type_size(type);
  int64_t send_end = 0, recv_end = 0, sent = 0;
  std::vector<P2p> ops;
  for (int r = 0; r < size_; ++r) {
    const size_t i = size_t(r);
    if (send_counts[i] > 0) send_end = std::max(send_end, send_displs[i] + send_counts[i]);
    if (recv_counts[i] > 0) recv_end = std::max(recv_end, recv_displs[i] + recv_counts[i]);
    sent += send_counts[i];
    ops.push_back({true, static_cast<const char*>(send) + size_t(send_displs[i]) * esize, send_counts[i], r});
    ops.push_back({false, static_cast<char*>(recv) + size_t(recv_displs[i]) * esize, recv_counts[i], r});
  }
  check_disjoint("all_to_allv", send, size_t(send_end) * esize, recv, size_t(recv_end) * esize);
  return p2p_group(cat(describe_op("all_to_allv", sent, type), " sent"), ops, type, stream);
}

void NcclComm::all_reduce_sum_raw(const void* send, void* recv, int64_t count, CommType type) {
  finish(all_reduce_sum_async(send, recv, count, type, stream_));
}
void NcclComm::all_reduce_max_raw(const void* send, void* recv, int64_t count, CommType type) {
  finish(all_reduce_async(send, recv, count, type, ncclMax, stream_));
}
void NcclComm::all_reduce_min_raw(const void* send, void* recv, int64_t count, CommType type) {
  finish(all_reduce_async(send, recv, count, type, ncclMin, stream_));
}
void NcclComm::send_raw(const void* buf, int64_t count, CommType type, int peer) {
  finish(send_async(buf, count, type, peer, stream_));
}
void NcclComm::recv_raw(void* buf, int64_t count, CommType type, int peer) {
  finish(recv_async(buf, count, type, peer, stream_));
}
void NcclComm::send_recv_raw(const void* send, int64_t send_count, int dest, void* recv, int64_t recv_count,
                             int source, CommType type) {
  finish(send_recv_async(send, send_count, dest, recv, recv_count, source, type, stream_));
}
void NcclComm::exchange_raw(std::span<const PeerTransfer> ops, CommType type) {
  exchange_async(ops, type, stream_).wait();
}
void NcclComm::all_to_all_raw(const void* send, void* recv, int64_t count, CommType type) {
  finish(all_to_all_async(send, recv, count, type, stream_));
}
void NcclComm::all_to_allv_raw(const void* send, std::span<const int64_t> send_counts,
                               std::span<const int64_t> send_displs, void* recv, std::span<const int64_t> recv_counts,
                               std::span<const int64_t> recv_displs, CommType type) {
  finish(all_to_allv_async(send, send_counts, send_displs, recv, recv_counts, recv_displs, type, stream_));
}
void NcclComm::reduce_scatter_sum_raw(const void* send, void* recv, int64_t recv_count, CommType type) {
  finish(reduce_scatter_sum_async(send, recv, recv_count, type, stream_));
}
void NcclComm::all_gather_raw(const void* send, void* recv, int64_t send_count, CommType type) {
  finish(all_gather_async(send, recv, send_count, type, stream_));
}
void NcclComm::broadcast_raw(void* buf, int64_t count, CommType type, int root) {
  finish(broadcast_async(buf, count, type, root, stream_));
}
void NcclComm::all_gather_on_raw(const void* send, void* recv, int64_t send_count, CommType type, cudaStream_t s) {
  watch(all_gather_async(send, recv, send_count, type, s));
}
void NcclComm::reduce_scatter_sum_on_raw(const void* send, void* recv, int64_t recv_count, CommType type,
                                         cudaStream_t s) {
  watch(reduce_scatter_sum_async(send, recv, recv_count, type, s));
}
void NcclComm::watch_stream(const std::string& what) {
  check_usable("watch_stream");
  launched(what, stream_, Clock::now()).wait();
}

void NcclComm::barrier() { all_reduce_sum_async(scratch_, scratch_, 1, CommType::f32, stream_).wait(); }

}  // namespace hone

#endif  // HONE_CUDA
