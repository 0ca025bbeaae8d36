// GPU op checks of the fused LM head (cuda/lm_head.cpp) against hone::cpu::lm_head_logprob_forward/backward and
// lm_head_logits. Shapes {T, C, V, chunk_v, temperature in percent, with_entropy}: V in {7, 1000, 5000, 32003},
// chunk sizes that do and do not divide V (and chunk_v > V, with T large enough for several row blocks),
// temperatures 1 and 0.7; about a quarter of the targets are -1. Where C is a multiple of 64 the forward on an
// sm_90a GPU is the tile path (the statistics in the epilogue of hone's Hopper GEMM, cuda/lm_head_tile_stats.cu),
// else (other GPUs too) the chunked.
// Also the vocabulary-parallel ops against their CPU twins: lm_head_vocab_slice_forward/backward on one rank's slice
// (shapes {T, C, Vg, tp, rank, chunk_v, temperature %, with_entropy}: the vocabulary Vg padded to a multiple of tp
// and split as the tensor-parallel model splits it; slices with padding, middle slices whose rows miss most
// targets, slices of padding only, chunks that do and do not divide the slice), lm_head_stats_rescale and
// lm_head_stats_finish on made-up statistics, and every rank's slice forward combined on the GPU (max, rescale,
// sum, finish) against the whole-vocabulary CPU forward. The saved variant (lm_head_saved_forward/backward) over the
// same shapes: its forward's outputs as the chunked forward's, its backward (from the logits its own forward kept, in
// fp16 relative to each row's running max) against the CPU twin's.
// Tolerances (relative L2):
//   * logprob, entropy, lse, logits (fp32 from bf16 h and W): 1e-4. The CPU twin gets the same bf16-rounded inputs;
//     products of bf16 values are exact in fp32, so only the fp32 summation order differs (~1e-6 expected); 1e-4
//     leaves room for cuBLASLt's accumulation order while any indexing, chunking or masking error is O(1).
//   * a slice's statistics m, s, u, target logit (each row of stats[4, T] compared on its own): 1e-4, the same
//     sums in another order; -inf (rows that saw no logits) must match exactly.
//   * the combined slices against the whole vocabulary: 1e-4 (fp32 s and u cross the slices; ~1e-7 relative).
//   * lm_head_stats_rescale and lm_head_stats_finish: 1e-5, the same double formulas on fp32 values (~1 ulp).
//   * dh (bf16) and dw (fp32 accumulated from bf16 dlogits): 1e-2, the bf16 tolerance: the GPU rounds dlogits to
//     bf16 (~2e-3 relative) as the operand of its tensor-core GEMMs (the saved variant's kept fp16 logits add at
//     most 2^-11 x e^-x to a p <= e^-x: below that rounding). A slice's padding rows of dw must stay
//     untouched bit for bit.
#include <algorithm>
#include <cmath>
#include <limits>

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

// The chunked forward, or (saved) the saved variant's, whose outputs must be the chunked forward's (what it keeps
// is the op's own, checked through its backward).
double forward_error(const test::OpShape& s, std::mt19937_64& rng, bool saved) {
  Problem p(s, rng);
  const int T = p.T;
  DeviceBuffer<float> d_lp(T), d_ent(T), d_lse(T);
  DeviceBuffer<char> d_saved(saved ? int64_t(hone::cuda::lm_head_saved_bytes(T, p.V, p.chunk_v)) : 1);
  d_lp.poison();
  d_ent.poison();
  d_lse.poison();
  d_saved.poison();
  CUDA_CHECK(cudaDeviceSynchronize());  // uploads and memsets ran on the legacy stream; the op uses its own
  float* ent = p.with_entropy ? d_ent.get() : nullptr;
  if (saved)
    hone::cuda::lm_head_saved_forward(d_lp.get(), ent, d_lse.get(), d_saved.get(), p.d_h.get(), p.d_w.get(),
                                      p.d_targets.get(), T, p.C, p.V, p.temperature, p.chunk_v, gpu());
  else
    hone::cuda::lm_head_logprob_forward(d_lp.get(), ent, d_lse.get(), p.d_h.get(), p.d_w.get(), p.d_targets.get(), T,
                                        p.C, p.V, p.temperature, p.chunk_v, gpu());
  std::vector<float> lp(static_cast<size_t>(T)), ent_want(static_cast<size_t>(T)), lse(static_cast<size_t>(T));
  hone::cpu::lm_head_logprob_forward(lp.data(), ent_want.data(), lse.data(), p.h.data(), p.w.data(), p.targets.data(),
                                     T, p.C, p.V, p.temperature, p.chunk_v);
  double e = std::max(err(d_lp.download(), lp), err(d_lse.download(), lse));
  if (p.with_entropy) e = std::max(e, err(d_ent.download(), ent_want));
  return e;
}

