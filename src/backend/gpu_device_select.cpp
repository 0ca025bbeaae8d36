// select_rank_device: cudaSetDevice by the node-local rank, and one info line per rank on rank 0.
#include "backend/gpu_device_select.h"

#if HONE_CUDA

#include <mpi.h>
#include <unistd.h>

#include <cuda_runtime.h>

#include <map>
#include <vector>

#include "cuda/check.h"
#include "runtime/device_choice.h"
#include "runtime/error.h"
#include "runtime/log.h"
#include "runtime/mpi_state.h"
#include "runtime/runtime.h"

namespace hone {

int usable_cuda_devices(const char* who) {
  int count = 0;
  const cudaError_t e = cudaGetDeviceCount(&count);
  switch (e) {
    case cudaSuccess: break;
    case cudaErrorNoDevice:
    case cudaErrorInsufficientDriver:
    case cudaErrorInitializationError:
    case cudaErrorStubLibrary:
    case cudaErrorCallRequiresNewerDriver:
    case cudaErrorSystemDriverMismatch:
    case cudaErrorCompatNotSupportedOnDevice:
    case cudaErrorDevicesUnavailable:
    case cudaErrorSystemNotReady:
      throw UserError(cat(who, ": no usable CUDA device: ", cudaGetErrorName(e), " (", cudaGetErrorString(e),
                          "); this hone needs a GPU and the NVIDIA driver of CUDA 13 or later (check nvidia-smi and "
                          "CUDA_VISIBLE_DEVICES)"));
    default: CUDA_CHECK(e);
  }
  HONE_USER_CHECK(count > 0, who, ": no CUDA device is visible (check CUDA_VISIBLE_DEVICES and the job's GPU request)");
  return count;
}

DeviceChoice select_rank_device() {
  const int count = usable_cuda_devices("run.device = \"cuda\"");
  DeviceChoice c;
  c.device = choose_device(count, local_rank(), local_size());
  CUDA_CHECK(cudaSetDevice(c.device));
  char bus[32] = {};
  CUDA_CHECK(cudaDeviceGetPCIBusId(bus, sizeof(bus), c.device));
  c.pci_bus_id = bus;
  char host[256] = {};
  gethostname(host, sizeof(host) - 1);

  const std::string line = cat("GPU mapping: host ", host, " rank ", world_rank(), " local rank ", local_rank(),
                               " device ", c.device, " of ", count, " visible, PCI bus ", c.pci_bus_id);
  std::vector<std::string> lines{line};
  if (mpi_active() && world_size() > 1) {
    const std::string mine = std::string(host) + "\t" + c.pci_bus_id + "\t" + line;
    std::vector<std::string> all;
    if (detail::allgather_strings(MPI_COMM_WORLD, mine, &all)) {
      lines.clear();
      std::map<std::string, int> seen;  // host + bus id -> first rank
      for (size_t r = 0; r < all.size(); ++r) {
        const size_t t1 = all[r].find('\t'), t2 = all[r].find('\t', t1 + 1);
        const std::string key = all[r].substr(0, t2);
        lines.push_back(all[r].substr(t2 + 1));
        const auto [it, fresh] = seen.emplace(key, int(r));
        if (!fresh)
          log_warn("ranks ", it->second, " and ", r, " share the GPU at PCI bus ", all[r].substr(t1 + 1, t2 - t1 - 1),
                   " on ", all[r].substr(0, t1), " (one rank per GPU is expected)");
      }
    }
  }
  for (const std::string& l : lines) log_info(l);
  return c;
}

}  // namespace hone

#endif  // HONE_CUDA
