// Small kernels around cuDNN's fused attention: ragged offsets and sequence lengths from cu_seqlens (or from the
// segments of a ring attention block), the layout change between cuDNN's padded Stats[B, H, S, 1] and our lse[H, T],
// and adding cuDNN's gradients into ours.
#include <algorithm>

#include "cuda/attention_cudnn.h"
#include "cuda/check.h"

namespace hone::cuda {

namespace {

__global__ void ragged_offsets_kernel(int32_t* seq_len, int32_t* q_offset, int32_t* kv_offset,
                                      const int32_t* cu, int num_seqs, int B, int q_row, int kv_row) {
  const int b = blockIdx.x * blockDim.x + threadIdx.x;
  if (b > B) return;
  const int start = cu[b < num_seqs ? b : num_seqs];
  q_offset[b] = start * q_row;
  kv_offset[b] = start * kv_row;
  if (b < B) seq_len[b] = b < num_seqs ? cu[b + 1] - start : 0;
}

// One thread per (h, t).
__global__ void stats_to_lse_kernel(float* lse, const float* stats, const int32_t* cu, int num_seqs, int T, int H,
                                    int S) {
  const int64_t idx = int64_t(blockIdx.x) * blockDim.x + threadIdx.x;
  if (idx >= int64_t(H) * T) return;
  const int h = int(idx / T), t = int(idx % T);
  const int s = attention_sequence_of_row(cu, num_seqs, t);
  const int i = t - cu[s];
  lse[idx] = stats[(int64_t(s) * H + h) * S + i];
}

// One thread per padded entry (b, h, i).
__global__ void lse_to_stats_kernel(float* stats, const float* lse, const int32_t* cu, int num_seqs, int B, int H,
                                    int S, int T) {
  const int64_t idx = int64_t(blockIdx.x) * blockDim.x + threadIdx.x;
  if (idx >= int64_t(B) * H * S) return;
  const int i = int(idx % S);
  const int h = int((idx / S) % H);
  const int b = int(idx / (int64_t(S) * H));
  float value = 0.f;
  if (b < num_seqs && i < cu[b + 1] - cu[b]) value = lse[int64_t(h) * T + cu[b] + i];
  stats[idx] = value;
}

__global__ void segment_offsets_kernel(int32_t* seq_len_q, int32_t* seq_len_kv, int32_t* q_offset,
                                       int32_t* kv_offset, AttentionSegments seg, int B, int Tq, int Tkv, int q_row,
                                       int kv_row) {
  const int b = blockIdx.x * blockDim.x + threadIdx.x;
  if (b > B) return;
  const bool real = b < seg.count;
  q_offset[b] = (real ? seg.q_start[b] : Tq) * q_row;
  kv_offset[b] = (real ? seg.kv_start[b] : Tkv) * kv_row;
  if (b < B) {
    seq_len_q[b] = real ? seg.q_len[b] : 0;
    seq_len_kv[b] = real ? seg.kv_len[b] : 0;
  }
}

// Grid (blocks over H * S, segments): one thread per (h, i) of segment s.
__global__ void segment_stats_to_lse_kernel(float* lse, const float* stats, AttentionSegments seg, int Tq, int H,
                                            int S) {
  const int s = blockIdx.y;
  const int64_t idx = int64_t(blockIdx.x) * blockDim.x + threadIdx.x;
  if (idx >= int64_t(H) * seg.q_len[s]) return;
  const int h = int(idx / seg.q_len[s]), i = int(idx % seg.q_len[s]);
  lse[int64_t(h) * Tq + seg.q_start[s] + i] = stats[(int64_t(s) * H + h) * S + i];
}

// One thread per padded entry (b, h, i).
__global__ void segment_lse_to_stats_kernel(float* stats, const float* lse, AttentionSegments seg, int Tq, int B,
                                            int H, int S) {
  const int64_t idx = int64_t(blockIdx.x) * blockDim.x + threadIdx.x;
  if (idx >= int64_t(B) * H * S) return;
  const int i = int(idx % S);
  const int h = int((idx / S) % H);
  const int b = int(idx / (int64_t(S) * H));
  float value = 0.f;
  if (b < seg.count && i < seg.q_len[b]) value = lse[int64_t(h) * Tq + seg.q_start[b] + i];
  stats[idx] = value;
}

__global__ void accumulate_bf16_kernel(bf16* dst, const bf16* src, int64_t n) {
  const int64_t stride = int64_t(gridDim.x) * blockDim.x;
  for (int64_t i = int64_t(blockIdx.x) * blockDim.x + threadIdx.x; i < n; i += stride)
    dst[i] = __float2bfloat16(__bfloat162float(dst[i]) + __bfloat162float(src[i]));
}

unsigned blocks_for(int64_t n, int threads) { return unsigned((n + threads - 1) / threads); }

}  // namespace

void attention_ragged_offsets(int32_t* seq_len, int32_t* q_offset, int32_t* kv_offset, const int32_t* cu_seqlens,
                              int num_seqs, int B, int Hq, int Hkv, int D, const GpuContext& ctx) {
  HONE_CHECK(num_seqs >= 1 && B >= num_seqs, "bad padded batch ", B, " for ", num_seqs, " sequences");
  ragged_offsets_kernel<<<blocks_for(B + 1, 128), 128, 0, ctx.stream>>>(seq_len, q_offset, kv_offset, cu_seqlens,
                                                                        num_seqs, B, Hq * D, Hkv * D);
  CUDA_CHECK_LAST();
}

void attention_stats_to_lse(float* lse, const float* stats, const int32_t* cu_seqlens, int num_seqs, int T, int H,
                            int S, const GpuContext& ctx) {
  const int64_t n = int64_t(H) * T;
  if (n == 0) return;
  stats_to_lse_kernel<<<blocks_for(n, 256), 256, 0, ctx.stream>>>(lse, stats, cu_seqlens, num_seqs, T, H, S);
  CUDA_CHECK_LAST();
}

void attention_lse_to_stats(float* stats, const float* lse, const int32_t* cu_seqlens, int num_seqs, int T, int B,
                            int H, int S, const GpuContext& ctx) {
  const int64_t n = int64_t(B) * H * S;
  if (n == 0) return;
  lse_to_stats_kernel<<<blocks_for(n, 256), 256, 0, ctx.stream>>>(stats, lse, cu_seqlens, num_seqs, B, H, S, T);
  CUDA_CHECK_LAST();
}

void attention_segment_offsets(int32_t* seq_len_q, int32_t* seq_len_kv, int32_t* q_offset, int32_t* kv_offset,
                               const AttentionSegments& seg, int B, int Tq, int Tkv, int Hq, int Hkv, int D,
                               const GpuContext& ctx) {
  HONE_CHECK(seg.count >= 1 && B >= seg.count, "bad padded batch ", B, " for ", seg.count, " segments");
  segment_offsets_kernel<<<blocks_for(B + 1, 128), 128, 0, ctx.stream>>>(seq_len_q, seq_len_kv, q_offset, kv_offset,
                                                                         seg, B, Tq, Tkv, Hq * D, Hkv * D);
  CUDA_CHECK_LAST();
}

void attention_segment_stats_to_lse(float* lse, const float* stats, const AttentionSegments& seg, int Tq, int H,
                                    int S, const GpuContext& ctx) {
  const int64_t n = int64_t(H) * seg.max_q;
  if (n == 0 || seg.count == 0) return;
  const dim3 grid{blocks_for(n, 256), unsigned(seg.count)};
  segment_stats_to_lse_kernel<<<grid, 256, 0, ctx.stream>>>(lse, stats, seg, Tq, H, S);
  CUDA_CHECK_LAST();
}

void attention_segment_lse_to_stats(float* stats, const float* lse, const AttentionSegments& seg, int Tq, int B,
                                    int H, int S, const GpuContext& ctx) {
  const int64_t n = int64_t(B) * H * S;
  if (n == 0) return;
  segment_lse_to_stats_kernel<<<blocks_for(n, 256), 256, 0, ctx.stream>>>(stats, lse, seg, Tq, B, H, S);
  CUDA_CHECK_LAST();
}

void attention_accumulate_bf16(bf16* dst, const bf16* src, int64_t n, const GpuContext& ctx) {
  if (n == 0) return;
  const int threads = 256;
  const unsigned blocks = unsigned(std::min<int64_t>((n + threads - 1) / threads, int64_t(std::max(ctx.sm_count, 1)) * 16));
  accumulate_bf16_kernel<<<blocks, threads, 0, ctx.stream>>>(dst, src, n);
  CUDA_CHECK_LAST();
}

}  // namespace hone::cuda
