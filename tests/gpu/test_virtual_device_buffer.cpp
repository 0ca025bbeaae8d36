// VirtualDeviceBuffer (cuda/virtual_device_buffer.h): the address survives unmap/map while the physical memory goes
// back to the device, memory mapped again is usable at the same address, a CUDA graph captured over the buffer
// replays correctly after the memory under it was replaced, and a request the device cannot hold is an answer
// (try_map) or a clear error (map), not a crash.
#include <boost/test/unit_test.hpp>

#include "common/gpu.h"

#if HONE_CUDA
#include <cuda_runtime.h>

#include <algorithm>
#include <string>
#include <vector>

#include "cuda/check.h"
#include "cuda/device_memory.h"
#include "cuda/ops_cuda.h"
#include "cuda/virtual_device_buffer.h"
#include "gpu_transformer_test_util.h"
#include "runtime/error.h"

namespace {

std::vector<float> pattern(size_t n, float base) {
  std::vector<float> v(n);
  for (size_t i = 0; i < n; ++i) v[i] = base + float(i % 1000);
  return v;
}

std::vector<float> read_back(const void* p, size_t n) {
  std::vector<float> v(n);
  CUDA_CHECK(cudaMemcpy(v.data(), p, n * sizeof(float), cudaMemcpyDeviceToHost));
  return v;
}

std::vector<float> times(std::vector<float> v, float s) {
  for (float& x : v) x *= s;
  return v;
}

}  // namespace

BOOST_AUTO_TEST_SUITE(virtual_device_buffer)

BOOST_AUTO_TEST_CASE(map_write_unmap_map_keeps_the_address, *boost::unit_test::precondition(test::needs_gpu)) {
  test::ScopedGpuContext g;
  BOOST_REQUIRE(hone::cuda::VirtualDeviceBuffer::supported(0));
  const size_t gran = hone::cuda::VirtualDeviceBuffer::granularity(0);
  BOOST_TEST(gran > 0u);
  const size_t n = (size_t(3) << 20) / sizeof(float) + 17;  // not a multiple of the granularity
  hone::cuda::VirtualDeviceBuffer b;
  BOOST_TEST(!b.reserved());
  b.reserve(n * sizeof(float), "test buffer");
  BOOST_TEST(b.reserved());
  BOOST_TEST(!b.mapped());
  BOOST_TEST(b.size() >= n * sizeof(float));
  BOOST_TEST(b.size() % gran == 0u);
  void* const addr = b.data();
  BOOST_TEST(addr != nullptr);

  b.map();
  BOOST_TEST(b.mapped());
  const std::vector<float> a = pattern(n, 1.f);
  CUDA_CHECK(cudaMemcpy(addr, a.data(), n * sizeof(float), cudaMemcpyHostToDevice));
  BOOST_TEST(read_back(addr, n) == a);
  cudaPointerAttributes attr{};
  CUDA_CHECK(cudaPointerGetAttributes(&attr, addr));
  BOOST_TEST((attr.type == cudaMemoryTypeDevice));

  b.unmap();
  BOOST_TEST(!b.mapped());
  BOOST_TEST(b.reserved());
  BOOST_TEST(b.data() == addr);
  b.unmap();  // a second unmap does nothing

  b.map();
  BOOST_TEST(b.data() == addr);  // fresh memory at the same address
  const std::vector<float> c = pattern(n, -7.f);
  CUDA_CHECK(cudaMemcpy(addr, c.data(), n * sizeof(float), cudaMemcpyHostToDevice));
  BOOST_TEST(read_back(addr, n) == c);
  // A kernel reads and writes it too.
  hone::cuda::scale_inplace(static_cast<float*>(addr), 3.f, int64_t(n), g.ctx);
  CUDA_CHECK(cudaStreamSynchronize(g.ctx.stream));
  BOOST_TEST(read_back(addr, n) == times(c, 3.f));

  b.release();
  BOOST_TEST(!b.reserved());
  BOOST_TEST(!b.mapped());
  b.release();  // a second release does nothing
}

