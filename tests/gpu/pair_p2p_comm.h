// Two "ranks" of one GPU for the pipeline and resharding tests: two threads with their own streams whose device
// Comm moves point-to-point messages through host mailboxes (one FIFO per direction, matched in order as NCCL and
// MPI match them). A send synchronizes the caller's stream and posts the bytes (it does not wait for the receiver:
// eager, so it cannot deadlock where the schedule is right); a receive waits for the next message from its peer,
// checks its size and uploads it. exchange, send/recv and all_to_allv only: the collectives the pipeline and the
// refit use.
#pragma once

#include <condition_variable>
#include <cstdint>
#include <deque>
#include <mutex>
#include <span>
#include <string>
#include <vector>

#include "comm/comm.h"
#include "cuda/check.h"
#include "runtime/error.h"

namespace test {

struct Mailboxes {
  std::mutex mu;
  std::condition_variable cv;
  std::deque<std::vector<char>> box[2][2];  // [from][to]
};

class PairP2pComm final : public hone::Comm {
 public:
  PairP2pComm(Mailboxes& m, int rank, cudaStream_t stream) : m_(m), rank_(rank), stream_(stream) {}
  int rank() const override { return rank_; }
  int size() const override { return 2; }
  const std::vector<int>& world_ranks() const override { return ranks_; }
  const std::string& name() const override { return name_; }
  bool on_device() const override { return true; }

  void exchange_raw(std::span<const hone::PeerTransfer> ops, hone::CommType type) override {
    const size_t e = hone::comm_type_size(type);
    CUDA_CHECK(cudaStreamSynchronize(stream_));
    for (const hone::PeerTransfer& t : ops)
      if (t.send && t.count > 0) post(t.peer, t.buf, size_t(t.count) * e);
    for (const hone::PeerTransfer& t : ops)
      if (!t.send && t.count > 0) take(t.peer, const_cast<void*>(t.buf), size_t(t.count) * e);
  }
  void send_raw(const void* buf, int64_t count, hone::CommType type, int peer) override {
    const hone::PeerTransfer op{true, buf, count, peer};
    exchange_raw({&op, 1}, type);
  }
  void recv_raw(void* buf, int64_t count, hone::CommType type, int peer) override {
    const hone::PeerTransfer op{false, buf, count, peer};
    exchange_raw({&op, 1}, type);
  }
  void send_recv_raw(const void* send, int64_t send_count, int dest, void* recv, int64_t recv_count, int source,
                     hone::CommType type) override {
    const hone::PeerTransfer ops[] = {{true, send, send_count, dest}, {false, recv, recv_count, source}};
    exchange_raw(ops, type);
  }
  void all_to_allv_raw(const void* send, std::span<const int64_t> send_counts, std::span<const int64_t> send_displs,
                       void* recv, std::span<const int64_t> recv_counts, std::span<const int64_t> recv_displs,
                       hone::CommType type) override {
    const size_t e = hone::comm_type_size(type);
    const int peer = 1 - rank_;
    const char* s = static_cast<const char*>(send);
    char* r = static_cast<char*>(recv);
    CUDA_CHECK(cudaStreamSynchronize(stream_));
    post(peer, s + size_t(send_displs[size_t(peer)]) * e, size_t(send_counts[size_t(peer)]) * e);
    if (send_counts[size_t(rank_)] > 0)
      CUDA_CHECK(cudaMemcpyAsync(r + size_t(recv_displs[size_t(rank_)]) * e, s + size_t(send_displs[size_t(rank_)]) * e,
                                 size_t(send_counts[size_t(rank_)]) * e, cudaMemcpyDeviceToDevice, stream_));
    take(peer, r + size_t(recv_displs[size_t(peer)]) * e, size_t(recv_counts[size_t(peer)]) * e);
  }

  void all_reduce_sum_raw(const void*, void*, int64_t, hone::CommType) override { unused("all_reduce"); }
  void reduce_scatter_sum_raw(const void*, void*, int64_t, hone::CommType) override { unused("reduce_scatter"); }
  void all_gather_raw(const void*, void*, int64_t, hone::CommType) override { unused("all_gather"); }
  void broadcast_raw(void*, int64_t, hone::CommType, int) override { unused("broadcast"); }
  void barrier() override { unused("barrier"); }
  void all_reduce_max_raw(const void*, void*, int64_t, hone::CommType) override { unused("all_reduce_max"); }
  void all_reduce_min_raw(const void*, void*, int64_t, hone::CommType) override { unused("all_reduce_min"); }
  void all_to_all_raw(const void*, void*, int64_t, hone::CommType) override { unused("all_to_all"); }

 private:
  static void unused(const char* op) { HONE_CHECK(false, op, " is not used by the pipeline or the refit"); }
  // The message goes out even when empty, so that both sides count the same messages.
  void post(int to, const void* device, size_t bytes) {
    std::vector<char> msg(bytes);
    if (bytes > 0) CUDA_CHECK(cudaMemcpy(msg.data(), device, bytes, cudaMemcpyDeviceToHost));
    {
      std::lock_guard<std::mutex> lock(m_.mu);
      m_.box[rank_][to].push_back(std::move(msg));
    }
    m_.cv.notify_all();
  }
  void take(int from, void* device, size_t bytes) {
    std::vector<char> msg;
    {
      std::unique_lock<std::mutex> lock(m_.mu);
      m_.cv.wait(lock, [&] { return !m_.box[from][rank_].empty(); });
      msg = std::move(m_.box[from][rank_].front());
      m_.box[from][rank_].pop_front();
    }
    HONE_CHECK(msg.size() == bytes, "rank ", rank_, " expected ", bytes, " bytes from rank ", from, ", got ",
               msg.size());
    if (bytes == 0) return;
    CUDA_CHECK(cudaMemcpyAsync(device, msg.data(), bytes, cudaMemcpyHostToDevice, stream_));
    CUDA_CHECK(cudaStreamSynchronize(stream_));
  }

  Mailboxes& m_;
  int rank_;
  cudaStream_t stream_;
  std::vector<int> ranks_{0, 1};
  std::string name_ = "pp (two threads)";
};

}  // namespace test
