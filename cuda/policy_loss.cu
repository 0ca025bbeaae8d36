// The GRPO policy loss of one micro-batch on the device: the twin of src/ops/cpu/policy_loss.cpp (formulas in
// rl/policy_loss.h and doc/grpo.md), so training keeps the logprobs, the entropies and their gradients on the GPU.
// One block per sequence: the block first counts the sequence's valid tokens (and, for seq_mask, sums old - gen
// over them) with block reductions, then walks its tokens. Every per-token value is computed in double as on the
// CPU (a micro-batch has at most a few ten thousand tokens: the cost is nothing next to the LM head).
// Forward: each block reduces its partial sums (PolicyLossStat) into one row of a scratch table; one warp per
// statistic then reduces the rows in sequence order, so the block of doubles is the same from run to run.
// Backward accumulates the fp32 gradients of the valid tokens.
#include "cuda/check.h"
#include "cuda/elementwise_common.cuh"
#include "cuda/kernel_scratch.h"
#include "cuda/ops_cuda.h"

namespace hone::cuda {
namespace {

constexpr int kThreads = 256;
constexpr int kStats = PolicyLossStat::count;
using Stat = PolicyLossStat;

// Everything a kernel reads, passed by value.
struct Args {
  const float *now, *old, *gen, *ref, *entropy;
  const uint8_t* mask;
  const int64_t* offsets;
  const float* adv;
  PolicyLossConfig c;
  double denominator;
};

// How statistic k merges: min, max or sum (the identity of each is its initial value).
__device__ __forceinline__ double stat_init(int k) {
  return k == Stat::ratio_min ? 1e300 : k == Stat::ratio_max ? -1e300 : 0.0;
}
__device__ __forceinline__ double stat_merge(int k, double a, double b) {
  return k == Stat::ratio_min ? fmin(a, b) : k == Stat::ratio_max ? fmax(a, b) : a + b;
}

__device__ __forceinline__ double warp_merge(int k, double v) {
#pragma unroll
  for (int o = 16; o > 0; o >>= 1) v = stat_merge(k, v, __shfl_xor_sync(0xffffffffu, v, o));
  return v;
}

// Block-wide merge of statistic k; every thread gets the result. The leading barrier lets consecutive calls reuse
// `shared` (32 doubles).
__device__ double block_merge(int k, double v, double* shared) {
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5, warps = blockDim.x >> 5;
  v = warp_merge(k, v);
  __syncthreads();
  if (lane == 0) shared[warp] = v;
  __syncthreads();
  return warp_merge(k, lane < warps ? shared[lane] : stat_init(k));
}

// What every token of a sequence shares (identical in every thread of the block).
struct Sequence {
  int64_t begin, end;
  double n_valid, scale;
  bool masked;
};

__device__ Sequence sequence(const Args& a, int s, double* shared) {
  Sequence q{a.offsets[s], a.offsets[s + 1], 0.0, 0.0, false};
  const bool seq_mask = a.c.importance_sampling == ImportanceSampling::seq_mask;
  double n = 0, log_w = 0;
  for (int64_t t = q.begin + threadIdx.x; t < q.end; t += blockDim.x)
    if (a.mask[t]) {
      n += 1;
      if (seq_mask) log_w += double(a.old[t]) - double(a.gen[t]);
    }
  q.n_valid = detail::block_sum(n, shared);
  if (q.n_valid == 0) return q;
  q.scale = a.c.aggregation == LossAggregation::token ? 1.0 / a.denominator : 1.0 / (q.n_valid * a.denominator);
  if (seq_mask) {
    const double geo = exp(detail::block_sum(log_w, shared) / q.n_valid);
    q.masked = !(geo >= a.c.is_threshold_low && geo <= a.c.is_threshold_high);
  }
  return q;
}

// The terms of one valid token and their derivatives with respect to its new logprob (the CPU's branches, in the
// CPU's order).
struct Token {
  double ratio, pg, dpg, w, kl, dkl;
  bool clipped, dual_clipped, is_masked;
};

__device__ Token token(const Args& a, const Sequence& q, double adv, int64_t t) {
  const PolicyLossConfig& c = a.c;
  const double now = a.now[t], old = a.old[t], gen = a.gen[t];
  Token k{};
  k.ratio = exp(now - old);
  const double lo = 1.0 - c.ratio_clip_min, hi = 1.0 + c.ratio_clip_max;
  const double unclipped = -adv * k.ratio;
  const double clipped = -adv * (k.ratio < lo ? lo : hi < k.ratio ? hi : k.ratio);
  k.pg = unclipped, k.dpg = -adv * k.ratio;
  if (clipped > unclipped) k.pg = clipped, k.dpg = 0.0, k.clipped = true;
  if (c.ratio_clip_c > 0 && adv < 0 && -c.ratio_clip_c * adv < k.pg)
    k.pg = -c.ratio_clip_c * adv, k.dpg = 0.0, k.clipped = true, k.dual_clipped = true;

  k.w = 1.0;
  if (c.importance_sampling == ImportanceSampling::tis) {
    const double w = exp(old - gen);
    k.w = c.is_threshold_high < w ? c.is_threshold_high : w;
  } else if (c.importance_sampling == ImportanceSampling::icepop) {
    k.w = exp(old - gen);
    if (!(k.w >= c.is_threshold_low && k.w <= c.is_threshold_high)) k.w = 0.0, k.is_masked = true;
  } else if (c.importance_sampling == ImportanceSampling::seq_mask && q.masked) {
    k.w = 0.0, k.is_masked = true;
  }

  if (a.ref) {
    double x = double(a.ref[t]) - now, dx_dnew = -1.0;
    if (c.kl_input_clamp > 0 && fabs(x) > c.kl_input_clamp) x = copysign(c.kl_input_clamp, x), dx_dnew = 0.0;
    double v = -x, dv_dx = -1.0;  // k1
    if (c.kl_type == KlType::k2) {
      v = 0.5 * x * x, dv_dx = x;
    } else if (c.kl_type == KlType::k3) {
      const double e = exp(x);
      v = e - 1.0 - x, dv_dx = e - 1.0;
    }
    if (c.kl_output_clamp > 0 && fabs(v) > c.kl_output_clamp) v = copysign(c.kl_output_clamp, v), dv_dx = 0.0;
    k.kl = v, k.dkl = dv_dx * dx_dnew;
  }
  return k;
}

// Block s: sequence s's partial sums into partial[s * kStats + k].
__global__ void policy_loss_forward_kernel(double* partial, Args a) {
  __shared__ double shared[32];
  const int s = blockIdx.x;
  const Sequence q = sequence(a, s, shared);
  double acc[kStats];
#pragma unroll
  for (int k = 0; k < kStats; ++k) acc[k] = stat_init(k);
  if (q.n_valid > 0) {
    const PolicyLossConfig& c = a.c;
    const double adv = a.adv[s];
    for (int64_t t = q.begin + threadIdx.x; t < q.end; t += blockDim.x) {
      if (!a.mask[t]) continue;
      const Token k = token(a, q, adv, t);
      const double ent = a.entropy && c.entropy_coef != 0 ? double(a.entropy[t]) : 0.0;
      acc[Stat::valid_tokens] += 1;
      acc[Stat::clipped_tokens] += k.clipped;
      acc[Stat::dual_clipped_tokens] += k.dual_clipped;
      acc[Stat::is_masked_tokens] += k.is_masked;
      acc[Stat::pg_loss] += q.scale * k.w * k.pg;
      acc[Stat::kl_loss] += q.scale * c.kl_coef * k.kl;
      acc[Stat::entropy_loss] -= q.scale * c.entropy_coef * ent;
      acc[Stat::ratio_sum] += k.ratio;
      acc[Stat::ratio_min] = fmin(acc[Stat::ratio_min], k.ratio);
      acc[Stat::ratio_max] = fmax(acc[Stat::ratio_max], k.ratio);
      acc[Stat::kl_sum] += k.kl;
      acc[Stat::is_weight_sum] += k.w;
      acc[Stat::mult_prob_error_sum] += exp(fabs(double(a.gen[t]) - double(a.old[t])));
      if (a.entropy) acc[Stat::entropy_sum] += double(a.entropy[t]);
    }
    if (threadIdx.x == 0) acc[Stat::valid_seqs] = 1, acc[Stat::is_masked_seqs] = q.masked;
  }
#pragma unroll
  for (int k = 0; k < kStats; ++k) {
    const double v = block_merge(k, acc[k], shared);
    if (threadIdx.x == 0) partial[size_t(s) * kStats + k] = v;
  }
}

// One warp per statistic: the sequences' rows merged in a fixed order.
__global__ void policy_loss_stats_kernel(double* stats, const double* partial, int num_seqs) {
  const int k = threadIdx.x >> 5, lane = threadIdx.x & 31;
  if (k >= kStats) return;
  double v = stat_init(k);
  for (int s = lane; s < num_seqs; s += 32) v = stat_merge(k, v, partial[size_t(s) * kStats + k]);
  v = warp_merge(k, v);
  if (lane == 0) stats[k] = v;
}

__global__ void policy_loss_backward_kernel(float* dnew, float* dentropy, Args a) {
  __shared__ double shared[32];
  const int s = blockIdx.x;
  const Sequence q = sequence(a, s, shared);
  if (q.n_valid == 0) return;
  const double adv = a.adv[s];
  for (int64_t t = q.begin + threadIdx.x; t < q.end; t += blockDim.x) {
    if (!a.mask[t]) continue;
    const Token k = token(a, q, adv, t);
    dnew[t] += float(q.scale * (k.w * k.dpg + a.c.kl_coef * k.dkl));
    if (dentropy) dentropy[t] += float(-q.scale * a.c.entropy_coef);
  }
}

Args make_args(const float* new_lp, const float* old_lp, const float* gen_lp, const float* ref_lp,
               const float* entropy, const uint8_t* mask, const int64_t* seq_offsets, const float* advantages, int T,
               int num_seqs, const PolicyLossConfig& c, double denominator) {
  HONE_CHECK(T >= 0 && num_seqs >= 0, "policy loss: ", T, " tokens, ", num_seqs, " sequences");
  HONE_CHECK(ref_lp || c.kl_coef == 0, "kl_coef > 0 needs reference logprobs");
  HONE_CHECK(denominator > 0, "the global loss denominator must be > 0, got ", denominator);
  return Args{new_lp, old_lp, gen_lp, ref_lp, entropy, mask, seq_offsets, advantages, c, denominator};
}

}  // namespace

void policy_loss_forward(double* stats, const float* new_lp, const float* old_lp, const float* gen_lp,
                         const float* ref_lp, const float* entropy, const uint8_t* mask, const int64_t* seq_offsets,
                         const float* advantages, int T, int num_seqs, const PolicyLossConfig& config,
                         double denominator, const GpuContext& ctx) {
  HONE_CHECK(entropy || config.entropy_coef == 0, "entropy_coef != 0 needs the entropy");
  const Args a = make_args(new_lp, old_lp, gen_lp, ref_lp, entropy, mask, seq_offsets, advantages, T, num_seqs,
                           config, denominator);
  auto* partial = static_cast<double*>(kernel_scratch(ctx, size_t(num_seqs > 0 ? num_seqs : 1) * kStats * 8));
  if (num_seqs > 0) {
    policy_loss_forward_kernel<<<unsigned(num_seqs), kThreads, 0, ctx.stream>>>(partial, a);
    CUDA_CHECK_LAST();
  }
  policy_loss_stats_kernel<<<1, 32 * kStats, 0, ctx.stream>>>(stats, partial, num_seqs);
  CUDA_CHECK_LAST();
}

void policy_loss_backward(float* dnew_lp, float* dentropy, const float* new_lp, const float* old_lp,
                          const float* gen_lp, const float* ref_lp, const uint8_t* mask, const int64_t* seq_offsets,
                          const float* advantages, int T, int num_seqs, const PolicyLossConfig& config,
                          double denominator, const GpuContext& ctx) {
  const Args a = make_args(new_lp, old_lp, gen_lp, ref_lp, nullptr, mask, seq_offsets, advantages, T, num_seqs,
                           config, denominator);
  if (num_seqs == 0) return;
  policy_loss_backward_kernel<<<unsigned(num_seqs), kThreads, 0, ctx.stream>>>(dnew_lp, dentropy, a);
  CUDA_CHECK_LAST();
}

}  // namespace hone::cuda
