// Ring attention on the GPU: the attention seam of the layer body (model/transformer_layer.h) on the GPU under context
// parallelism, the device twin of parallel/ring_attention.h with the same steps:
//
//   forward   the diagonal block causal (cuda::attention_forward on the local rows), then C-1 blocks that arrive
//             from the previous rank (cuda::attention_block_forward over earlier() or later(), cuDNN's SDPA with its
//             stats output), each merged by its log-sum-exp into an fp32 running output (cuda::attention_merge_forward)
//             that is rounded to bf16 once at the end
//   backward  the same blocks from the merged output and lse (cuDNN's SDPA backward per block); a visiting block's
//             K/V gradients travel with it in fp32, each rank adding its share, and come home after the last step
//
// Overlap: over NCCL the transfers run on a stream of their own (K/V block j+1 while block j is computed; in the
// backward also the gradients of block j-1), ordered with the compute by events: the compute waits only where it
// reads what arrived. Per ring step a rank sends and receives 2 x local T x Hkv x D bf16 values (the backward adds
// the same count in fp32). Over another device Comm (a test's pair of ranks on one GPU) the transfers run in line
// on the compute stream.
#pragma once

#if HONE_CUDA

#include <cuda_runtime.h>

#include <memory>
#include <vector>

#include "cuda/device_memory.h"
#include "backend/cuda_backend.h"
#include "model/transformer_layer.h"
#include "parallel/context_parallel.h"

namespace hone {

class NcclComm;
class NcclWork;

class GpuRingAttention final : public LayerAttention<CudaBackend> {
 public:
  // cp (which must outlive this) holds the current split; ctx is the engine's (its stream runs the compute).
  GpuRingAttention(GpuContextParallel& cp, const cuda::GpuContext& ctx);
  GpuRingAttention(GpuContextParallel& cp, const CudaBackend::Exec& x) : GpuRingAttention(cp, x.ctx()) {}
  ~GpuRingAttention() override;
  GpuRingAttention(const GpuRingAttention&) = delete;
  GpuRingAttention& operator=(const GpuRingAttention&) = delete;

  void forward(int layer, const LayerShape& s, const LayerBatch& b, const LayerActivations<CudaBackend>& a,
               const CudaBackend::Exec& x) override;
  void backward(const LayerShape& s, const LayerBatch& b, const LayerActivations<CudaBackend>& a, const bf16* dattn,
                bf16* dq_r, bf16* dk_r, bf16* dv, const CudaBackend::Exec& x) override;

  // Device bytes of the ring's buffers for T local rows of shape s (the memory planner counts them).
  static size_t scratch_bytes(const LayerShape& s, int T);
  // Waits (under the NCCL watchdog) for every transfer still in flight; frees nothing.
  void drain();
  // Waits for the transfers and frees the buffers (generation takes the memory); the next call allocates them again.
  void release();

 private:
  struct Pending;
  // Sends n values of `send` to the next rank and receives the previous rank's n into `recv`, after the compute
  // queued so far; returns the index of the transfer for arrived().
  int pass(const void* send, void* recv, int64_t n, CommType type);
  // The compute stream waits for transfer `i`.
  void arrived(int i);
  void ensure_buffers(const LayerShape& s, int T);
  AttentionSegments segments_at(int step) const;

  GpuContextParallel& cp_;
  const cuda::GpuContext ctx_;
  NcclComm* nccl_ = nullptr;  // the overlapped path; null: transfers in line
  cudaStream_t comm_stream_ = nullptr;
  cudaEvent_t compute_done_ = nullptr;
  std::unique_ptr<Pending> pending_;
  DeviceArray<bf16> kv_[2];          // K/V blocks [k (T x K) | v (T x K)]
  DeviceArray<float> out_acc_;       // [T, Q] fp32 running output
  DeviceArray<bf16> block_out_;      // [T, Q]
  DeviceArray<float> block_lse_;     // [Hq, T]
  DeviceArray<float> dkv_acc_[2];    // traveling K/V gradients, fp32 [2 T K]
  DeviceArray<bf16> dkv_block_;      // this step's share, bf16 [2 T K]
};

}  // namespace hone

#endif  // HONE_CUDA
