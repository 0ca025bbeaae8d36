// GPU op checks of the fused LM head (cuda/lm_head.cpp) against hone::cpu::lm_head_logprob_forward/backward and
// lm_head_logits. Shapes {T, C, V, chunk_v, temperature in percent, with_entropy}: V in {7, 1000, 32003}, chunk
// sizes that do and do not divide V (and chunk_v > V, with T large enough for several row blocks), temperatures 1 and 0.7; about a quarter of the targets are -1.
// Tolerances (relative L2):
//   * logprob, entropy, lse, logits (fp32 from bf16 h and W): 1e-4. The CPU twin gets the same bf16-rounded inputs;
//     products of bf16 values are exact in fp32, so only the fp32 summation order differs (~1e-6 expected); 1e-4
//     leaves room for cuBLASLt's accumulation order while any indexing, chunking or masking error is O(1).
//   * dh (bf16) and dw (fp32 accumulated from bf16 dlogits): 1e-2, the bf16 tolerance: the GPU rounds dlogits to
//     bf16 (~2e-3 relative) as the operand of its tensor-core GEMMs.
#include <algorithm>
#include <cmath>

#include "cuda/ops_cuda.h"
#include "device_buffer.h"
#include "op_checks.h"

namespace {

using hone::cuda::bf16;
using test::DeviceBuffer;

const hone::cuda::GpuContext& gpu() {
  static hone::cuda::GpuContext ctx = hone::cuda::create_gpu_context(0);  // lives for the whole test program
  return ctx;
}

double err(const std::vector<float>& got, const std::vector<float>& want) {
  return test::rel_l2(got.data(), want.data(), int64_t(want.size()));
}

double rms(const std::vector<float>& v) {
  double s = 0;
  for (float x : v) s += double(x) * x;
  return v.empty() ? 0.0 : std::sqrt(s / double(v.size()));
}

struct Problem {
  int T, C, V, chunk_v;
  float temperature;
  bool with_entropy;
  std::vector<float> h, w;  // bf16-rounded once uploaded
  std::vector<int32_t> targets;
  DeviceBuffer<bf16> d_h, d_w;
  DeviceBuffer<int32_t> d_targets;