double check_lm_head_forward(const test::OpShape& s, std::mt19937_64& rng) { return forward_error(s, rng, false); }

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

double check_lm_head_saved_forward(const test::OpShape& s, std::mt19937_64& rng) {
  return forward_error(s, rng, true);
}

// The saved variant's backward, from what its own forward kept, against the CPU twin's (the fp32 logits kept).
double check_lm_head_saved_backward(const test::OpShape& s, std::mt19937_64& rng) {
  Problem p(s, rng);
  const int T = p.T, C = p.C, V = p.V;
  std::vector<float> lp(static_cast<size_t>(T)), ent(static_cast<size_t>(T)), lse(static_cast<size_t>(T));
  std::vector<float> saved(hone::cpu::lm_head_saved_bytes(T, V, p.chunk_v) / sizeof(float));
  hone::cpu::lm_head_saved_forward(lp.data(), ent.data(), lse.data(), saved.data(), p.h.data(), p.w.data(),
                                   p.targets.data(), T, C, V, p.temperature, p.chunk_v);
  auto dlp = test::random_vector(T, rng), dent = test::random_vector(T, rng);
  std::vector<float> inc_dh(size_t(T) * C, 0.f), inc_dw(size_t(V) * C, 0.f);
  hone::cpu::lm_head_saved_backward(inc_dh.data(), inc_dw.data(), dlp.data(), p.with_entropy ? dent.data() : nullptr,
                                    p.h.data(), p.w.data(), p.targets.data(), lse.data(),
                                    p.with_entropy ? ent.data() : nullptr, saved.data(), T, C, V, p.temperature,
                                    p.chunk_v);
  auto dh0 = test::random_vector(int64_t(T) * C, rng, float(std::max(rms(inc_dh), 1e-6)));
  auto dw0 = test::random_vector(int64_t(V) * C, rng, float(std::max(rms(inc_dw), 1e-6)));
  DeviceBuffer<bf16> d_dh(int64_t(T) * C);
  DeviceBuffer<float> d_dw(int64_t(V) * C), d_dlp(T), d_dent(T), d_ent(T), d_lse(T), d_lp(T);
  DeviceBuffer<char> d_saved(int64_t(hone::cuda::lm_head_saved_bytes(T, V, p.chunk_v)));
  d_saved.poison();
  d_dh.upload(dh0);
  d_dw.upload(dw0);
  d_dlp.upload(dlp);
  d_dent.upload(dent);
  CUDA_CHECK(cudaDeviceSynchronize());
  // The device's own forward fills the kept logits and the lse and entropy the backward reads with them.
  hone::cuda::lm_head_saved_forward(d_lp.get(), d_ent.get(), d_lse.get(), d_saved.get(), p.d_h.get(), p.d_w.get(),
                                    p.d_targets.get(), T, C, V, p.temperature, p.chunk_v, gpu());
  hone::cuda::lm_head_saved_backward(d_dh.get(), d_dw.get(), d_dlp.get(), p.with_entropy ? d_dent.get() : nullptr,
                                     p.d_h.get(), p.d_w.get(), p.d_targets.get(), d_lse.get(),
                                     p.with_entropy ? d_ent.get() : nullptr, d_saved.get(), T, C, V, p.temperature,
                                     p.chunk_v, gpu());
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
    // C a multiple of 64 runs the tile path on sm_90a (statistics in the GEMM's epilogue; C = 33 the chunked one): more
    // K steps than the 4-stage ring holds, rows that end inside a row tile, a last vocabulary tile of 136 columns.
    {300, 1024, 5000, 8192, 70, 1},   {129, 2048, 1000, 8192, 100, 0},
};
const std::vector<test::OpShape> kLogitShapes = {
    {1, 64, 7, 1, 100, 0}, {7, 33, 1000, 1, 100, 0}, {16, 256, 32003, 1, 100, 0}};

