// A memory policy of the backends: compute weight copies that can wait in host memory while generation runs
// (train.offload_during_generation; the engine's training and reference copies). On a backend whose buffers are
// device memory the copy moves into B::HostStaging (pinned on the GPU) and its device memory is freed, to come back
// at another address; on the CPU the weights are host memory already and stay where they are.
#pragma once

#include <cstdint>

#include "backend/backend.h"

namespace hone {

template <typename B>
class OffloadableWeights {
 public:
  using A = typename B::Act;
  // n zeroed compute weights (vocabulary padding stays 0 where nothing writes it).
  OffloadableWeights(int64_t n, const typename B::Exec& x) : n_(n), device_(n, "compute weights") {
    B::zero(x, device_.get(), device_.bytes());
  }
  OffloadableWeights(const OffloadableWeights&) = delete;
  OffloadableWeights& operator=(const OffloadableWeights&) = delete;

  A* get() const { return device_.get(); }
  int64_t size() const { return n_; }
  size_t bytes() const { return size_t(n_) * sizeof(A); }
  bool offloaded() const { return offloaded_; }
  void offload(const typename B::Exec& x) {
    if constexpr (B::kDeviceMemory) {
      if (offloaded_) return;
      if (!host_.get()) host_ = typename B::template HostStaging<A>(n_, "offloaded weights");
      B::download(x, host_.get(), device_.get(), bytes());
      B::sync(x);
      device_ = typename B::template Array<A>();
      offloaded_ = true;
    }
  }
  void reload(const typename B::Exec& x) {
    if constexpr (B::kDeviceMemory) {
      if (!offloaded_) return;
      device_ = typename B::template Array<A>(n_, "compute weights");
      B::upload(x, device_.get(), host_.get(), bytes());
      B::sync(x);
      offloaded_ = false;
    }
  }

 private:
  int64_t n_;
  typename B::template Array<A> device_;
  typename B::template HostStaging<A> host_;
  bool offloaded_ = false;
};

}  // namespace hone
