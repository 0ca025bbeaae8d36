// DeviceComm: a Comm whose buffers are device memory and whose collectives are ordered on CUDA streams (NcclComm;
// the GPU tests' two-thread pair, tests/gpu/pair_device_comm.h). The Comm methods are ordered on stream(); the *_on
// methods on a stream of the caller's choice, which is how the tensor-parallel layers run a collective on a
// communication stream while their GEMMs run on the compute stream (backend/sequence_overlap.h). A caller
// relies on the stream order only: whether the host also waits is the implementation's (a stream-ordered NcclComm
// returns at once and its watchdog thread watches the collective; the pair waits). Every member of the group issues
// the same collectives in the same order, whatever their streams. Plain header (CUDA runtime only).
#pragma once

#if HONE_CUDA

#include <cuda_runtime.h>

#include <cstdint>

#include "comm/comm.h"

namespace hone {

class DeviceComm : public Comm {
 public:
  bool on_device() const override { return true; }
  // The stream of the Comm methods.
  virtual cudaStream_t stream() const = 0;

  // As all_gather_raw and reduce_scatter_sum_raw, ordered on `s` (after the work queued there before the call).
  virtual void all_gather_on_raw(const void* send, void* recv, int64_t send_count, CommType type, cudaStream_t s) = 0;
  virtual void reduce_scatter_sum_on_raw(const void* send, void* recv, int64_t recv_count, CommType type,
                                         cudaStream_t s) = 0;

  template <typename T>
  void all_gather_on(const T* send, T* recv, int64_t send_count, cudaStream_t s) {
    all_gather_on_raw(send, recv, send_count, comm_type_of<T>(), s);
  }
  template <typename T>
  void reduce_scatter_sum_on(const T* send, T* recv, int64_t recv_count, cudaStream_t s) {
    reduce_scatter_sum_on_raw(send, recv, recv_count, comm_type_of<T>(), s);
  }
};

}  // namespace hone

#endif  // HONE_CUDA
