// Device buffers for the GPU tests: hone's DeviceArray (cuda/device_memory.h) with test helpers to upload fp32 host
// data as bf16 or fp32, poison with NaN and download.
#pragma once

#include <cuda_bf16.h>
#include <cuda_runtime.h>

#include <cmath>
#include <cstdint>
#include <random>
#include <vector>

#include "cuda/check.h"
#include "cuda/device_memory.h"

namespace test {

template <typename T>
class DeviceBuffer : public hone::DeviceArray<T> {
 public:
  explicit DeviceBuffer(int64_t n) : hone::DeviceArray<T>(n, "test buffer"), p_(this->get()), n_(n) {}

  // NaN in every element (0xFF bytes is a NaN for fp32 and bf16; for ints it is -1).
  // Every fill and upload completes before it returns: ops run on their own non-blocking stream, which does not
  // wait for the legacy default stream these calls use.
  void poison() {
    CUDA_CHECK(cudaMemset(p_, 0xFF, size_t(n_) * sizeof(T)));
    CUDA_CHECK(cudaDeviceSynchronize());
  }
  void zero() {
    CUDA_CHECK(cudaMemset(p_, 0, size_t(n_) * sizeof(T)));
    CUDA_CHECK(cudaDeviceSynchronize());
  }

  // From fp32 host values (rounded to bf16 for bf16 buffers). `host` is replaced by what the device holds, so the
  // CPU reference sees exactly the GPU's inputs.
  void upload(std::vector<float>& host) {
    std::vector<T> tmp(static_cast<size_t>(n_));
    for (int64_t i = 0; i < n_; ++i) {
      tmp[size_t(i)] = T(host[size_t(i)]);
      host[size_t(i)] = float(tmp[size_t(i)]);
    }
    CUDA_CHECK(cudaMemcpy(p_, tmp.data(), size_t(n_) * sizeof(T), cudaMemcpyHostToDevice));
    CUDA_CHECK(cudaDeviceSynchronize());
  }
  void upload_raw(const std::vector<T>& host) {
    CUDA_CHECK(cudaMemcpy(p_, host.data(), size_t(n_) * sizeof(T), cudaMemcpyHostToDevice));
    CUDA_CHECK(cudaDeviceSynchronize());
  }
  std::vector<float> download() const {
    std::vector<T> tmp(static_cast<size_t>(n_));
    CUDA_CHECK(cudaDeviceSynchronize());
    CUDA_CHECK(cudaMemcpy(tmp.data(), p_, size_t(n_) * sizeof(T), cudaMemcpyDeviceToHost));
    std::vector<float> out(static_cast<size_t>(n_));
    for (int64_t i = 0; i < n_; ++i) out[size_t(i)] = float(tmp[size_t(i)]);
    return out;
  }

 private:
  T* p_;
  int64_t n_;
};

inline std::vector<float> random_vector(int64_t n, std::mt19937_64& rng, float scale = 1.f) {
  std::normal_distribution<float> d(0.f, scale);
  std::vector<float> v(static_cast<size_t>(n));
  for (auto& x : v) x = d(rng);
  return v;
}

}  // namespace test
