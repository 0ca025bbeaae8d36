// Point-to-point transfers beside the compute, the backends' B::OverlappedTransfers: what ring attention
// (parallel/ring_attention.h) passes around its group while it computes. A transfer is posted after the compute
// queued so far and returns a ticket; arrived(ticket) orders the compute after it. The host waits for a call's
// transfers one call later (next_call), so it never blocks on the layer it is queueing.
//   * InlineTransfers (the CPU, and a GPU over a device Comm that is not NCCL: a test's pair of ranks): each
//     transfer runs when posted, over the group's Comm; tickets are -1 and there is nothing to wait for.
//   * CudaOverlappedTransfers (a GPU over NCCL): the transfers run on a stream of their own, ordered with the
//     compute stream by events; the host waits for them under the NCCL watchdog.
#pragma once

#include <cstdint>
#include <memory>

#include "comm/comm.h"

#if HONE_CUDA
#include <cuda_runtime.h>

#include "cuda/ops_cuda.h"
#endif

namespace hone {

class InlineTransfers {
 public:
  explicit InlineTransfers(Comm& comm) : comm_(comm) {}

  // Sends n elements of `send` to dest and receives n from source into `recv` (ranks of the group); returns -1.
  int send_recv(const void* send, void* recv, int64_t n, int dest, int source, CommType type) {
    comm_.send_recv_raw(send, n, dest, recv, n, source, type);
    return -1;
  }
  void arrived(int) {}
  void next_call() {}
  void drain() {}
  void synchronize() {}

 private:
  Comm& comm_;
};

#if HONE_CUDA

class NcclComm;

class CudaOverlappedTransfers {
 public:
  // comm: the group's device Comm; ctx: the compute stream's context. Both outlive this object.
  CudaOverlappedTransfers(Comm& comm, const cuda::GpuContext& ctx);
  ~CudaOverlappedTransfers();  // waits for what is still in flight
  CudaOverlappedTransfers(const CudaOverlappedTransfers&) = delete;
  CudaOverlappedTransfers& operator=(const CudaOverlappedTransfers&) = delete;

  // As InlineTransfers::send_recv, after the compute queued so far; returns the ticket for arrived() (-1 in line).
  int send_recv(const void* send, void* recv, int64_t n, int dest, int source, CommType type);
  // The compute stream waits for transfer `ticket` of the current call.
  void arrived(int ticket);
  // A new call begins: the host waits (under the NCCL watchdog) for the previous call's transfers.
  void next_call();
  // Waits for every transfer still in flight.
  void drain();
  // Waits for the transfers' stream (before its buffers are freed).
  void synchronize();

 private:
  struct Pending;
  Comm& comm_;
  cudaStream_t compute_ = nullptr;
  NcclComm* nccl_ = nullptr;  // the overlapped path; null: transfers in line
  cudaStream_t stream_ = nullptr;
  cudaEvent_t compute_done_ = nullptr;
  std::unique_ptr<Pending> pending_;
};

#endif  // HONE_CUDA

}  // namespace hone