const test::OpCheckRegistration reg_fwd{{"lm_head_logprob_forward", 1e-4, kShapes, &check_lm_head_forward}};
const test::OpCheckRegistration reg_bwd{{"lm_head_logprob_backward", 1e-2, kShapes, &check_lm_head_backward}};
const test::OpCheckRegistration reg_saved_fwd{
    {"lm_head_saved_forward", 1e-4, kShapes, &check_lm_head_saved_forward}};
const test::OpCheckRegistration reg_saved_bwd{
    {"lm_head_saved_backward", 1e-2, kShapes, &check_lm_head_saved_backward}};
const test::OpCheckRegistration reg_logits{{"lm_head_logits", 1e-4, kLogitShapes, &check_lm_head_logits}};

// ---- the vocabulary-parallel ops ---------------------------------------------------------------------------------

constexpr float kNegInf = -std::numeric_limits<float>::infinity();

// One rank's slice of a vocabulary of Vg ids padded to a multiple of tp (as the tensor-parallel model splits it):
// W[rows, C] holds ids [begin, begin + rows), of which the first `valid` exist.
struct Slice {
  int begin, rows, valid;
};

Slice slice_of(int Vg, int tp, int rank) {
  const int rows = (Vg + tp - 1) / tp;  // padded / tp, padded = the multiple of tp at or above Vg
  const int begin = rank * rows;
  return {begin, rows, std::clamp(Vg - begin, 0, rows)};
}

// Host data of a check: h [T, C] and the whole vocabulary's W [Vg, C], both rounded to bf16 as the device holds
// them, and global targets (about a quarter -1).
struct VocabData {
  int T, C, Vg, chunk_v;
  float temperature;
  bool with_entropy;
  std::vector<float> h, w;
  std::vector<int32_t> targets;
};

VocabData vocab_data(int T, int C, int Vg, int chunk_v, int temperature_pct, bool with_entropy,
                     std::mt19937_64& rng) {
  VocabData d{T, C, Vg, chunk_v, float(temperature_pct) / 100.f, with_entropy, {}, {}, {}};
  d.h = test::random_vector(int64_t(T) * C, rng);
  d.w = test::random_vector(int64_t(Vg) * C, rng, 2.f / std::sqrt(float(C)));
  for (auto* v : {&d.h, &d.w})
    for (float& x : *v) x = float(bf16(x));
  std::uniform_int_distribution<int> tok(0, Vg - 1), coin(0, 3);
  d.targets.resize(size_t(T));
  for (int t = 0; t < T; ++t) d.targets[size_t(t)] = (T > 1 && coin(rng) == 0) ? -1 : tok(rng);
  return d;
}

// The slice's W [rows, C]: its rows of the whole W, then padding rows of 30 (logits of hundreds: any statistic that
// counted them would be far off).
std::vector<float> slice_weights(const VocabData& d, const Slice& s) {
  std::vector<float> ws(size_t(s.rows) * size_t(d.C), 30.f);
  if (s.valid > 0)
    std::copy(d.w.begin() + int64_t(s.begin) * d.C, d.w.begin() + int64_t(s.begin + s.valid) * d.C, ws.begin());
  return ws;
}

// A check of one slice: {T, C, Vg, tp, rank, chunk_v, temperature %, with_entropy}. Besides the random targets (most
// of them outside a slice of several), the slice's first and last existing ids (its first and its last, maybe
// partial, chunk) and a row without target.
struct SliceCase {
  VocabData d;
  Slice s;
  std::vector<float> ws;

