// The few CUDA driver API calls hone makes (virtual memory management: reserve an address range, back it with
// physical memory, give that memory back while keeping the range; the tensor maps of Hopper's tensor loads). hone
// links the CUDA runtime statically and not libcuda, so the entry points come from the driver the runtime already
// loaded (cudaGetDriverEntryPointByVersion), resolved once at first use. CU_CHECK is CUDA_CHECK's twin for CUresult:
//   CU_CHECK(driver().mem_map(ptr, n, 0, h, 0)) failed: out of memory (CUDA_ERROR_OUT_OF_MEMORY) at cuda/x.cpp:12
// Host header (g++ only; not for .cu files).
#pragma once

#include <cuda.h>
#include <cudaTypedefs.h>

#include <string>

#include "cuda/check.h"

namespace hone::cuda {

// The driver's functions at the ABI of CUDA 12.0 (the versions these typedefs name have not changed since).
struct DriverApi {
  PFN_cuGetErrorString_v6000 get_error_string = nullptr;
  PFN_cuGetErrorName_v6000 get_error_name = nullptr;
  PFN_cuDeviceGet_v2000 device_get = nullptr;
  PFN_cuDeviceGetAttribute_v2000 device_get_attribute = nullptr;
  PFN_cuMemGetAllocationGranularity_v10020 mem_get_allocation_granularity = nullptr;
  PFN_cuMemAddressReserve_v10020 mem_address_reserve = nullptr;
  PFN_cuMemAddressFree_v10020 mem_address_free = nullptr;
  PFN_cuMemCreate_v10020 mem_create = nullptr;
  PFN_cuMemRelease_v10020 mem_release = nullptr;
  PFN_cuMemMap_v10020 mem_map = nullptr;
  PFN_cuMemUnmap_v10020 mem_unmap = nullptr;
  PFN_cuMemSetAccess_v10020 mem_set_access = nullptr;
  PFN_cuTensorMapEncodeTiled_v12000 tensor_map_encode_tiled = nullptr;
};

// The entry points, resolved at the first call (thread-safe); throws hone::Error naming the first symbol the
// driver does not give.
const DriverApi& driver();

}  // namespace hone::cuda

namespace hone::detail {

// "out of memory (CUDA_ERROR_OUT_OF_MEMORY)"; the bare number when the driver cannot describe the status.
std::string cu_status_text(CUresult s);

}  // namespace hone::detail

#define CU_CHECK(call) HONE_LIBRARY_CHECK_("CU_CHECK", #call, call, CUresult, CUDA_SUCCESS, cu_status_text)