// What the generator relies on: a graph captured over the buffer's addresses stays valid when the memory under them
// is given back and replaced (its contents written again before the replay).
BOOST_AUTO_TEST_CASE(a_graph_captured_over_the_buffer_survives_unmap_and_map,
                     *boost::unit_test::precondition(test::needs_gpu)) {
  test::ScopedGpuContext g;
  const size_t n = size_t(1) << 20;
  hone::cuda::VirtualDeviceBuffer b;
  b.reserve(n * sizeof(float), "graph buffer");
  b.map();
  auto* x = static_cast<float*>(b.data());

  cudaGraph_t graph = nullptr;
  cudaGraphExec_t exec = nullptr;
  CUDA_CHECK(cudaStreamBeginCapture(g.ctx.stream, cudaStreamCaptureModeThreadLocal));
  hone::cuda::scale_inplace(x, 2.f, int64_t(n), g.ctx);
  CUDA_CHECK(cudaMemsetAsync(x, 0, 64 * sizeof(float), g.ctx.stream));  // a memset node over the buffer too
  CUDA_CHECK(cudaMemcpyAsync(x + n - 64, x + 64, 64 * sizeof(float), cudaMemcpyDeviceToDevice,
                             g.ctx.stream));  // and a copy node inside it
  CUDA_CHECK(cudaStreamEndCapture(g.ctx.stream, &graph));
  CUDA_CHECK(cudaGraphInstantiate(&exec, graph, 0));
  CUDA_CHECK(cudaGraphDestroy(graph));

  auto expect = [&](std::vector<float> v) {
    v = times(std::move(v), 2.f);
    for (size_t i = 0; i < 64; ++i) v[i] = 0.f;
    for (size_t i = 0; i < 64; ++i) v[n - 64 + i] = v[64 + i];
    return v;
  };
  const std::vector<float> a = pattern(n, 5.f);
  // On the graph's stream: a plain cudaMemcpy from pageable memory may return before its DMA has landed, and the
  // context's stream does not wait for the legacy stream, so the replay could read part of the old contents.
  CUDA_CHECK(cudaMemcpyAsync(x, a.data(), n * sizeof(float), cudaMemcpyHostToDevice, g.ctx.stream));
  CUDA_CHECK(cudaGraphLaunch(exec, g.ctx.stream));
  CUDA_CHECK(cudaStreamSynchronize(g.ctx.stream));
  BOOST_TEST(read_back(x, n) == expect(a));

  for (int round = 0; round < 3; ++round) {
    b.unmap();
    // Something else may take the memory in between (as training does between two generation phases).
    {
      hone::DeviceArray<char> other(int64_t(n * sizeof(float)), "in between");
      CUDA_CHECK(cudaMemset(other.get(), 0xff, n * sizeof(float)));
    }
    b.map();
    BOOST_TEST(static_cast<float*>(b.data()) == x);
    const std::vector<float> c = pattern(n, float(-100 * round));
    CUDA_CHECK(cudaMemcpyAsync(x, c.data(), n * sizeof(float), cudaMemcpyHostToDevice, g.ctx.stream));
    CUDA_CHECK(cudaGraphLaunch(exec, g.ctx.stream));
    CUDA_CHECK(cudaStreamSynchronize(g.ctx.stream));
    const std::vector<float> got = read_back(x, n), want = expect(c);
    size_t wrong = 0, first = n;
    for (size_t i = 0; i < n; ++i)
      if (got[i] != want[i]) first = std::min(first, i), ++wrong;
    BOOST_TEST(wrong == 0u, "round " << round << ": " << wrong << " values wrong, the first at " << first);
  }
  CUDA_CHECK(cudaGraphExecDestroy(exec));
}

BOOST_AUTO_TEST_CASE(unmap_gives_the_memory_back, *boost::unit_test::precondition(test::needs_gpu)) {
  test::ScopedGpuContext g;
  const size_t big = size_t(512) << 20;
  hone::cuda::VirtualDeviceBuffer b;
  b.reserve(big, "big buffer");
  const size_t before = hone::cuda::device_memory_info().used_bytes();
  b.map();
  const size_t mapped = hone::cuda::device_memory_info().used_bytes();
  b.unmap();
  const size_t unmapped = hone::cuda::device_memory_info().used_bytes();
  BOOST_TEST_MESSAGE("used: " << before << " reserved, " << mapped << " mapped, " << unmapped << " unmapped");
  BOOST_TEST(mapped >= before + big);
  BOOST_TEST(unmapped + big / 2 < mapped);  // the driver's count fell by (about) the mapping
}

BOOST_AUTO_TEST_CASE(no_room_is_an_answer_or_a_clear_error, *boost::unit_test::precondition(test::needs_gpu)) {
  test::ScopedGpuContext g;
  // The whole device: the context and its workspaces already hold part of it.
  const size_t huge = hone::cuda::device_memory_info().total_bytes;
  hone::cuda::VirtualDeviceBuffer b;
  b.reserve(huge, "huge buffer");  // address space is plentiful: only the physical memory is missing
  BOOST_TEST(!b.try_map());
  BOOST_TEST(!b.mapped());
  BOOST_TEST(b.reserved());
  try {
    b.map();
    BOOST_ERROR("mapping the whole device memory succeeded");
  } catch (const hone::Error& e) {
    const std::string msg = e.what();
    BOOST_TEST(msg.find("device allocation of") != std::string::npos, msg);
    BOOST_TEST(msg.find("(huge buffer") != std::string::npos, msg);
    BOOST_TEST(msg.find("bytes are free") != std::string::npos, msg);
  }
  CUDA_CHECK(cudaGetLastError());  // no error left behind for the next launch check
  // The range is still usable at a size that fits.
  b.reserve(size_t(4) << 20, "small again");
  BOOST_TEST(b.try_map());
  CUDA_CHECK(cudaMemset(b.data(), 0, b.size()));
  CUDA_CHECK(cudaDeviceSynchronize());
}

BOOST_AUTO_TEST_CASE(misuse_is_refused, *boost::unit_test::precondition(test::needs_gpu)) {
  test::ScopedGpuContext g;
  hone::cuda::VirtualDeviceBuffer b;
  BOOST_CHECK_THROW(b.map(), hone::Error);  // no range
  b.reserve(1, "one byte");
  BOOST_TEST(b.size() == hone::cuda::VirtualDeviceBuffer::granularity(0));
  b.map();
  BOOST_CHECK_THROW(b.map(), hone::Error);  // mapped already
  hone::cuda::VirtualDeviceBuffer moved = std::move(b);
  BOOST_TEST(!b.reserved());
  BOOST_TEST(moved.mapped());
  CUDA_CHECK(cudaMemset(moved.data(), 1, moved.size()));
  CUDA_CHECK(cudaDeviceSynchronize());
}

BOOST_AUTO_TEST_SUITE_END()

#endif  // HONE_CUDA