  SliceCase(const test::OpShape& sh, std::mt19937_64& rng)
      : d(vocab_data(int(sh[0]), int(sh[1]), int(sh[2]), int(sh[5]), int(sh[6]), sh[7] != 0, rng)),
        s(slice_of(int(sh[2]), int(sh[3]), int(sh[4]))) {
    const int T = d.T;
    if (s.valid > 0) d.targets[0] = s.begin;
    if (s.valid > 0 && T > 2) d.targets[size_t(T - 1)] = s.begin + s.valid - 1;
    if (T > 2) d.targets[1] = -1;
    ws = slice_weights(d, s);
  }
};

// rel_l2 over the entries where want is finite; +Inf where got differs from a non-finite want (the -inf max of a
// row that saw no logits must be -inf) or is not finite where want is.
double err_nonfinite_exact(const float* got, const float* want, int64_t n) {
  std::vector<float> g, w;
  for (int64_t i = 0; i < n; ++i) {
    if (std::isfinite(want[i])) {
      g.push_back(got[i]);
      w.push_back(want[i]);
    } else if (!(got[i] == want[i])) {
      return INFINITY;
    }
  }
  return test::rel_l2(g, w);
}

// The worst of the four statistics m, s, u and the target logit of stats[4, T], each row on its own (their scales
// differ).
double stats_err(const std::vector<float>& got, const std::vector<float>& want, int T) {
  if (got.size() != want.size() || want.size() != size_t(4) * size_t(T)) return INFINITY;
  double e = 0;
  for (int k = 0; k < 4; ++k)
    e = std::max(e, err_nonfinite_exact(got.data() + int64_t(k) * T, want.data() + int64_t(k) * T, T));
  return e;
}

double check_vocab_slice_forward(const test::OpShape& sh, std::mt19937_64& rng) {
  SliceCase c(sh, rng);
  const VocabData& d = c.d;
  const Slice& s = c.s;
  const int T = d.T, C = d.C;
  DeviceBuffer<bf16> d_h(int64_t(T) * C), d_w(int64_t(s.rows) * C);
  DeviceBuffer<int32_t> d_targets(T);
  DeviceBuffer<float> d_stats(4 * int64_t(T));
  std::vector<float> h = d.h;  // upload() rewrites its argument (already bf16: unchanged)
  d_h.upload(h);
  d_w.upload(c.ws);
  d_targets.upload_raw(d.targets);
  d_stats.poison();
  hone::cuda::lm_head_vocab_slice_forward(d_stats.get(), d_h.get(), d_w.get(), d_targets.get(), T, C, s.rows,
                                          s.begin, s.valid, d.temperature, d.chunk_v, gpu());
  std::vector<float> want(size_t(4) * size_t(T));
  hone::cpu::lm_head_vocab_slice_forward(want.data(), d.h.data(), c.ws.data(), d.targets.data(), T, C, s.rows,
                                         s.begin, s.valid, d.temperature, d.chunk_v);
  return stats_err(d_stats.download(), want, T);
}

