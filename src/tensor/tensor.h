// Tensor: a typed, shaped view of memory on one device. Contiguous row-major (strides only where an op needs
// them, passed explicitly). A Tensor either owns its memory (shared, so copies are cheap views) or views
// memory owned elsewhere (an arena, an mmap'ed file, a slice of a flat parameter buffer).
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "tensor/dtype.h"

namespace hone {

class Tensor {
 public:
  Tensor() = default;

  // Owning host tensor, 64-byte aligned, contents uninitialized.
  static Tensor empty(std::vector<int64_t> shape, DType dtype = DType::f32);
  // Owning host tensor filled with zeros.
  static Tensor zeros(std::vector<int64_t> shape, DType dtype = DType::f32);
  // Non-owning view of memory that must outlive the tensor.
  static Tensor view(void* data, std::vector<int64_t> shape, DType dtype, Device device = Device::cpu);

  bool defined() const { return data_ != nullptr || !shape_.empty(); }
  const std::vector<int64_t>& shape() const { return shape_; }
  int ndim() const { return int(shape_.size()); }
  int64_t dim(int i) const;  // negative i counts from the end
  int64_t numel() const;
  size_t nbytes() const { return size_t(numel()) * dtype_size(dtype_); }
  DType dtype() const { return dtype_; }
  Device device() const { return device_; }
  std::string shape_string() const;  // "[2, 3]"

  void* data() const { return data_; }
  // Typed access; checks the dtype (and host placement for the element accessors).
  float* f32() const;
  int32_t* i32() const;
  int64_t* i64() const;
  uint16_t* u16() const;  // bf16 or f16 bits

  // The same memory with another shape of equal element count.
  Tensor reshape(std::vector<int64_t> shape) const;

  void fill_zero();  // host memory only

 private:
  std::shared_ptr<void> storage_;  // null for views
  void* data_ = nullptr;
  std::vector<int64_t> shape_;
  DType dtype_ = DType::f32;
  Device device_ = Device::cpu;
};

// Host copy with dtype conversion (f32 <-> bf16/f16, same dtype copy); shapes must have equal numel.
void convert_copy(const Tensor& src, Tensor& dst);

}  // namespace hone
