// What an engine holds of its backend besides the ops (rl/colocated_engine.cpp is written once over it): the device
// it runs on, its name, its free memory, and the communicators of its groups over the backend's memory.
//   EngineDevice<CpuBackend>:  nothing to hold; the groups' host communicators (MPI) themselves; memory unbounded.
//   EngineDevice<CudaBackend>: the rank's GPU (chosen by its node-local rank: backend/gpu_device_select.h) and the
//                              context of its stream and library handles; NCCL communicators bootstrapped over the
//                              host groups, on the engine's stream where asked (backend/cuda_engine_device.cpp).
// An EngineDevice never moves: the Execs made from it point into it.
#pragma once

#include <limits>
#include <memory>
#include <string>

#include "backend/backend.h"
#include "comm/comm.h"
#include "comm/comm_factory.h"
#include "comm/parallel_state.h"

namespace hone {

// A communicator an engine uses: one made for it (owned) or the run's host one (borrowed).
class GroupComm {
 public:
  GroupComm() = default;
  explicit GroupComm(Comm& borrowed) : c_(&borrowed) {}
  explicit GroupComm(std::unique_ptr<Comm> owned) : owned_(std::move(owned)), c_(owned_.get()) {}
  Comm& operator*() const { return *c_; }
  Comm* operator->() const { return c_; }
  Comm* get() const { return c_; }
  explicit operator bool() const { return c_ != nullptr; }

 private:
  std::unique_ptr<Comm> owned_;
  Comm* c_ = nullptr;
};

// How a group's communicator orders its collectives on a device (no meaning on the CPU, whose collectives run when
// called).
struct GroupCommOptions {
  double timeout_s = 600;        // parallel.nccl_timeout_s
  bool on_engine_stream = true;  // ordered with the layers' kernels; false: a stream of the communicator's own
  bool stream_ordered = false;   // the host does not wait for each collective (a watchdog thread does)
};

template <typename B>
class EngineDevice;

template <>
class EngineDevice<CpuBackend> {
 public:
  EngineDevice() = default;
  EngineDevice(const EngineDevice&) = delete;
  EngineDevice& operator=(const EngineDevice&) = delete;

  CpuBackend::Exec exec() const { return {}; }
  std::string describe() const { return "cpu, fp32"; }
  const char* collectives() const { return "MPI"; }
  void synchronize() const {}
  // Host memory is the host plan's (rl/host_memory_plan.h), checked before the engine exists: unbounded here.
  double free_bytes() const { return std::numeric_limits<double>::infinity(); }
  double used_bytes() const { return 0; }  // no driver count
  GroupComm comm(const ParallelState& ps, CommGroup g, const GroupCommOptions&) const {
    return GroupComm(ps.host(g));
  }
  GroupComm comm(Comm& host, const GroupCommOptions&) const { return GroupComm(host); }
};

#if HONE_CUDA
template <>
class EngineDevice<CudaBackend> {
 public:
  EngineDevice();   // the rank's device and a context on it
  ~EngineDevice();  // the context's stream, handles and workspace
  EngineDevice(const EngineDevice&) = delete;
  EngineDevice& operator=(const EngineDevice&) = delete;

  CudaBackend::Exec exec() const { return CudaBackend::Exec(ctx_); }
  const cuda::GpuContext& context() const { return ctx_; }
  std::string describe() const;  // "cuda:0 NVIDIA H200, bf16"
  const char* collectives() const { return "NCCL"; }
  void synchronize() const;
  double free_bytes() const;  // the driver's free device memory now
  double used_bytes() const;  // the driver's count in use (libraries' workspaces and the context included)
  // A new NCCL communicator of this rank's group g, or over the host communicator `host`. Collective over it.
  GroupComm comm(const ParallelState& ps, CommGroup g, const GroupCommOptions& o) const;
  GroupComm comm(Comm& host, const GroupCommOptions& o) const;

 private:
  int device_ = 0;
  std::string name_;
  cuda::GpuContext ctx_;
};
#endif  // HONE_CUDA

}  // namespace hone
