// Reserve / map / unmap of device address ranges through the driver's virtual memory management
// (see cuda/virtual_device_buffer.h).
#include "cuda/virtual_device_buffer.h"

#include <cuda_runtime.h>

#include <type_traits>
#include <utility>

#include "cuda/driver_api.h"
#include "runtime/error.h"

namespace hone::cuda {

static_assert(std::is_same_v<CUdeviceptr, unsigned long long>, "VirtualDeviceBuffer stores a CUdeviceptr");

namespace {

// CU_CHECK of a status already in hand (try_map() must look at it first: out of memory is an answer there, not an
// error), naming the call that returned it.
#define CU_CHECK_STATUS(status, call_text) \
  HONE_LIBRARY_CHECK_("CU_CHECK", call_text, status, CUresult, CUDA_SUCCESS, cu_status_text)

// Device memory of `device`, pinned (resident), not exportable to other processes.
CUmemAllocationProp allocation_prop(int device) {
  CUmemAllocationProp p{};
  p.type = CU_MEM_ALLOCATION_TYPE_PINNED;
  p.location.type = CU_MEM_LOCATION_TYPE_DEVICE;
  p.location.id = device;
  p.requestedHandleTypes = CU_MEM_HANDLE_TYPE_NONE;
  return p;
}

}  // namespace

bool VirtualDeviceBuffer::supported(int device) {
  const DriverApi& d = driver();
  CUdevice dev = 0;
  CU_CHECK(d.device_get(&dev, device));
  int vmm = 0;
  CU_CHECK(d.device_get_attribute(&vmm, CU_DEVICE_ATTRIBUTE_VIRTUAL_MEMORY_MANAGEMENT_SUPPORTED, dev));
  return vmm != 0;
}

size_t VirtualDeviceBuffer::granularity(int device) {
  const CUmemAllocationProp prop = allocation_prop(device);
  size_t g = 0;
  CU_CHECK(driver().mem_get_allocation_granularity(&g, &prop, CU_MEM_ALLOC_GRANULARITY_RECOMMENDED));
  HONE_CHECK(g > 0, "the driver gives a zero allocation granularity");
  return g;
}

VirtualDeviceBuffer::~VirtualDeviceBuffer() {
  try {
    release();
  } catch (...) {  // a destructor at exit may find the driver shut down already; nothing is left to do then
  }
}

VirtualDeviceBuffer::VirtualDeviceBuffer(VirtualDeviceBuffer&& o) noexcept
    : base_(std::exchange(o.base_, 0)),
      bytes_(std::exchange(o.bytes_, 0)),
      device_(std::exchange(o.device_, -1)),
      mapped_(std::exchange(o.mapped_, false)),
      what_(o.what_) {}

VirtualDeviceBuffer& VirtualDeviceBuffer::operator=(VirtualDeviceBuffer&& o) noexcept {
  if (this != &o) {
    try {
      release();
    } catch (...) {
    }
    base_ = std::exchange(o.base_, 0);
    bytes_ = std::exchange(o.bytes_, 0);
    device_ = std::exchange(o.device_, -1);
    mapped_ = std::exchange(o.mapped_, false);
    what_ = o.what_;
  }
  return *this;
}

void VirtualDeviceBuffer::reserve(size_t bytes, const char* what) {
  release();
  what_ = what;
  // The runtime makes its primary context current here, so the driver calls below have one.
  CUDA_CHECK(cudaFree(nullptr));
  int device = 0;
  CUDA_CHECK(cudaGetDevice(&device));
  HONE_CHECK(supported(device), "device ", device, " has no virtual memory management (", what, ")");
  const size_t g = granularity(device);
  const size_t n = (bytes == 0 ? 1 : bytes) + g - 1;
  HONE_CHECK(n > bytes, "virtual device buffer of ", bytes, " bytes (", what, ") overflows");
  const size_t rounded = n / g * g;
  CUdeviceptr p = 0;
  CU_CHECK(driver().mem_address_reserve(&p, rounded, g, 0, 0));
  base_ = p;
  bytes_ = rounded;
  device_ = device;
}

bool VirtualDeviceBuffer::try_map() {
  HONE_CHECK(reserved(), "map() of a virtual device buffer with no range (", what_, ")");
  HONE_CHECK(!mapped_, "map() of a virtual device buffer already mapped (", what_, ")");
  const DriverApi& d = driver();
  const CUmemAllocationProp prop = allocation_prop(device_);
  CUmemGenericAllocationHandle h = 0;
  const CUresult created = d.mem_create(&h, bytes_, &prop, 0);
  if (created == CUDA_ERROR_OUT_OF_MEMORY) return false;
  CU_CHECK_STATUS(created, "cuMemCreate(&h, bytes_, &prop, 0)");
  // The mapping holds the memory from here on: releasing the handle now makes unmap() the moment it is freed.
  const CUresult m = d.mem_map(base_, bytes_, 0, h, 0);
  const CUresult r = d.mem_release(h);
  if (m == CUDA_ERROR_OUT_OF_MEMORY) return false;
  CU_CHECK_STATUS(m, "cuMemMap(base_, bytes_, 0, h, 0)");
  if (r != CUDA_SUCCESS) {
    d.mem_unmap(base_, bytes_);
    CU_CHECK_STATUS(r, "cuMemRelease(h)");
  }
  CUmemAccessDesc access{};
  access.location.type = CU_MEM_LOCATION_TYPE_DEVICE;
  access.location.id = device_;
  access.flags = CU_MEM_ACCESS_FLAGS_PROT_READWRITE;
  const CUresult a = d.mem_set_access(base_, bytes_, &access, 1);
  if (a != CUDA_SUCCESS) {
    d.mem_unmap(base_, bytes_);
    if (a == CUDA_ERROR_OUT_OF_MEMORY) return false;
    CU_CHECK_STATUS(a, "cuMemSetAccess(base_, bytes_, &access, 1)");
  }
  mapped_ = true;
  return true;
}

void VirtualDeviceBuffer::map() {
  if (try_map()) return;
  size_t free_b = 0, total_b = 0;
  const bool have_info = cudaMemGetInfo(&free_b, &total_b) == cudaSuccess;
  if (!have_info) cudaGetLastError();
  throw Error(cat("device allocation of ", bytes_, " bytes (", what_, ") failed: out of memory (mapping physical ",
                  "memory under a reserved address range)",
                  have_info ? cat("; ", free_b, " of ", total_b, " device bytes are free") : std::string()));
}

void VirtualDeviceBuffer::unmap() {
  if (!mapped_) return;
  mapped_ = false;  // even if the driver refuses: a second unmap of the range would fail the same way
  CU_CHECK(driver().mem_unmap(base_, bytes_));
}

void VirtualDeviceBuffer::release() {
  if (!reserved()) return;
  const CUdeviceptr p = base_;
  const size_t n = bytes_;
  const bool was_mapped = mapped_;
  base_ = 0;
  bytes_ = 0;
  device_ = -1;
  mapped_ = false;
  const DriverApi& d = driver();
  const CUresult u = was_mapped ? d.mem_unmap(p, n) : CUDA_SUCCESS;
  const CUresult f = d.mem_address_free(p, n);
  CU_CHECK_STATUS(u, "cuMemUnmap(p, n)");
  CU_CHECK_STATUS(f, "cuMemAddressFree(p, n)");
}

}  // namespace hone::cuda
