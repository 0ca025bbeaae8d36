// Comm: the collectives of one group of ranks (the world, or the data-, tensor- or pipeline-parallel group of the
// rank grid), over typed buffers. Two implementations: MpiComm (host buffers, src/comm/mpi_comm.h; the CPU path and
// CI) and NcclComm (device buffers on a CUDA stream, src/comm/nccl_comm.h). Every member of the group calls each
// collective in the same order. Sums only: losses are divided by the global denominator before reduction.
//
//   hone::Comm& dp = ...;
//   dp.all_reduce_sum(grads, n);                       // in place, every rank gets the sum
//   dp.reduce_scatter_sum(grads, shard, n / dp.size()); // rank r gets elements [r*m, (r+1)*m) of the sum
//   dp.all_gather(shard, weights, m);                   // rank r's m elements land at weights + r*m
//
// In-place conventions (as NCCL's): all_reduce with send == recv; reduce_scatter with recv == send + rank*count;
// all_gather with send == recv + rank*count. bf16 is carried as raw uint16_t; sums of bf16 are formed in fp32 and
// rounded once per reduction step. Plain header: no MPI, no CUDA.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <type_traits>
#include <vector>

namespace hone {

enum class CommType : uint8_t { f32, bf16, f64, i64 };

constexpr size_t comm_type_size(CommType t) {
  return t == CommType::f32 ? 4 : t == CommType::bf16 ? 2 : 8;
}
constexpr const char* comm_type_name(CommType t) {
  return t == CommType::f32 ? "f32" : t == CommType::bf16 ? "bf16" : t == CommType::f64 ? "f64" : "i64";
}

// The element type of a C++ type: float, uint16_t (bf16 bits), double, int64_t.
template <typename T>
constexpr CommType comm_type_of() {
  if constexpr (std::is_same_v<T, float>) return CommType::f32;
  else if constexpr (std::is_same_v<T, uint16_t>) return CommType::bf16;
  else if constexpr (std::is_same_v<T, double>) return CommType::f64;
  else {
    static_assert(std::is_same_v<T, int64_t>, "Comm carries float, uint16_t (bf16), double and int64_t");
    return CommType::i64;
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
};

}  // namespace hone
