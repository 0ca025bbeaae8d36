// The classes the model still has once per backend, named by backend, so that code written once over B
// (model/transformer.h) can hold them: the parallelisms' collectives (tensor/sequence, context with its ring
// attention, expert dispatch) and the mixture-of-experts feed-forward. Each entry goes when its pair is written once
// over the backend and Comm. Plain header: declarations only.
#pragma once

namespace hone {

struct CpuBackend;
struct CudaBackend;

class TensorParallel;
class ContextParallel;
class ExpertParallel;
class RingAttention;
class MoeFeedForward;
class GpuTensorParallel;
class GpuContextParallel;
class GpuExpertParallel;
class GpuRingAttention;
class GpuMoeFeedForward;

template <typename B>
struct TwinsOf;

template <>
struct TwinsOf<CpuBackend> {
  using TensorParallel = hone::TensorParallel;
  using ContextParallel = hone::ContextParallel;
  using ExpertParallel = hone::ExpertParallel;
  using RingAttention = hone::RingAttention;
  using MoeFeedForward = hone::MoeFeedForward;
};

template <>
struct TwinsOf<CudaBackend> {
  using TensorParallel = GpuTensorParallel;
  using ContextParallel = GpuContextParallel;
  using ExpertParallel = GpuExpertParallel;
  using RingAttention = GpuRingAttention;
  using MoeFeedForward = GpuMoeFeedForward;
};

}  // namespace hone