double check_vocab_slice_backward(const test::OpShape& sh, std::mt19937_64& rng) {
  SliceCase c(sh, rng);
  const VocabData& d = c.d;
  const Slice& s = c.s;
  const int T = d.T, C = d.C;
  // lse and entropy of the whole vocabulary, as the combined forward gives them, from the CPU (exact on the device).
  std::vector<float> lp(static_cast<size_t>(T)), ent(static_cast<size_t>(T)), lse(static_cast<size_t>(T));
  hone::cpu::lm_head_logprob_forward(lp.data(), ent.data(), lse.data(), d.h.data(), d.w.data(), d.targets.data(), T,
                                     C, d.Vg, d.temperature, d.chunk_v);
  auto dlp = test::random_vector(T, rng), dent = test::random_vector(T, rng);
  const float* cpu_dent = d.with_entropy ? dent.data() : nullptr;
  const float* cpu_ent = d.with_entropy ? ent.data() : nullptr;
  std::vector<float> inc_dh(size_t(T) * C, 0.f), inc_dw(size_t(s.rows) * C, 0.f);
  hone::cpu::lm_head_vocab_slice_backward(inc_dh.data(), inc_dw.data(), dlp.data(), cpu_dent, d.h.data(),
                                          c.ws.data(), d.targets.data(), lse.data(), cpu_ent, T, C, s.rows, s.begin,
                                          s.valid, d.temperature, d.chunk_v);
  // Accumulators pre-filled with values of the increment's size; the totals are compared.
  auto dh0 = test::random_vector(int64_t(T) * C, rng, float(std::max(rms(inc_dh), 1e-6)));
  auto dw0 = test::random_vector(int64_t(s.rows) * C, rng, float(std::max(rms(inc_dw), 1e-6)));
  std::vector<float> h = d.h;
  DeviceBuffer<bf16> d_h(int64_t(T) * C), d_w(int64_t(s.rows) * C), d_dh(int64_t(T) * C);
  DeviceBuffer<int32_t> d_targets(T);
  DeviceBuffer<float> d_dw(int64_t(s.rows) * C), d_dlp(T), d_dent(T), d_ent(T), d_lse(T);
  d_h.upload(h);
  d_w.upload(c.ws);
  d_targets.upload_raw(d.targets);
  d_dh.upload(dh0);
  d_dw.upload(dw0);
  d_dlp.upload(dlp);
  d_dent.upload(dent);
  d_ent.upload(ent);
  d_lse.upload(lse);
  hone::cuda::lm_head_vocab_slice_backward(d_dh.get(), d_dw.get(), d_dlp.get(), d.with_entropy ? d_dent.get() : nullptr,
                                           d_h.get(), d_w.get(), d_targets.get(), d_lse.get(),
                                           d.with_entropy ? d_ent.get() : nullptr, T, C, s.rows, s.begin, s.valid,
                                           d.temperature, d.chunk_v, gpu());
  const std::vector<float> got_dw = d_dw.download();
  for (size_t i = size_t(s.valid) * C; i < got_dw.size(); ++i)  // padding rows: untouched (NaN fails too)
    if (!(got_dw[i] == dw0[i])) return INFINITY;
  for (size_t i = 0; i < dh0.size(); ++i) dh0[i] += inc_dh[i];
  for (size_t i = 0; i < dw0.size(); ++i) dw0[i] += inc_dw[i];
  return std::max(err(d_dh.download(), dh0), err(got_dw, dw0));
}

// Every rank's slice forward on the GPU, combined as the tensor-parallel model combines them (the max over slices
// and the sums, which the model takes with all-reduces, here on the host), finished on the GPU, against the whole
// vocabulary's CPU forward. {T, C, Vg, tp, chunk_v, temperature %, with_entropy}.
double check_vocab_slices_combined(const test::OpShape& sh, std::mt19937_64& rng) {
  VocabData d = vocab_data(int(sh[0]), int(sh[1]), int(sh[2]), int(sh[4]), int(sh[5]), sh[6] != 0, rng);
  const int T = d.T, C = d.C, tp = int(sh[3]);
  std::vector<float> h = d.h;
  DeviceBuffer<bf16> d_h(int64_t(T) * C);
  DeviceBuffer<int32_t> d_targets(T);
  DeviceBuffer<float> d_stats(4 * int64_t(T)), d_max(T);
  d_h.upload(h);
  d_targets.upload_raw(d.targets);
  std::vector<std::vector<float>> stats;
  std::vector<float> gmax(static_cast<size_t>(T), kNegInf);
  for (int r = 0; r < tp; ++r) {
    const Slice s = slice_of(d.Vg, tp, r);
    std::vector<float> ws = slice_weights(d, s);
    DeviceBuffer<bf16> d_w(int64_t(s.rows) * C);
    d_w.upload(ws);
    d_stats.poison();
    hone::cuda::lm_head_vocab_slice_forward(d_stats.get(), d_h.get(), d_w.get(), d_targets.get(), T, C, s.rows,
                                            s.begin, s.valid, d.temperature, d.chunk_v, gpu());
    stats.push_back(d_stats.download());
    for (int t = 0; t < T; ++t) gmax[size_t(t)] = std::max(gmax[size_t(t)], stats.back()[size_t(t)]);
  }
  d_max.upload(gmax);
  std::vector<float> sum(size_t(4) * size_t(T), 0.f);
  for (auto& st : stats) {
    d_stats.upload(st);
    hone::cuda::lm_head_stats_rescale(d_stats.get(), d_max.get(), T, gpu());
    const std::vector<float> moved = d_stats.download();
    for (size_t i = size_t(T); i < sum.size(); ++i) sum[i] += moved[i];
  }
  std::copy(gmax.begin(), gmax.end(), sum.begin());
  d_stats.upload(sum);
  DeviceBuffer<float> d_lp(T), d_ent(T), d_lse(T);
  d_lp.poison();
  d_ent.poison();
  d_lse.poison();
  hone::cuda::lm_head_stats_finish(d_lp.get(), d.with_entropy ? d_ent.get() : nullptr, d_lse.get(), d_stats.get(),
                                   d_targets.get(), T, gpu());
  std::vector<float> lp(static_cast<size_t>(T)), ent(static_cast<size_t>(T)), lse(static_cast<size_t>(T));
  hone::cpu::lm_head_logprob_forward(lp.data(), ent.data(), lse.data(), d.h.data(), d.w.data(), d.targets.data(), T,
                                     C, d.Vg, d.temperature, d.chunk_v);
  double e = std::max(err(d_lp.download(), lp), err(d_lse.download(), lse));
  if (d.with_entropy) e = std::max(e, err(d_ent.download(), ent));
  return e;
}

