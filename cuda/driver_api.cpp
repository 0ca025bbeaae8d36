// Resolution of the driver entry points of cuda/driver_api.h through the CUDA runtime, and CUresult texts.
#include "cuda/driver_api.h"

#include <cuda_runtime.h>

#include <mutex>

#include "runtime/error.h"

namespace hone::cuda {

namespace {

// The ABI the typedefs of DriverApi describe: asking for it keeps a newer driver from handing a later variant.
constexpr unsigned int kDriverAbi = 12000;

template <typename Fn>
void resolve(Fn& fn, const char* symbol) {
  void* p = nullptr;
  cudaDriverEntryPointQueryResult found = cudaDriverEntryPointSymbolNotFound;
  const cudaError_t s = cudaGetDriverEntryPointByVersion(symbol, &p, kDriverAbi, cudaEnableDefault, &found);
  if (s != cudaSuccess || found != cudaDriverEntryPointSuccess || p == nullptr) {
    cudaGetLastError();  // a failed query must not surface in the next CUDA_CHECK_LAST
    throw Error(cat("the CUDA driver gives no entry point ", symbol, " (CUDA ", kDriverAbi / 1000, ".",
                    kDriverAbi % 1000 / 10, " ABI): ",
                    s != cudaSuccess ? detail::cuda_status_text(s)
                                     : found == cudaDriverEntryPointVersionNotSufficent
                                           ? std::string("the driver is older than that")
                                           : std::string("symbol not found")));
  }
  fn = reinterpret_cast<Fn>(p);
}

DriverApi load() {
  DriverApi a;
  resolve(a.get_error_string, "cuGetErrorString");
  resolve(a.get_error_name, "cuGetErrorName");
  resolve(a.device_get, "cuDeviceGet");
  resolve(a.device_get_attribute, "cuDeviceGetAttribute");
  resolve(a.mem_get_allocation_granularity, "cuMemGetAllocationGranularity");
  resolve(a.mem_address_reserve, "cuMemAddressReserve");
  resolve(a.mem_address_free, "cuMemAddressFree");
  resolve(a.mem_create, "cuMemCreate");
  resolve(a.mem_release, "cuMemRelease");
  resolve(a.mem_map, "cuMemMap");
  resolve(a.mem_unmap, "cuMemUnmap");
  resolve(a.mem_set_access, "cuMemSetAccess");
  resolve(a.tensor_map_encode_tiled, "cuTensorMapEncodeTiled");
  return a;
}

}  // namespace

const DriverApi& driver() {
  // A failed load throws out of call_once and is retried by the next caller (which then throws the same message).
  static DriverApi api;
  static std::once_flag once;
  std::call_once(once, [] { api = load(); });
  return api;
}

}  // namespace hone::cuda

namespace hone::detail {

std::string cu_status_text(CUresult s) {
  const char* text = nullptr;
  const char* name = nullptr;
  try {
    const cuda::DriverApi& d = cuda::driver();
    if (d.get_error_string(s, &text) != CUDA_SUCCESS) text = nullptr;
    if (d.get_error_name(s, &name) != CUDA_SUCCESS) name = nullptr;
  } catch (const Error&) {
  }
  if (!text || !name) return cat("CUresult ", int(s));
  return cat(text, " (", name, ")");
}

}  // namespace hone::detail
