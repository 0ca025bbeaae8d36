// GPU checks of the ring attention's ops against their fp32 CPU twins: a block's full attention of query segments
// against key segments (cuDNN's SDPA without the causal mask, and the plain CUDA reference), its backward, and the
// merge of a block's partial result by the log-sum-exp. The segments are those of a real context-parallel split
// (parallel/context_parallel.h) of a packed batch over 2 ranks: rank 1's block from rank 0 (earlier(): every local
// row against the first chunks) or rank 0's block from rank 1 (later(): the second chunks' rows against all).
// A shape is {Hq, Hkv, D, kind (0 earlier, 1 later), length of sequence 0, length of sequence 1, ...}.
// Tolerances as the packed attention's (check_attention.cpp): bf16 outputs 1e-2, fp32 lse 1e-3; the merge's fp32
// arithmetic on the same inputs 1e-5.
#include <algorithm>
#include <cmath>
#include <limits>
#include <vector>

#include "check_common.h"
#include "cuda/attention_cudnn.h"
#include "device_buffer.h"
#include "op_checks.h"
#include "ops/ops.h"
#include "parallel/context_parallel.h"

namespace {

using hone::cuda::bf16;

struct Problem {
  int Hq = 0, Hkv = 0, D = 0, T = 0;
  float scale = 0.f;
  hone::ContextParallelSplit split;
  bool later = false;
  hone::AttentionSegments host() const { return later ? split.later() : split.earlier(); }
};

Problem parse(const test::OpShape& s) {
  Problem p;
  p.Hq = int(s.at(0));
  p.Hkv = int(s.at(1));
  p.D = int(s.at(2));
  p.later = s.at(3) != 0;
  hone::PackedBatch b;
  for (size_t i = 4; i < s.size(); ++i) b.append(std::vector<int32_t>(size_t(s[i]), 1));
  p.split = hone::split_for_context_parallel(b, 2, p.later ? 0 : 1);
  p.T = p.split.local_tokens();
  p.scale = 1.f / std::sqrt(float(p.D));
  return p;
}

// The segments' arrays on the device (q_start, q_len, kv_start, kv_len).
struct DeviceSegments {
  test::DeviceBuffer<int32_t> buf;
  hone::AttentionSegments seg;
  explicit DeviceSegments(const hone::AttentionSegments& h) : buf(4 * std::max(h.count, 1)), seg(h) {
    std::vector<int32_t> all;
    for (const int32_t* a : {h.q_start, h.q_len, h.kv_start, h.kv_len}) all.insert(all.end(), a, a + h.count);
    buf.upload_raw(all);
    seg.q_start = buf.get();
    seg.q_len = buf.get() + h.count;
    seg.kv_start = buf.get() + 2 * h.count;
    seg.kv_len = buf.get() + 3 * h.count;
  }
};

// The values of the segments' query rows only ([rows, H, D] or, for lse [H, T], [H, rows]).
std::vector<float> segment_rows(const std::vector<float>& x, const hone::AttentionSegments& seg, int width) {
  std::vector<float> out;
  for (int s = 0; s < seg.count; ++s)
    for (int t = seg.q_start[s]; t < seg.q_start[s] + seg.q_len[s]; ++t)
      out.insert(out.end(), x.begin() + int64_t(t) * width, x.begin() + int64_t(t + 1) * width);
  return out;
}
std::vector<float> segment_lse(const std::vector<float>& lse, const hone::AttentionSegments& seg, int H, int T) {
  std::vector<float> out;
  for (int h = 0; h < H; ++h)
    for (int s = 0; s < seg.count; ++s)
      for (int t = seg.q_start[s]; t < seg.q_start[s] + seg.q_len[s]; ++t) out.push_back(lse[size_t(h * T + t)]);
  return out;
}

enum class Path { cudnn, reference };

struct ForwardErrors {
  double out, lse;
};

ForwardErrors check_forward(Path path, const test::OpShape& shape, std::mt19937_64& rng) {
  const Problem p = parse(shape);
  const int64_t nq = int64_t(p.T) * p.Hq * p.D, nkv = int64_t(p.T) * p.Hkv * p.D;
  std::vector<float> q = test::random_vector(nq, rng), k = test::random_vector(nkv, rng),
                     v = test::random_vector(nkv, rng);
  test::DeviceBuffer<bf16> dq(nq), dk(nkv), dv(nkv), dout(nq);
  test::DeviceBuffer<float> dlse(int64_t(p.Hq) * p.T);
  dq.upload(q);
  dk.upload(k);
  dv.upload(v);
  dout.poison();
  dlse.poison();
  const hone::AttentionSegments host = p.host();
  const DeviceSegments seg(host);
  const auto& ctx = test::check_context();
  test::inputs_ready();
  if (path == Path::cudnn)
    HONE_CHECK(hone::cuda::attention_block_forward_cudnn(dout.get(), dlse.get(), dq.get(), dk.get(), dv.get(), seg.seg,
                                                         p.T, p.T, p.Hq, p.Hkv, p.D, p.scale, ctx),
               "cuDNN refused this attention block forward (its reason is on stderr)");
  else
    hone::cuda::attention_block_forward_reference(dout.get(), dlse.get(), dq.get(), dk.get(), dv.get(), seg.seg, p.T,
                                                  p.T, p.Hq, p.Hkv, p.D, p.scale, ctx);
  const std::vector<float> out = dout.download(), lse = dlse.download();
  std::vector<float> out_ref(size_t(nq), 0.f), lse_ref(size_t(p.Hq) * p.T, 0.f);
  hone::cpu::attention_block_forward(out_ref.data(), lse_ref.data(), q.data(), k.data(), v.data(), host, p.T, p.T,
                                     p.Hq, p.Hkv, p.D, p.scale);
  const int width = p.Hq * p.D;
  return {test::rel_l2(segment_rows(out, host, width), segment_rows(out_ref, host, width)),
          test::rel_l2(segment_lse(lse, host, p.Hq, p.T), segment_lse(lse_ref, host, p.Hq, p.T))};
}

// The accumulators start from random values as large as the gradients (an overwrite fails), as check_attention's.
double check_backward(Path path, const test::OpShape& shape, std::mt19937_64& rng) {
  const Problem p = parse(shape);
  const int64_t nq = int64_t(p.T) * p.Hq * p.D, nkv = int64_t(p.T) * p.Hkv * p.D;
  std::vector<float> q = test::random_vector(nq, rng), k = test::random_vector(nkv, rng),
                     v = test::random_vector(nkv, rng), g = test::random_vector(nq, rng);
  test::DeviceBuffer<bf16> dq_(nq), dk_(nkv), dv_(nkv), dg(nq), dout(nq), dgq(nq), dgk(nkv), dgv(nkv);
  test::DeviceBuffer<float> dlse(int64_t(p.Hq) * p.T);
  dq_.upload(q);
  dk_.upload(k);
  dv_.upload(v);
  dg.upload(g);
  const hone::AttentionSegments host = p.host();
  // The merged out and lse the backward reads: here the block's own (a block that is the whole attention).
  std::vector<float> out(size_t(nq), 0.f), lse(size_t(p.Hq) * p.T, 0.f);
  hone::cpu::attention_block_forward(out.data(), lse.data(), q.data(), k.data(), v.data(), host, p.T, p.T, p.Hq, p.Hkv,
                                     p.D, p.scale);
  dout.upload(out);
  dlse.upload(lse);
  std::vector<float> gq0(size_t(nq), 0.f), gk0(size_t(nkv), 0.f), gv0(size_t(nkv), 0.f);
  hone::cpu::attention_block_backward(gq0.data(), gk0.data(), gv0.data(), g.data(), out.data(), lse.data(), q.data(),
                                      k.data(), v.data(), host, p.T, p.T, p.Hq, p.Hkv, p.D, p.scale);
  double sum_sq = 0;
  for (const auto* x : {&gq0, &gk0, &gv0})
    for (float e : *x) sum_sq += double(e) * e;
  const float rms = float(std::sqrt(sum_sq / double(nq + 2 * nkv)));
  std::vector<float> gq = test::random_vector(nq, rng, rms), gk = test::random_vector(nkv, rng, rms),
                     gv = test::random_vector(nkv, rng, rms);
  dgq.upload(gq);
  dgk.upload(gk);
  dgv.upload(gv);
  const DeviceSegments seg(host);
  const auto& ctx = test::check_context();
  test::inputs_ready();
  if (path == Path::cudnn) {
    HONE_CHECK(hone::cuda::attention_block_backward_cudnn(dgq.get(), dgk.get(), dgv.get(), dg.get(), dout.get(),
                                                          dlse.get(), dq_.get(), dk_.get(), dv_.get(), seg.seg, p.T,
                                                          p.T, p.Hq, p.Hkv, p.D, p.scale, ctx),
               "cuDNN refused this attention block backward (its reason is on stderr)");
  } else {
    test::DeviceBuffer<float> delta(int64_t(p.Hq) * p.T);
    delta.poison();
    hone::cuda::attention_block_backward_reference(dgq.get(), dgk.get(), dgv.get(), dg.get(), dout.get(), dlse.get(),
                                                   dq_.get(), dk_.get(), dv_.get(), seg.seg, p.T, p.T, p.Hq, p.Hkv,
                                                   p.D, p.scale, delta.get(), ctx);
    CUDA_CHECK(cudaStreamSynchronize(ctx.stream));
  }
  const std::vector<float> rq = dgq.download(), rk = dgk.download(), rv = dgv.download();
  hone::cpu::attention_block_backward(gq.data(), gk.data(), gv.data(), g.data(), out.data(), lse.data(), q.data(),
                                      k.data(), v.data(), host, p.T, p.T, p.Hq, p.Hkv, p.D, p.scale);
  return std::max({test::rel_l2(rq, gq), test::rel_l2(rk, gk), test::rel_l2(rv, gv)});
}

// The merge: a running fp32 output and lse (some rows with lse = -inf and NaN outputs: nothing merged yet), a bf16
// block with its lse; the rows outside the segments keep their values on both sides.
double check_merge(const test::OpShape& shape, std::mt19937_64& rng) {
  const Problem p = parse(shape);
  const int64_t n = int64_t(p.T) * p.Hq * p.D, nl = int64_t(p.Hq) * p.T;
  std::vector<float> out = test::random_vector(n, rng), lse = test::random_vector(nl, rng, 3.f),
                     block = test::random_vector(n, rng), block_lse = test::random_vector(nl, rng, 3.f);
  for (int t = 0; t < p.T; t += 3)  // every third row: nothing merged yet
    for (int h = 0; h < p.Hq; ++h) {
      lse[size_t(h * p.T + t)] = -std::numeric_limits<float>::infinity();
      for (int d = 0; d < p.D; ++d) out[size_t((t * p.Hq + h) * p.D + d)] = std::nanf("");
    }
  test::DeviceBuffer<float> dout(n), dlse(nl), dblse(nl);
  test::DeviceBuffer<bf16> dblock(n);
  dout.upload(out);
  dlse.upload(lse);
  dblock.upload(block);
  dblse.upload(block_lse);
  const hone::AttentionSegments host = p.host();
  const DeviceSegments seg(host);
  test::inputs_ready();
  hone::cuda::attention_merge_forward(dout.get(), dlse.get(), dblock.get(), dblse.get(), seg.seg, p.T, p.Hq, p.D,
                                      test::check_context());
  const std::vector<float> got = dout.download(), got_lse = dlse.download();
  hone::cpu::attention_merge_forward(out.data(), lse.data(), block.data(), block_lse.data(), host, p.T, p.Hq, p.D);
  // Rows outside the segments that were never merged still hold NaN on both sides: compare the segments' rows.
  const int width = p.Hq * p.D;
  return std::max(test::rel_l2(segment_rows(got, host, width), segment_rows(out, host, width)),
                  test::rel_l2(segment_lse(got_lse, host, p.Hq, p.T), segment_lse(lse, host, p.Hq, p.T)));
}

// {Hq, Hkv, D, kind, lengths...}: both kinds; one token (padded to a chunk of 1 per rank); GQA 2 (Qwen3 heads, D 128)
// and 4; odd lengths; more sequences than one batch bucket (9); a chunk longer than one 64-row bucket.
const std::vector<test::OpShape> kShapes = {
    {8, 8, 64, 0, 1},
    {8, 8, 64, 1, 1},
    {16, 8, 128, 0, 1, 17, 130, 333},
    {16, 8, 128, 1, 1, 17, 130, 333},
    {32, 8, 64, 1, 17, 1, 130, 333, 64},
    {8, 2, 64, 0, 3, 50, 1, 7, 100, 31, 2, 64, 5},
};

const test::OpCheckRegistration reg_fwd_cudnn{{"attention_block_forward_cudnn", 1e-2, kShapes, [](auto& s, auto& r) {
                                                 return check_forward(Path::cudnn, s, r).out;
                                               }}};
const test::OpCheckRegistration reg_lse_cudnn{{"attention_block_forward_cudnn_lse", 1e-3, kShapes,
                                               [](auto& s, auto& r) { return check_forward(Path::cudnn, s, r).lse; }}};
const test::OpCheckRegistration reg_bwd_cudnn{{"attention_block_backward_cudnn", 1e-2, kShapes, [](auto& s, auto& r) {
                                                 return check_backward(Path::cudnn, s, r);
                                               }}};
const test::OpCheckRegistration reg_fwd_ref{{"attention_block_forward_reference", 1e-2, kShapes, [](auto& s, auto& r) {
                                               return check_forward(Path::reference, s, r).out;
                                             }}};
const test::OpCheckRegistration reg_lse_ref{{"attention_block_forward_reference_lse", 1e-3, kShapes,
                                             [](auto& s, auto& r) { return check_forward(Path::reference, s, r).lse; }}};
const test::OpCheckRegistration reg_bwd_ref{{"attention_block_backward_reference", 1e-2, kShapes,
                                             [](auto& s, auto& r) { return check_backward(Path::reference, s, r); }}};
const test::OpCheckRegistration reg_merge{{"attention_merge_forward", 1e-5, kShapes, &check_merge}};

}  // namespace