// Made-up statistics of one slice and the common max, {T}: rows without target anywhere (m = M = -inf), rows whose
// slice saw nothing (m = -inf, M finite), rows at the common max (M = m) and below it (M up to m + 10).
double check_stats_rescale(const test::OpShape& sh, std::mt19937_64& rng) {
  const int T = int(sh[0]);
  std::uniform_int_distribution<int> kind(0, 3);
  std::uniform_real_distribution<float> u01(0.f, 1.f);
  std::normal_distribution<float> logit(0.f, 3.f);
  std::vector<float> stats(size_t(4) * size_t(T), 0.f), max(static_cast<size_t>(T));
  for (int t = 0; t < T; ++t) {
    float &m = stats[size_t(t)], &s = stats[size_t(T + t)], &u = stats[size_t(2 * T + t)];
    float& zt = stats[size_t(3 * T + t)];
    float& M = max[size_t(t)];
    switch (kind(rng)) {
      case 0: m = M = kNegInf; break;
      case 1: m = kNegInf, M = logit(rng); break;
      default:
        m = logit(rng);
        s = 1.f + 500.f * u01(rng);
        u = -s * 4.f * u01(rng);
        zt = u01(rng) < 0.5f ? m - 5.f * u01(rng) : 0.f;
        M = u01(rng) < 0.25f ? m : m + 10.f * u01(rng);
    }
  }
  DeviceBuffer<float> d_stats(4 * int64_t(T)), d_max(T);
  d_stats.upload(stats);
  d_max.upload(max);
  hone::cuda::lm_head_stats_rescale(d_stats.get(), d_max.get(), T, gpu());
  hone::cpu::lm_head_stats_rescale(stats.data(), max.data(), T);
  return stats_err(d_stats.download(), stats, T);
}

// Made-up combined statistics, {T, with_entropy}: m ~ N(0, 3), s in [1, 1001], u in [-5 s, 0], a target logit below
// m; rows without target hold NaN statistics, which the finish must not read into its outputs.
double check_stats_finish(const test::OpShape& sh, std::mt19937_64& rng) {
  const int T = int(sh[0]);
  const bool with_entropy = sh[1] != 0;
  std::uniform_int_distribution<int> tok(0, 999), coin(0, 3);
  std::uniform_real_distribution<float> u01(0.f, 1.f);
  std::normal_distribution<float> logit(0.f, 3.f);
  std::vector<float> stats(size_t(4) * size_t(T), std::nanf(""));
  std::vector<int32_t> targets(static_cast<size_t>(T));
  for (int t = 0; t < T; ++t) {
    targets[size_t(t)] = (T > 1 && coin(rng) == 0) ? -1 : tok(rng);
    if (targets[size_t(t)] < 0) continue;
    const float m = logit(rng), s = 1.f + 1000.f * u01(rng);
    stats[size_t(t)] = m;
    stats[size_t(T + t)] = s;
    stats[size_t(2 * T + t)] = -s * 5.f * u01(rng);
    stats[size_t(3 * T + t)] = m - 8.f * u01(rng);
  }
  DeviceBuffer<float> d_stats(4 * int64_t(T)), d_lp(T), d_ent(T), d_lse(T);
  DeviceBuffer<int32_t> d_targets(T);
  d_stats.upload(stats);
  d_targets.upload_raw(targets);
  d_lp.poison();
  d_ent.poison();
  d_lse.poison();
  hone::cuda::lm_head_stats_finish(d_lp.get(), with_entropy ? d_ent.get() : nullptr, d_lse.get(), d_stats.get(),
                                   d_targets.get(), T, gpu());
  std::vector<float> lp(static_cast<size_t>(T)), ent(static_cast<size_t>(T)), lse(static_cast<size_t>(T));
  hone::cpu::lm_head_stats_finish(lp.data(), ent.data(), lse.data(), stats.data(), targets.data(), T);
  double e = std::max(err(d_lp.download(), lp), err(d_lse.download(), lse));
  if (with_entropy) e = std::max(e, err(d_ent.download(), ent));
  return e;
}

