// The classes the model still has once per backend, named by backend, so that code written once over B
// (model/transformer.h) can hold them: the mixture-of-experts feed-forward. Each entry goes when its pair is written
// once over the backend and Comm. Plain header: declarations only.
#pragma once

namespace hone {

struct CpuBackend;
struct CudaBackend;

class MoeFeedForward;
class GpuMoeFeedForward;

template <typename B>
struct TwinsOf;

template <>
struct TwinsOf<CpuBackend> {
  using MoeFeedForward = hone::MoeFeedForward;
};

template <>
struct TwinsOf<CudaBackend> {
  using MoeFeedForward = GpuMoeFeedForward;
};

}  // namespace hone
