// Comm: the collectives of one group of ranks (the world, or the data-, tensor- or pipeline-parallel group of the
// rank grid), over typed buffers. Two implementations: MpiComm (host buffers, src/comm/mpi_comm.h; the CPU path and
// CI) and NcclComm (device buffers on a CUDA stream, src/comm/nccl_comm.h). Every member of the group calls each
// collective in the same order. Gradients and losses use sums only (losses are divided by the global denominator
// before reduction); max and min serve metrics, norms and agreement.
//
//   hone::Comm& dp = ...;
//   dp.all_reduce_sum(grads, n);                       // in place, every rank gets the sum
//   dp.reduce_scatter_sum(grads, shard, n / dp.size()); // rank r gets elements [r*m, (r+1)*m) of the sum
//   dp.all_gather(shard, weights, m);                   // rank r's m elements land at weights + r*m
//   pp.send(acts, n, pp.rank() + 1);                    // point to point: the peer calls pp.recv(acts, n, rank)
//   ep.all_to_allv(tokens, send_counts, send_displs, routed, recv_counts, recv_displs);
//
// In-place conventions (as NCCL's): all_reduce with send == recv; reduce_scatter with recv == send + rank*count;
// all_gather with send == recv + rank*count. all_to_all, all_to_allv and send_recv are never in place: their send
// and receive buffers must not overlap (NCCL moves the blocks concurrently). bf16 is carried as raw uint16_t; sums
// of bf16 are formed in fp32 and rounded once per reduction step. Plain header: no MPI, no CUDA.
//
// Point to point: peers are ranks of this group. send and recv block until the message is handed over (MPI's
// rendezvous, NCCL's stream semantics), so two ranks that both send first may wait for each other: order the pair
// (e.g. the lower rank sends first) or use send_recv, which posts both at once (and may name this rank itself).
// exchange posts any number of sends and receives at once (a pipeline stage's activations forward and gradients
// back, with both neighbours); messages between one pair of ranks match in the order each side lists them.
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>
#include <string>
#include <type_traits>
#include <vector>

namespace hone {

enum class CommType : uint8_t { f32, bf16, f64, i64, i32 };

// One transfer of a batched point-to-point exchange: count elements sent to, or received from, peer (a rank of the
// group, not this rank). A receive writes buf.
struct PeerTransfer {
  bool send = true;
  const void* buf = nullptr;
  int64_t count = 0;
  int peer = 0;
};

constexpr size_t comm_type_size(CommType t) {
  return t == CommType::bf16 ? 2 : t == CommType::f32 || t == CommType::i32 ? 4 : 8;
}
constexpr const char* comm_type_name(CommType t) {
  return t == CommType::f32    ? "f32"
         : t == CommType::bf16 ? "bf16"
         : t == CommType::f64  ? "f64"
         : t == CommType::i64  ? "i64"
                               : "i32";
}

// The element type of a C++ type: float, uint16_t (bf16 bits), double, int64_t, int32_t.
template <typename T>
constexpr CommType comm_type_of() {
  if constexpr (std::is_same_v<T, float>) return CommType::f32;
  else if constexpr (std::is_same_v<T, uint16_t>) return CommType::bf16;
  else if constexpr (std::is_same_v<T, double>) return CommType::f64;
  else if constexpr (std::is_same_v<T, int64_t>) return CommType::i64;
  else {
    static_assert(std::is_same_v<T, int32_t>, "Comm carries float, uint16_t (bf16), double, int64_t and int32_t");
    return CommType::i32;
  }
}

class Comm {
 public:
  virtual ~Comm() = default;

  virtual int rank() const = 0;  // this rank's index in the group
  virtual int size() const = 0;  // ranks in the group
  // The world rank of each member, in group order (for messages).
  virtual const std::vector<int>& world_ranks() const = 0;
  virtual const std::string& name() const = 0;  // "world", "dp", "tp", "pp" (or a test's name)
  virtual bool on_device() const = 0;           // buffers are device pointers (NCCL)
  // Waits, under the communicator's watchdog, for what is queued on its stream (a device communicator's
  // stream-ordered collectives, a replayed CUDA graph's); `what` names it in a failure message. Nothing to wait for
  // on a host communicator, whose collectives return when done.
  virtual void watch_stream(const std::string& /*what*/) {}

  // "dp group (world ranks 0,2)": for messages.
  std::string describe() const;

  // ---- untyped core: counts are elements of `type` ----
  virtual void all_reduce_sum_raw(const void* send, void* recv, int64_t count, CommType type) = 0;
  // send holds recv_count * size() elements; rank r receives the sum of block r.
  virtual void reduce_scatter_sum_raw(const void* send, void* recv, int64_t recv_count, CommType type) = 0;
  // recv gets size() blocks of send_count elements, block r from rank r.
  virtual void all_gather_raw(const void* send, void* recv, int64_t send_count, CommType type) = 0;
  virtual void broadcast_raw(void* buf, int64_t count, CommType type, int root) = 0;
  virtual void barrier() = 0;
  // Element-wise max / min over the group (bf16 too: the result is one of the inputs, no rounding).
  virtual void all_reduce_max_raw(const void* send, void* recv, int64_t count, CommType type) = 0;
  virtual void all_reduce_min_raw(const void* send, void* recv, int64_t count, CommType type) = 0;