// {T, C, Vg, tp, rank, chunk_v, temperature %, with_entropy}; slice = rows [begin, begin + rows), valid of them.
const std::vector<test::OpShape> kSliceShapes = {
    {9, 64, 37, 2, 1, 8, 100, 1},      // rows [19, 38), 18 valid + 1 padding; chunks of 8 do not divide 18
    {9, 64, 37, 4, 3, 5, 70, 1},       // rows [30, 40), 7 valid + 3 padding
    {6, 32, 5, 8, 4, 64, 130, 1},      // rows [4, 5): one valid row, chunk_v > V
    {6, 32, 5, 8, 6, 64, 100, 1},      // rows [6, 7): padding only
    {130, 128, 1000, 4, 1, 125, 100, 1},  // rows [250, 500), a middle slice; chunks of 125 divide it
    {130, 128, 1000, 3, 1, 100, 70, 1},   // rows [334, 668), middle; chunks of 100 do not divide 334
    {130, 128, 1000, 3, 2, 100, 70, 0},   // rows [668, 1002), 332 valid + 2 padding
    {1, 64, 32003, 4, 0, 8192, 100, 1},   // the first slice, one row
    {300, 256, 32003, 4, 2, 4096, 70, 1},  // rows [16002, 24003), middle
    {300, 256, 32003, 4, 3, 2000, 100, 0},  // rows [24003, 32004), 8000 valid (chunks of 2000 divide) + 1 padding
    // chunk_v >= the slice: one chunk of 16001 rows, so the 128 MiB work buffer holds ~2094 rows in forward and
    // ~1396 in backward: 2500 rows run as two row blocks.
    {2500, 64, 32003, 2, 1, 40000, 70, 1},
};
// {T, C, Vg, tp, chunk_v, temperature %, with_entropy}
const std::vector<test::OpShape> kCombinedShapes = {
    {9, 64, 37, 4, 5, 70, 1},    {6, 32, 5, 8, 64, 130, 1},  // 8 ranks for 5 ids: three slices of padding only
    {130, 128, 1000, 3, 100, 100, 0}, {300, 256, 32003, 4, 4096, 70, 1},
};

const test::OpCheckRegistration reg_slice_fwd{
    {"lm_head_vocab_slice_forward", 1e-4, kSliceShapes, &check_vocab_slice_forward}};
const test::OpCheckRegistration reg_slice_bwd{
    {"lm_head_vocab_slice_backward", 1e-2, kSliceShapes, &check_vocab_slice_backward}};
const test::OpCheckRegistration reg_slices_combined{
    {"lm_head_vocab_slices_combined", 1e-4, kCombinedShapes, &check_vocab_slices_combined}};
const test::OpCheckRegistration reg_rescale{
    {"lm_head_stats_rescale", 1e-5, {{1}, {7}, {1000}, {600001}}, &check_stats_rescale}};
const test::OpCheckRegistration reg_finish{
    {"lm_head_stats_finish", 1e-5, {{1, 1}, {7, 0}, {1000, 1}, {600001, 1}}, &check_stats_finish}};

}  // namespace
