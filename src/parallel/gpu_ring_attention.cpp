// Ring attention on the GPU (see gpu_ring_attention.h).
#include "parallel/gpu_ring_attention.h"

#if HONE_CUDA

#include <algorithm>
#include <type_traits>

#include "comm/nccl_comm.h"
#include "cuda/check.h"
#include "cuda/context_parallel_kernels.h"
#include "cuda/lm_head_kernels.h"
#include "runtime/error.h"

namespace hone {

// The transfers of the current and the previous call, waited for on the host (the watchdog) one call later, so the
// host never blocks on the layer it is queueing.
struct GpuRingAttention::Pending {
  std::vector<NcclWork> current, previous;
};

GpuRingAttention::GpuRingAttention(GpuContextParallel& cp, const cuda::GpuContext& ctx)
    : cp_(cp), ctx_(ctx), nccl_(dynamic_cast<NcclComm*>(&cp.comm())), pending_(std::make_unique<Pending>()) {
  if (nccl_) {
    CUDA_CHECK(cudaStreamCreateWithFlags(&comm_stream_, cudaStreamNonBlocking));
    CUDA_CHECK(cudaEventCreateWithFlags(&compute_done_, cudaEventDisableTiming));
  }
}

GpuRingAttention::~GpuRingAttention() {
  try {
    drain();
  } catch (...) {  // a failed transfer was reported by the watchdog; nothing more to do here
  }
  if (compute_done_) cudaEventDestroy(compute_done_);
  if (comm_stream_) cudaStreamDestroy(comm_stream_);
}

void GpuRingAttention::drain() {
  for (auto* list : {&pending_->previous, &pending_->current}) {
    for (NcclWork& w : *list) w.wait();
    list->clear();
  }
}

void GpuRingAttention::release() {
  drain();
  CUDA_CHECK(cudaStreamSynchronize(ctx_.stream));
  if (nccl_) CUDA_CHECK(cudaStreamSynchronize(comm_stream_));
  for (auto& kv : kv_) kv = DeviceArray<bf16>();
  out_acc_ = DeviceArray<float>();
  block_out_ = DeviceArray<bf16>();
  block_lse_ = DeviceArray<float>();
  for (auto& d : dkv_acc_) d = DeviceArray<float>();
  dkv_block_ = DeviceArray<bf16>();
}

size_t GpuRingAttention::scratch_bytes(const LayerShape& s, int T) {
  const size_t TK = size_t(T) * size_t(s.kv_dim()), TQ = size_t(T) * size_t(s.q_dim());
  return 2 * (2 * TK * sizeof(bf16)) + TQ * sizeof(float) + TQ * sizeof(bf16) + size_t(s.heads) * T * sizeof(float) +
         2 * (2 * TK * sizeof(float)) + 2 * TK * sizeof(bf16);
}

void GpuRingAttention::ensure_buffers(const LayerShape& s, int T) {
  const int64_t TK = int64_t(T) * s.kv_dim(), TQ = int64_t(T) * s.q_dim();
  if (kv_[0].size() >= 2 * TK && out_acc_.size() >= TQ && block_lse_.size() >= int64_t(s.heads) * T) return;
  // Growing frees the old buffers, which the streams may still read.
  CUDA_CHECK(cudaStreamSynchronize(ctx_.stream));
  if (nccl_) CUDA_CHECK(cudaStreamSynchronize(comm_stream_));
  auto grow = [](auto& a, int64_t n, const char* what) {
    using A = std::remove_reference_t<decltype(a)>;
    if (a.size() < n) a = A(n, what);
  };
  for (auto& kv : kv_) grow(kv, 2 * TK, "ring attention K/V block");
  grow(out_acc_, TQ, "ring attention running output");
  grow(block_out_, TQ, "ring attention block output");
  grow(block_lse_, int64_t(s.heads) * T, "ring attention block lse");
  for (auto& d : dkv_acc_) grow(d, 2 * TK, "ring attention K/V gradients");
  grow(dkv_block_, 2 * TK, "ring attention block K/V gradients");
}

AttentionSegments GpuRingAttention::segments_at(int step) const {
  const int i = cp_.rank(), C = cp_.size();
  const int r = (i - step + C) % C;
  return r < i ? cp_.earlier() : cp_.later();
}

int GpuRingAttention::pass(const void* send, void* recv, int64_t n, CommType type) {
  const int i = cp_.rank(), C = cp_.size();
  const int next = (i + 1) % C, prev = (i - 1 + C) % C;
  if (!nccl_) {  // in line: the Comm orders itself with the compute stream
    cp_.comm().send_recv_raw(send, n, next, recv, n, prev, type);
    return -1;
  }
  CUDA_CHECK(cudaEventRecord(compute_done_, ctx_.stream));
  CUDA_CHECK(cudaStreamWaitEvent(comm_stream_, compute_done_, 0));
  pending_->current.push_back(nccl_->send_recv_async(send, n, next, recv, n, prev, type, comm_stream_));
  return int(pending_->current.size()) - 1;
}

void GpuRingAttention::arrived(int i) {
  if (i < 0) return;
  CUDA_CHECK(cudaStreamWaitEvent(ctx_.stream, pending_->current[size_t(i)].event(), 0));
}

void GpuRingAttention::forward(int, const LayerShape& s, const LayerBatch& b, const LayerActivations<CudaBackend>& a,
                               const CudaBackend::Exec& x) {
  const cuda::GpuContext& ctx = x.ctx();
  const int T = b.T, Hq = s.heads, Hkv = s.kv_heads, D = s.head_dim, C = cp_.size();
  const int64_t TK = int64_t(T) * s.kv_dim(), TQ = int64_t(T) * s.q_dim();
  HONE_CHECK(T == cp_.current().local_tokens(), "ring attention: the layer batch (", T,
             " rows) is not the current context-parallel split (", cp_.current().local_tokens(), ")");
  for (NcclWork& w : pending_->previous) w.wait();
  pending_->previous = std::move(pending_->current);
  pending_->current.clear();
  if (C > 1) {  // this rank's block starts around the ring while the diagonal block is computed
    ensure_buffers(s, T);
    CUDA_CHECK(cudaMemcpyAsync(kv_[0].get(), a.k_r, size_t(TK) * sizeof(bf16), cudaMemcpyDeviceToDevice, ctx.stream));
    CUDA_CHECK(cudaMemcpyAsync(kv_[0].get() + TK, a.v, size_t(TK) * sizeof(bf16), cudaMemcpyDeviceToDevice,
                               ctx.stream));
  }
  int transfer = C > 1 ? pass(kv_[0].get(), kv_[1].get(), 2 * TK, CommType::bf16) : -1;
  cuda::attention_forward(a.attn, a.lse, a.q_r, a.k_r, a.v, b.cu_seqlens, b.S, b.max_seqlen, T, Hq, Hkv, D,
                          s.attention_scale(), ctx);
  if (C == 1) return;
  cuda::bf16_to_f32(out_acc_.get(), a.attn, TQ, ctx);
  for (int j = 1; j < C; ++j) {
    const int arriving = transfer;
    // The next block travels while this one is computed; its buffer held the block of step j-1.
    transfer = j + 1 < C ? pass(kv_[j % 2].get(), kv_[(j + 1) % 2].get(), 2 * TK, CommType::bf16) : -1;
    arrived(arriving);
    const bf16* kv = kv_[j % 2].get();
    const AttentionSegments seg = segments_at(j);
    cuda::attention_block_forward(block_out_.get(), block_lse_.get(), a.q_r, kv, kv + TK, seg, T, T, Hq, Hkv, D,
                                  s.attention_scale(), ctx);
    cuda::attention_merge_forward(out_acc_.get(), a.lse, block_out_.get(), block_lse_.get(), seg, T, Hq, D, ctx);
  }
  cuda::f32_to_bf16(a.attn, out_acc_.get(), TQ, ctx);
}

void GpuRingAttention::backward(const LayerShape& s, const LayerBatch& b, const LayerActivations<CudaBackend>& a,
                                const bf16* dattn, bf16* dq_r, bf16* dk_r, bf16* dv, const CudaBackend::Exec& x) {
  const cuda::GpuContext& ctx = x.ctx();
  const int T = b.T, Hq = s.heads, Hkv = s.kv_heads, D = s.head_dim, C = cp_.size();
  const int64_t TK = int64_t(T) * s.kv_dim();
  for (NcclWork& w : pending_->previous) w.wait();
  pending_->previous = std::move(pending_->current);
  pending_->current.clear();
  if (C > 1) {
    ensure_buffers(s, T);
    CUDA_CHECK(cudaMemcpyAsync(kv_[0].get(), a.k_r, size_t(TK) * sizeof(bf16), cudaMemcpyDeviceToDevice, ctx.stream));
    CUDA_CHECK(cudaMemcpyAsync(kv_[0].get() + TK, a.v, size_t(TK) * sizeof(bf16), cudaMemcpyDeviceToDevice,
                               ctx.stream));
  }
  int transfer = C > 1 ? pass(kv_[0].get(), kv_[1].get(), 2 * TK, CommType::bf16) : -1;
  cuda::attention_backward(dq_r, dk_r, dv, dattn, a.attn, a.lse, a.q_r, a.k_r, a.v, b.cu_seqlens, b.S, b.max_seqlen, T,
                           Hq, Hkv, D, s.attention_scale(), ctx);
  if (C == 1) return;
  for (int j = 1; j < C; ++j) {
    const int arriving = transfer;
    // The gradients of the block this rank held at step j-1 go on to the next rank, and the previous rank's of
    // this step's block come in; then the next K/V block travels. Both run while this step's block is computed.
    const int grads = j >= 2 ? pass(dkv_acc_[(j - 1) % 2].get(), dkv_acc_[j % 2].get(), 2 * TK, CommType::f32) : -1;
    transfer = j + 1 < C ? pass(kv_[j % 2].get(), kv_[(j + 1) % 2].get(), 2 * TK, CommType::bf16) : -1;
    arrived(arriving);
    const bf16* kv = kv_[j % 2].get();
    bf16* dkv = dkv_block_.get();
    CUDA_CHECK(cudaMemsetAsync(dkv, 0, size_t(2 * TK) * sizeof(bf16), ctx.stream));
    cuda::attention_block_backward(dq_r, dkv, dkv + TK, dattn, a.attn, a.lse, a.q_r, kv, kv + TK, segments_at(j), T, T,
                                   Hq, Hkv, D, s.attention_scale(), ctx);
    float* acc = dkv_acc_[j % 2].get();
    if (j == 1) {
      cuda::bf16_to_f32(acc, dkv, 2 * TK, ctx);
    } else {
      arrived(grads);
      cuda::accumulate_bf16_into_f32(acc, dkv, 2 * TK, ctx);
    }
  }
  // After the last step the gradients here are the next rank's block's, with every other rank's share: they go
  // home, and this rank's own come back from the previous rank.
  const int home = pass(dkv_acc_[(C - 1) % 2].get(), dkv_acc_[C % 2].get(), 2 * TK, CommType::f32);
  arrived(home);
  cuda::accumulate_f32_into_bf16(dk_r, dkv_acc_[C % 2].get(), TK, ctx);
  cuda::accumulate_f32_into_bf16(dv, dkv_acc_[C % 2].get() + TK, TK, ctx);
}

}  // namespace hone

#endif  // HONE_CUDA
