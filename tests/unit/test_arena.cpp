// The memory arena: aligned bump allocation, marks and release, reset, used/peak accounting, the out-of-capacity
// error, and a pluggable allocator.
#include <boost/test/unit_test.hpp>

#include <cstring>

#include "runtime/error.h"
#include "tensor/arena.h"

using namespace hone;

BOOST_AUTO_TEST_SUITE(arena)

BOOST_AUTO_TEST_CASE(allocations_are_aligned_disjoint_and_counted) {
  Arena a("test", 1000);
  BOOST_TEST(a.capacity() == 1024u);  // rounded up to the alignment
  Tensor x = a.alloc({3}, DType::f32, "x");    // 12 bytes -> 64
  Tensor y = a.alloc({5, 7}, DType::bf16, "y");  // 70 bytes -> 128
  BOOST_TEST(reinterpret_cast<uintptr_t>(x.data()) % Arena::kAlignment == 0u);
  BOOST_TEST(reinterpret_cast<uintptr_t>(y.data()) % Arena::kAlignment == 0u);
  BOOST_TEST(static_cast<char*>(y.data()) - static_cast<char*>(x.data()) == 64);
  BOOST_TEST(a.used() == 192u);
  BOOST_TEST(a.peak() == 192u);
  BOOST_TEST(y.shape_string() == "[5, 7]");
  BOOST_TEST((y.dtype() == DType::bf16));
  BOOST_TEST((y.device() == Device::cpu));
  std::memset(x.data(), 0xff, x.nbytes());  // writable, and does not spill into y
  std::memset(y.data(), 0, y.nbytes());
  BOOST_TEST(y.u16()[0] == 0u);
}

BOOST_AUTO_TEST_CASE(release_to_a_mark_reuses_memory_and_keeps_the_peak) {
  Arena a("scratch", 4096);
  a.alloc({16});
  const Arena::Mark m = a.mark();
  void* first = a.alloc({100}).data();
  a.alloc({200});
  const size_t high = a.used();
  a.release(m);
  BOOST_TEST(a.used() == m);
  BOOST_TEST(a.peak() == high);
  BOOST_TEST(a.alloc({100}).data() == first);  // the same bytes again
  a.reset();
  BOOST_TEST(a.used() == 0u);
  BOOST_TEST(a.peak() == high);
  a.reset_peak();
  BOOST_TEST(a.peak() == 0u);
  BOOST_CHECK_THROW(a.release(64), Error);  // a mark beyond what is in use
}

BOOST_AUTO_TEST_CASE(out_of_capacity_names_the_request) {
  Arena a("activations", 256);
  a.alloc({32});  // 128 bytes
  try {
    a.alloc({2, 40}, DType::f32, "attention scores");
    BOOST_FAIL("allocation beyond the capacity succeeded");
  } catch (const Error& e) {
    const std::string msg = e.what();
    BOOST_TEST(msg.find("activations") != std::string::npos, msg);
    BOOST_TEST(msg.find("attention scores [2, 40] f32") != std::string::npos, msg);
    BOOST_TEST(msg.find("320 bytes") != std::string::npos, msg);
    BOOST_TEST(msg.find("128 of 256") != std::string::npos, msg);
  }
  BOOST_TEST(a.used() == 128u);  // a failed request changes nothing
  BOOST_TEST(a.alloc({32}).defined());  // exactly fills the rest
  BOOST_CHECK_THROW(a.alloc_bytes(1, "one more byte"), Error);
}

namespace {
// Counts what it hands out: stands in for a device allocator.
class CountingAllocator : public ArenaAllocator {
 public:
  void* allocate(size_t bytes) override {
    ++allocations;
    live += bytes;
    return host_->allocate(bytes);
  }
  void deallocate(void* p, size_t bytes) override {
    live -= bytes;
    host_->deallocate(p, bytes);
  }
  Device device() const override { return Device::cpu; }
  int allocations = 0;
  size_t live = 0;

 private:
  std::shared_ptr<ArenaAllocator> host_ = host_arena_allocator();
};
}  // namespace

BOOST_AUTO_TEST_CASE(the_block_comes_from_the_given_allocator_once) {
  auto counting = std::make_shared<CountingAllocator>();
  {
    Arena a("pluggable", 640, counting);
    for (int i = 0; i < 5; ++i) a.alloc({8});
    a.reset();
    a.alloc({8});
    BOOST_TEST(counting->allocations == 1);
    BOOST_TEST(counting->live == 640u);
  }
  BOOST_TEST(counting->live == 0u);  // returned when the arena goes
}

BOOST_AUTO_TEST_SUITE_END()
