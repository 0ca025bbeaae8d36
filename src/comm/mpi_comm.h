// MpiComm: Comm over an MPI communicator, host buffers. Used by the CPU path (and CI) for data-parallel gradient
// reduction and the loop's metrics, and to bootstrap NCCL. Without MPI running (a plain `hone ...`), or over a
// one-rank communicator, it is a local group of one: every collective is a copy or nothing.
// MPI has no bf16: bf16 sums are converted to fp32, reduced, and rounded back once (max and min likewise, exactly).
// Point-to-point messages use one tag of their own per communicator (MPI orders messages between a pair).
// A failing MPI call throws through MPI_CHECK; fatal_exit then ends every rank (runtime/runtime.h). Every operation
// runs under the watchdog (runtime/mpi_watchdog.h): one that waits longer than parallel.collective_timeout_s for the
// other ranks ends the run with a message naming it, its byte count and this group.
// Host-only header (includes mpi.h): never from a .cu file.
#pragma once

#include <mpi.h>

#include <string>
#include <vector>

#include "comm/comm.h"

namespace hone {

class MpiComm : public Comm {
 public:
  // A local group of one (no MPI involved).
  MpiComm();
  // Over comm (not owned: it must outlive this object, e.g. MPI_COMM_WORLD or a GridComms member). When MPI is
  // not active, comm is ignored and the group is local.
  MpiComm(MPI_Comm comm, std::string name);

  int rank() const override { return rank_; }
  int size() const override { return size_; }
  const std::vector<int>& world_ranks() const override { return world_ranks_; }
  const std::string& name() const override { return name_; }
  bool on_device() const override { return false; }
  MPI_Comm mpi_comm() const { return comm_; }  // MPI_COMM_NULL for a local group

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

 private:
  bool distributed() const { return comm_ != MPI_COMM_NULL && size_ > 1; }
  void reduce_op(const char* name, const void* send, void* recv, int64_t count, CommType type, MPI_Op op);
  // Waits for the requests of one operation under the watchdog; op, count and type name it in a timeout message
  // (count < 0: no byte count, as for a barrier).
  void wait(MPI_Request* requests, int n, const std::string& op, int64_t count, CommType type) const;

  MPI_Comm comm_ = MPI_COMM_NULL;
  std::string name_ = "local";
  int rank_ = 0, size_ = 1;
  std::vector<int> world_ranks_;
};

}  // namespace hone
