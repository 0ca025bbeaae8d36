// Tensor construction, views and host conversions.
#include "tensor/tensor.h"

#include <cmath>
#include <cstdlib>
#include <cstring>
#include <sstream>

#include "runtime/error.h"

namespace hone {

float f16_to_f32(uint16_t h) {
  const uint32_t sign = uint32_t(h & 0x8000) << 16;
  uint32_t exp = (h >> 10) & 0x1f, man = h & 0x3ff, u;
  if (exp == 0) {
    if (man == 0) {
      u = sign;
    } else {  // subnormal: renormalize
      exp = 127 - 15 + 1;
      while (!(man & 0x400)) { man <<= 1; --exp; }
      man &= 0x3ff;
      u = sign | (exp << 23) | (man << 13);
    }
  } else if (exp == 31) {
    u = sign | 0x7f800000u | (man << 13);
  } else {
    u = sign | ((exp + 127 - 15) << 23) | (man << 13);
  }
  float f;
  std::memcpy(&f, &u, 4);
  return f;
}

uint16_t f32_to_f16(float f) {
  uint32_t u;
  std::memcpy(&u, &f, 4);
  const uint16_t sign = uint16_t((u >> 16) & 0x8000);
  const uint32_t abs = u & 0x7fffffffu;
  if (abs >= 0x7f800000u) return uint16_t(sign | 0x7c00 | (abs > 0x7f800000u ? 0x200 : 0));  // inf / NaN
  if (abs >= 0x477ff000u) return uint16_t(sign | 0x7c00);  // rounds past 65504: inf
  if (abs < 0x38800000u) {  // below the smallest normal half: subnormal or zero, round to nearest even
    float a;
    std::memcpy(&a, &abs, 4);
    const float scaled = a * 16777216.0f;  // 2^24: one unit of the smallest subnormal
    return uint16_t(sign | uint16_t(std::nearbyint(scaled)));
  }
  uint32_t r = abs + 0xfffu + ((abs >> 13) & 1u);  // round to nearest even at bit 13
  return uint16_t(sign | ((r - (112u << 23)) >> 13));
}

Tensor Tensor::empty(std::vector<int64_t> shape, DType dtype) {
  Tensor t;
  t.shape_ = std::move(shape);
  t.dtype_ = dtype;
  for (int64_t d : t.shape_) HONE_CHECK(d >= 0, "negative dimension in ", t.shape_string());
  size_t bytes = (t.nbytes() + 63) / 64 * 64;
  if (bytes == 0) bytes = 64;
  void* p = std::aligned_alloc(64, bytes);
  HONE_CHECK(p != nullptr, "host allocation of ", bytes, " bytes failed");
  t.storage_ = std::shared_ptr<void>(p, std::free);
  t.data_ = p;
  return t;
}

Tensor Tensor::zeros(std::vector<int64_t> shape, DType dtype) {
  Tensor t = empty(std::move(shape), dtype);
  std::memset(t.data_, 0, t.nbytes());
  return t;
}

Tensor Tensor::view(void* data, std::vector<int64_t> shape, DType dtype, Device device) {
  Tensor t;
  t.data_ = data;
  t.shape_ = std::move(shape);
  t.dtype_ = dtype;
  t.device_ = device;
  return t;
}

int64_t Tensor::dim(int i) const {
  if (i < 0) i += ndim();
  HONE_CHECK(i >= 0 && i < ndim(), "dimension ", i, " out of range for shape ", shape_string());
  return shape_[size_t(i)];
}

int64_t Tensor::numel() const {
  if (shape_.empty()) return data_ ? 1 : 0;
  int64_t n = 1;
  for (int64_t d : shape_) n *= d;
  return n;
}

std::string Tensor::shape_string() const {
  std::ostringstream os;
  os << '[';
  for (size_t i = 0; i < shape_.size(); ++i) os << (i ? ", " : "") << shape_[i];
  os << ']';
  return os.str();
}

float* Tensor::f32() const {
  HONE_CHECK(dtype_ == DType::f32, "tensor is ", dtype_name(dtype_), ", not f32");
  return static_cast<float*>(data_);
}
int32_t* Tensor::i32() const {
  HONE_CHECK(dtype_ == DType::i32, "tensor is ", dtype_name(dtype_), ", not i32");
  return static_cast<int32_t*>(data_);
}
int64_t* Tensor::i64() const {
  HONE_CHECK(dtype_ == DType::i64, "tensor is ", dtype_name(dtype_), ", not i64");
  return static_cast<int64_t*>(data_);
}
uint16_t* Tensor::u16() const {
  HONE_CHECK(dtype_ == DType::bf16 || dtype_ == DType::f16, "tensor is ", dtype_name(dtype_), ", not bf16/f16");
  return static_cast<uint16_t*>(data_);
}

Tensor Tensor::reshape(std::vector<int64_t> shape) const {
  Tensor t = *this;
  t.shape_ = std::move(shape);
  HONE_CHECK(t.numel() == numel(), "reshape of ", shape_string(), " to ", t.shape_string(), " changes the size");
  return t;
}

void Tensor::fill_zero() {
  // Device memory is zeroed on its stream, by the backend (B::zero), not here.
  HONE_CHECK(device_ == Device::cpu, "fill_zero of a device tensor (zero it through the backend)");
  std::memset(data_, 0, nbytes());
}

void convert_copy(const Tensor& src, Tensor& dst) {
  HONE_CHECK(src.device() == Device::cpu && dst.device() == Device::cpu, "convert_copy is host-only");
  HONE_CHECK(src.numel() == dst.numel(), "convert_copy size mismatch ", src.shape_string(), " vs ", dst.shape_string());
  const int64_t n = src.numel();
  if (src.dtype() == dst.dtype()) {
    std::memcpy(dst.data(), src.data(), src.nbytes());
    return;
  }
  auto load = [&](int64_t i) -> float {
    switch (src.dtype()) {
      case DType::f32: return src.f32()[i];
      case DType::bf16: return bf16_to_f32(src.u16()[i]);
      case DType::f16: return f16_to_f32(src.u16()[i]);
      default: HONE_CHECK(false, "convert_copy from ", dtype_name(src.dtype()), " is not supported");
    }
    return 0.f;
  };
  for (int64_t i = 0; i < n; ++i) {
    float v = load(i);
    switch (dst.dtype()) {
      case DType::f32: dst.f32()[i] = v; break;
      case DType::bf16: dst.u16()[i] = f32_to_bf16(v); break;
      case DType::f16: dst.u16()[i] = f32_to_f16(v); break;
      default: HONE_CHECK(false, "convert_copy to ", dtype_name(dst.dtype()), " is not supported");
    }
  }
}

}  // namespace hone
