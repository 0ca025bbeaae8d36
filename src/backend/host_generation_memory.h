// What generation (generation/generation_forward.h) asks of a backend's memory and launches, on the CPU: plain host
// buffers that are freed between GRPO steps and allocated again (no addresses to keep), and decode steps run as
// they are called (no graphs to capture). The GPU's twins keep addresses in virtual memory and replay decode steps
// from CUDA graphs (backend/cuda_generation_memory.h).
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>

#include "backend/cpu_backend.h"

namespace hone {

// One range of generation's memory. On the CPU it is never virtual: release() frees it (GenerationForward then
// sizes and allocates anew at the next call).
class HostGenerationRegion {
 public:
  char* allocate(size_t bytes, bool /*virtual_memory*/, const char* what) {
    mem_ = HostArray<char>(int64_t(bytes), what);
    return mem_.get();
  }
  char* data() const { return mem_.get(); }
  bool is_virtual() const { return false; }
  void unmap() {}
  bool try_map() { return false; }
  void free() { mem_ = HostArray<char>(); }

 private:
  HostArray<char> mem_;
};

// Decode steps, keyed by their batch-size bucket: on the CPU each runs when it is asked for.
class EagerDecodeSteps {
 public:
  static constexpr bool kGraphs = false;  // a decode step is never captured
  void run(int /*bucket*/, const CpuBackend::Exec&, size_t /*scratch_bytes*/, const std::function<void()>& pass) {
    pass();
  }
  void drop() {}
  int64_t replays() const { return 0; }
  int64_t captures() const { return 0; }
};

}  // namespace hone
