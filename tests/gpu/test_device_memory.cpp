// Arenas on the device (cuda/device_memory.h): memory really is device memory, 64-byte aligned, mark/release
// and peak work as on the host, running out of capacity throws, and the allocator's and the driver's byte counts
// see the reservation.
#include <boost/test/unit_test.hpp>

#include "common/gpu.h"

#if HONE_CUDA
#include <cuda_runtime.h>

#include <vector>

#include "cuda/check.h"
#include "cuda/device_memory.h"
#include "runtime/error.h"
#include "tensor/arena.h"

BOOST_AUTO_TEST_SUITE(device_memory)

BOOST_AUTO_TEST_CASE(arena_on_device_allocates_device_memory, *boost::unit_test::precondition(test::needs_gpu)) {
  auto alloc = hone::cuda::device_arena_allocator();
  hone::Arena arena("activations", 1 << 20, alloc);
  BOOST_TEST((arena.device() == hone::Device::cuda));
  hone::Tensor t = arena.alloc({33, 7}, hone::DType::bf16, "x");
  BOOST_TEST((t.device() == hone::Device::cuda));
  void* p = arena.alloc_bytes(1000, "y");
  BOOST_TEST(reinterpret_cast<uintptr_t>(p) % hone::Arena::kAlignment == 0);
  cudaPointerAttributes attr{};
  CUDA_CHECK(cudaPointerGetAttributes(&attr, p));
  BOOST_TEST((attr.type == cudaMemoryTypeDevice));

  // the memory is usable: a round trip through it
  std::vector<int> in(250), out(250, 0);
  for (int i = 0; i < 250; ++i) in[size_t(i)] = i * 7 - 3;
  CUDA_CHECK(cudaMemcpy(p, in.data(), 1000, cudaMemcpyHostToDevice));
  CUDA_CHECK(cudaMemcpy(out.data(), p, 1000, cudaMemcpyDeviceToHost));
  BOOST_TEST(in == out);
}

BOOST_AUTO_TEST_CASE(mark_release_and_peak, *boost::unit_test::precondition(test::needs_gpu)) {
  hone::Arena arena("scratch", 4096, hone::cuda::device_arena_allocator());
  arena.alloc_bytes(100);
  const hone::Arena::Mark m = arena.mark();
  BOOST_TEST(m == 128u);
  char* a = static_cast<char*>(arena.alloc_bytes(1000));
  BOOST_TEST(arena.used() == 128u + 1024u);
  arena.release(m);
  BOOST_TEST(arena.used() == 128u);
  BOOST_TEST(arena.peak() == 128u + 1024u);
  char* b = static_cast<char*>(arena.alloc_bytes(64));
  BOOST_TEST((a == b));  // released memory is handed out again
  arena.reset_peak();
  BOOST_TEST(arena.peak() == 128u + 64u);
}

BOOST_AUTO_TEST_CASE(out_of_capacity_throws_and_keeps_state, *boost::unit_test::precondition(test::needs_gpu)) {
  hone::Arena arena("small", 1024, hone::cuda::device_arena_allocator());
  arena.alloc_bytes(512);
  BOOST_CHECK_THROW(arena.alloc_bytes(1024, "too big"), hone::Error);
  BOOST_TEST(arena.used() == 512u);
  BOOST_CHECK_NO_THROW(arena.alloc_bytes(512));
  BOOST_TEST(arena.used() == 1024u);
}

BOOST_AUTO_TEST_CASE(allocator_counts_reserved_bytes, *boost::unit_test::precondition(test::needs_gpu)) {
  auto alloc = hone::cuda::device_arena_allocator();
  BOOST_TEST(alloc->bytes_in_use() == 0u);
  {
    hone::Arena a("a", 1000, alloc), b("b", 5000, alloc);
    BOOST_TEST(alloc->bytes_in_use() == 1024u + 5056u);
    BOOST_TEST(alloc->peak_bytes() == 1024u + 5056u);
  }
  BOOST_TEST(alloc->bytes_in_use() == 0u);
  BOOST_TEST(alloc->peak_bytes() == 1024u + 5056u);
  alloc->reset_peak();
  BOOST_TEST(alloc->peak_bytes() == 0u);
}

BOOST_AUTO_TEST_CASE(driver_sees_a_large_reservation, *boost::unit_test::precondition(test::needs_gpu)) {
  const size_t big = size_t(256) << 20;
  hone::cuda::DeviceMemoryPeak peak;
  const hone::cuda::DeviceMemoryInfo before = hone::cuda::device_memory_info();
  BOOST_TEST(before.total_bytes > 0u);
  BOOST_TEST(before.free_bytes <= before.total_bytes);
  peak.sample();
  {
    hone::Arena arena("big", big, hone::cuda::device_arena_allocator());
    const size_t used = peak.sample();
    BOOST_TEST(used >= before.used_bytes() + big);
  }
  const size_t after = peak.sample();
  BOOST_TEST(peak.peak_bytes() >= before.used_bytes() + big);
  BOOST_TEST(after < peak.peak_bytes());  // the block went back to the driver
}

BOOST_AUTO_TEST_CASE(impossible_reservation_is_a_clear_error, *boost::unit_test::precondition(test::needs_gpu)) {
  const size_t huge = hone::cuda::device_memory_info().total_bytes * 2;
  try {
    hone::Arena arena("huge", huge, hone::cuda::device_arena_allocator());
    BOOST_ERROR("a reservation of twice the device memory succeeded");
  } catch (const hone::Error& e) {
    const std::string msg = e.what();
    BOOST_TEST(msg.find("device allocation of") != std::string::npos, msg);
    BOOST_TEST(msg.find("(arena)") != std::string::npos, msg);
    BOOST_TEST(msg.find("bytes are free") != std::string::npos, msg);
  }
  CUDA_CHECK(cudaGetLastError());  // no error left behind for the next launch check
}

BOOST_AUTO_TEST_SUITE_END()
#endif  // HONE_CUDA
