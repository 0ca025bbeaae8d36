// Arena bookkeeping and the host allocator.
#include "tensor/arena.h"

#include <cstdlib>

#include "runtime/error.h"

namespace hone {

namespace {

size_t round_up(size_t n, size_t a) { return (n + a - 1) / a * a; }

class HostArenaAllocator : public ArenaAllocator {
 public:
  void* allocate(size_t bytes) override {
    void* p = std::aligned_alloc(Arena::kAlignment, round_up(bytes == 0 ? 1 : bytes, Arena::kAlignment));
    HONE_CHECK(p != nullptr, "host allocation of ", bytes, " bytes for an arena failed");
    return p;
  }
  void deallocate(void* p, size_t) override { std::free(p); }
  Device device() const override { return Device::cpu; }
};

}  // namespace

std::shared_ptr<ArenaAllocator> host_arena_allocator() { return std::make_shared<HostArenaAllocator>(); }

Arena::Arena(std::string name, size_t capacity, std::shared_ptr<ArenaAllocator> allocator)
    : name_(std::move(name)), allocator_(std::move(allocator)), capacity_(round_up(capacity, kAlignment)) {
  HONE_CHECK(allocator_ != nullptr, "arena '", name_, "' has no allocator");
  base_ = static_cast<char*>(allocator_->allocate(capacity_));
  HONE_CHECK(reinterpret_cast<uintptr_t>(base_) % kAlignment == 0, "arena '", name_, "': allocator returned memory not ",
             kAlignment, "-byte aligned");
}

Arena::~Arena() {
  if (base_) allocator_->deallocate(base_, capacity_);
}

void* Arena::alloc_bytes(size_t bytes, const char* what) {
  const size_t need = round_up(bytes, kAlignment);
  if (need > capacity_ - used_) {
    throw Error(cat("arena '", name_, "' is out of memory: ", what, " needs ", bytes, " bytes (", need,
                    " aligned) but ", capacity_ - used_, " of ", capacity_, " bytes are free (", used_,
                    " in use, peak ", peak_, ")"));
  }
  void* p = base_ + used_;
  used_ += need;
  if (used_ > peak_) peak_ = used_;
  return p;
}

Tensor Arena::alloc(std::vector<int64_t> shape, DType dtype, const char* what) {
  int64_t n = 1;
  for (int64_t d : shape) {
    HONE_CHECK(d >= 0, "arena '", name_, "': negative dimension requested for ", what);
    n *= d;
  }
  const size_t bytes = size_t(n) * dtype_size(dtype);
  void* p = nullptr;
  if (round_up(bytes, kAlignment) <= capacity_ - used_) {
    p = alloc_bytes(bytes, what);
  } else {  // name the shape too in the error
    const std::string label = cat(what, " ", Tensor::view(nullptr, shape, dtype).shape_string(), " ", dtype_name(dtype));
    p = alloc_bytes(bytes, label.c_str());
  }
  return Tensor::view(p, std::move(shape), dtype, allocator_->device());
}

void Arena::release(Mark m) {
  HONE_CHECK(m <= used_, "arena '", name_, "': release to mark ", m, " beyond the ", used_, " bytes in use");
  used_ = m;
}

}  // namespace hone