  // Point to point within the group (peer: a rank of this group, not this rank). The receiver names the sender and
  // the same count and type.
  virtual void send_raw(const void* buf, int64_t count, CommType type, int peer) = 0;
  virtual void recv_raw(void* buf, int64_t count, CommType type, int peer) = 0;
  // Sends send_count elements to dest and receives recv_count elements from source, both at once (no ordering
  // needed between the pair; dest and source may be this rank).
  virtual void send_recv_raw(const void* send, int64_t send_count, int dest, void* recv, int64_t recv_count,
                             int source, CommType type) = 0;
  // Every transfer posted at once, then all waited for: no ordering between them is needed, and transfers of zero
  // elements are left out (the peer leaves out its own). The default serves at most one send and one receive
  // (through send_recv); MpiComm and NcclComm take any number.
  virtual void exchange_raw(std::span<const PeerTransfer> ops, CommType type);
  // Block r of send (count elements at send + r*count) goes to rank r; block r of recv comes from rank r.
  virtual void all_to_all_raw(const void* send, void* recv, int64_t count, CommType type) = 0;
  // Uneven blocks: send_counts[r] elements at send + send_displs[r] go to rank r, recv_counts[r] elements from rank
  // r land at recv + recv_displs[r] (counts and displacements in elements, size() entries each). recv_counts[r]
  // here must equal send_counts[rank()] on rank r.
  virtual void all_to_allv_raw(const void* send, std::span<const int64_t> send_counts,
                               std::span<const int64_t> send_displs, void* recv, std::span<const int64_t> recv_counts,
                               std::span<const int64_t> recv_displs, CommType type) = 0;

  // ---- typed ----
  template <typename T>
  void all_reduce_sum(const T* send, T* recv, int64_t n) { all_reduce_sum_raw(send, recv, n, comm_type_of<T>()); }
  template <typename T>
  void all_reduce_sum(T* x, int64_t n) { all_reduce_sum_raw(x, x, n, comm_type_of<T>()); }
  template <typename T>
  void reduce_scatter_sum(const T* send, T* recv, int64_t recv_count) {
    reduce_scatter_sum_raw(send, recv, recv_count, comm_type_of<T>());
  }
  template <typename T>
  void all_gather(const T* send, T* recv, int64_t send_count) {
    all_gather_raw(send, recv, send_count, comm_type_of<T>());
  }
  // In place: this rank's block is already at x + rank()*count.
  template <typename T>
  void all_gather_in_place(T* x, int64_t count) {
    all_gather_raw(x + int64_t(rank()) * count, x, count, comm_type_of<T>());
  }
  template <typename T>
  void broadcast(T* x, int64_t n, int root = 0) { broadcast_raw(x, n, comm_type_of<T>(), root); }
  template <typename T>
  void all_reduce_max(const T* send, T* recv, int64_t n) { all_reduce_max_raw(send, recv, n, comm_type_of<T>()); }
  template <typename T>
  void all_reduce_max(T* x, int64_t n) { all_reduce_max_raw(x, x, n, comm_type_of<T>()); }
  template <typename T>
  void all_reduce_min(const T* send, T* recv, int64_t n) { all_reduce_min_raw(send, recv, n, comm_type_of<T>()); }
  template <typename T>
  void all_reduce_min(T* x, int64_t n) { all_reduce_min_raw(x, x, n, comm_type_of<T>()); }
  template <typename T>
  void send(const T* x, int64_t n, int peer) { send_raw(x, n, comm_type_of<T>(), peer); }
  template <typename T>
  void recv(T* x, int64_t n, int peer) { recv_raw(x, n, comm_type_of<T>(), peer); }
  template <typename T>
  void send_recv(const T* send, int64_t send_count, int dest, T* recv, int64_t recv_count, int source) {
    send_recv_raw(send, send_count, dest, recv, recv_count, source, comm_type_of<T>());
  }
  template <typename T>
  void all_to_all(const T* send, T* recv, int64_t count) { all_to_all_raw(send, recv, count, comm_type_of<T>()); }
  template <typename T>
  void all_to_allv(const T* send, std::span<const int64_t> send_counts, std::span<const int64_t> send_displs, T* recv,
                   std::span<const int64_t> recv_counts, std::span<const int64_t> recv_displs) {
    all_to_allv_raw(send, send_counts, send_displs, recv, recv_counts, recv_displs, comm_type_of<T>());
  }

 protected:
  // The checks every implementation makes before moving data (Error naming the operation and the group): a peer
  // inside the group (and not this rank for send/recv), non-negative counts, size() counts and displacements,
  // disjoint send and receive buffers.
  void check_peer(const char* op, int peer, bool self_allowed) const;
  void check_all_to_allv(std::span<const int64_t> send_counts, std::span<const int64_t> send_displs,
                         std::span<const int64_t> recv_counts, std::span<const int64_t> recv_displs) const;
  // Bytes [send, send + send_bytes) and [recv, recv + recv_bytes) do not overlap.
  void check_disjoint(const char* op, const void* send, size_t send_bytes, const void* recv, size_t recv_bytes) const;
};

}  // namespace hone