  Problem(const test::OpShape& s, std::mt19937_64& rng)
      : T(int(s[0])), C(int(s[1])), V(int(s[2])), chunk_v(int(s[3])), temperature(float(s[4]) / 100.f),
        with_entropy(s[5] != 0), d_h(int64_t(T) * C), d_w(int64_t(V) * C), d_targets(T) {
    h = test::random_vector(int64_t(T) * C, rng);
    w = test::random_vector(int64_t(V) * C, rng, 2.f / std::sqrt(float(C)));  // logits of spread ~2: peaked rows too
    std::uniform_int_distribution<int> tok(0, V - 1), coin(0, 3);
    targets.resize(size_t(T));
    for (int t = 0; t < T; ++t) targets[size_t(t)] = (T > 1 && coin(rng) == 0) ? -1 : tok(rng);
    if (T > 2) targets[size_t(T - 1)] = V - 1;  // the last vocabulary row, in the last (maybe partial) chunk
    d_h.upload(h);
    d_w.upload(w);
    d_targets.upload_raw(targets);
  }
};

double check_lm_head_forward(const test::OpShape& s, std::mt19937_64& rng) {
  Problem p(s, rng);
  const int T = p.T;
  DeviceBuffer<float> d_lp(T), d_ent(T), d_lse(T);
  d_lp.poison();
  d_ent.poison();
  d_lse.poison();
  CUDA_CHECK(cudaDeviceSynchronize());  // uploads and memsets ran on the legacy stream; the op uses its own
  hone::cuda::lm_head_logprob_forward(d_lp.get(), p.with_entropy ? d_ent.get() : nullptr, d_lse.get(), p.d_h.get(),
                                      p.d_w.get(), p.d_targets.get(), T, p.C, p.V, p.temperature, p.chunk_v, gpu());
  std::vector<float> lp(static_cast<size_t>(T)), ent(static_cast<size_t>(T)), lse(static_cast<size_t>(T));
  hone::cpu::lm_head_logprob_forward(lp.data(), ent.data(), lse.data(), p.h.data(), p.w.data(), p.targets.data(), T,
                                     p.C, p.V, p.temperature, p.chunk_v);
  double e = std::max(err(d_lp.download(), lp), err(d_lse.download(), lse));
  if (p.with_entropy) e = std::max(e, err(d_ent.download(), ent));
  return e;
}

double check_lm_head_backward(const test::OpShape& s, std::mt19937_64& rng) {
  Problem p(s, rng);
  const int T = p.T, C = p.C, V = p.V;
  // Saved forward outputs from the CPU twin (fp32, exact on the device) isolate the backward.
  std::vector<float> lp(static_cast<size_t>(T)), ent(static_cast<size_t>(T)), lse(static_cast<size_t>(T));
  hone::cpu::lm_head_logprob_forward(lp.data(), ent.data(), lse.data(), p.h.data(), p.w.data(), p.targets.data(), T,
                                     C, V, p.temperature, p.chunk_v);
  auto dlp = test::random_vector(T, rng), dent = test::random_vector(T, rng);
  const float* cpu_dent = p.with_entropy ? dent.data() : nullptr;
  const float* cpu_ent = p.with_entropy ? ent.data() : nullptr;
  std::vector<float> inc_dh(size_t(T) * C, 0.f), inc_dw(size_t(V) * C, 0.f);
  hone::cpu::lm_head_logprob_backward(inc_dh.data(), inc_dw.data(), dlp.data(), cpu_dent, p.h.data(), p.w.data(),
                                      p.targets.data(), lse.data(), cpu_ent, T, C, V, p.temperature, p.chunk_v);
  // Accumulators pre-filled with values of the increment's size; the totals are compared.
  auto dh0 = test::random_vector(int64_t(T) * C, rng, float(std::max(rms(inc_dh), 1e-6)));
  auto dw0 = test::random_vector(int64_t(V) * C, rng, float(std::max(rms(inc_dw), 1e-6)));
  DeviceBuffer<bf16> d_dh(int64_t(T) * C);
  DeviceBuffer<float> d_dw(int64_t(V) * C), d_dlp(T), d_dent(T), d_ent(T), d_lse(T);
  d_dh.upload(dh0);
  d_dw.upload(dw0);
  d_dlp.upload(dlp);
  d_dent.upload(dent);
  d_ent.upload(ent);
  d_lse.upload(lse);
  CUDA_CHECK(cudaDeviceSynchronize());
  hone::cuda::lm_head_logprob_backward(d_dh.get(), d_dw.get(), d_dlp.get(), p.with_entropy ? d_dent.get() : nullptr,
                                       p.d_h.get(), p.d_w.get(), p.d_targets.get(), d_lse.get(),
                                       p.with_entropy ? d_ent.get() : nullptr, T, C, V, p.temperature, p.chunk_v,
                                       gpu());
  for (size_t i = 0; i < dh0.size(); ++i) dh0[i] += inc_dh[i];
  for (size_t i = 0; i < dw0.size(); ++i) dw0[i] += inc_dw[i];
  return std::max(err(d_dh.download(), dh0), err(d_dw.download(), dw0));
}

double check_lm_head_logits(const test::OpShape& s, std::mt19937_64& rng) {
  Problem p(s, rng);
  DeviceBuffer<float> d_logits(int64_t(p.T) * p.V);
  d_logits.poison();
  CUDA_CHECK(cudaDeviceSynchronize());
  hone::cuda::lm_head_logits(d_logits.get(), p.d_h.get(), p.d_w.get(), p.T, p.C, p.V, gpu());
  std::vector<float> want(size_t(p.T) * p.V);
  hone::cpu::lm_head_logits(want.data(), p.h.data(), p.w.data(), p.T, p.C, p.V);
  return err(d_logits.download(), want);
}

// {T, C, V, chunk_v, temperature %, with_entropy}
const std::vector<test::OpShape> kShapes = {
    {5, 64, 7, 3, 100, 1},         {7, 33, 7, 8, 70, 1},          {7, 33, 1000, 256, 100, 0},
    {64, 64, 1000, 1000, 70, 1},   {130, 128, 1000, 333, 100, 1}, {1, 64, 32003, 8192, 70, 1},
    {300, 256, 32003, 4096, 70, 1}, {1000, 128, 32003, 5000, 100, 0},
    // chunk_v >= V: one chunk of 32003 vocabulary rows, so the 128 MiB work buffer holds ~1048 rows in forward and
    // ~697 in backward: 1500 rows run as several row blocks.
    {1500, 64, 32003, 40000, 70, 1},
};
const std::vector<test::OpShape> kLogitShapes = {
    {1, 64, 7, 1, 100, 0}, {7, 33, 1000, 1, 100, 0}, {16, 256, 32003, 1, 100, 0}};

const test::OpCheckRegistration reg_fwd{{"lm_head_logprob_forward", 1e-4, kShapes, &check_lm_head_forward}};
const test::OpCheckRegistration reg_bwd{{"lm_head_logprob_backward", 1e-2, kShapes, &check_lm_head_backward}};
const test::OpCheckRegistration reg_logits{{"lm_head_logits", 1e-4, kLogitShapes, &check_lm_head_logits}};

}  // namespace
