// GPU checks of packed causal GQA attention against the fp32 CPU twin, for both GPU paths: cuDNN's fused SDPA
// (attention_*_cudnn, which must accept every shape here) and the plain CUDA reference (attention_*_reference).
// A shape is {Hq, Hkv, D, length of sequence 0, length of sequence 1, ...}.
// Tolerances: out and dq/dk/dv are bf16 (1e-2 relative L2). lse is fp32 computed from the same bf16 inputs on both
// sides, so only fp32 summation order and exp/log differ: 1e-3 leaves room for cuDNN's reduced-precision P
// without hiding a wrong scale or a wrong sequence boundary (those move lse by O(1)).
#include <algorithm>
#include <cmath>
#include <vector>

#include "cuda/attention_cudnn.h"
#include "cuda/gpu_context_impl.h"
#include "device_buffer.h"
#include "op_checks.h"
#include "ops/ops.h"

namespace {

using hone::cuda::bf16;

struct Problem {
  int Hq = 0, Hkv = 0, D = 0, T = 0, max_len = 0, num_seqs = 0;
  std::vector<int32_t> cu;
  float scale = 0.f;
};

Problem parse(const test::OpShape& s) {
  Problem p;
  p.Hq = int(s.at(0));
  p.Hkv = int(s.at(1));
  p.D = int(s.at(2));
  p.cu.push_back(0);
  for (size_t i = 3; i < s.size(); ++i) {
    p.cu.push_back(p.cu.back() + int32_t(s[i]));
    p.max_len = std::max(p.max_len, int(s[i]));
  }
  p.num_seqs = int(p.cu.size()) - 1;
  p.T = p.cu.back();
  p.scale = 1.f / std::sqrt(float(p.D));
  return p;
}

// One context for all checks of this file (cuDNN graphs are cached in it across shapes).
const hone::cuda::GpuContext& context() {
  static hone::cuda::GpuContext ctx = hone::cuda::create_gpu_context(0);
  return ctx;
}

enum class Path { cudnn, reference };

void run_forward(Path path, bf16* out, float* lse, const bf16* q, const bf16* k, const bf16* v, const int32_t* cu,
                 const Problem& p) {
  const auto& ctx = context();
  if (path == Path::cudnn) {
    HONE_CHECK(hone::cuda::attention_forward_cudnn(out, lse, q, k, v, cu, p.num_seqs, p.max_len, p.T, p.Hq, p.Hkv,
                                                   p.D, p.scale, ctx),
               "cuDNN refused this attention forward (its reason is on stderr)");
  } else {
    hone::cuda::attention_forward_reference(out, lse, q, k, v, cu, p.num_seqs, p.T, p.Hq, p.Hkv, p.D, p.scale, ctx);
  }
}

struct ForwardErrors {
  double out, lse;
};

ForwardErrors check_forward(Path path, const test::OpShape& shape, std::mt19937_64& rng) {
  const Problem p = parse(shape);
  const int64_t nq = int64_t(p.T) * p.Hq * p.D, nkv = int64_t(p.T) * p.Hkv * p.D;
  std::vector<float> q = test::random_vector(nq, rng), k = test::random_vector(nkv, rng),
                     v = test::random_vector(nkv, rng);
  test::DeviceBuffer<bf16> dq_(nq), dk_(nkv), dv_(nkv), dout(nq);
  test::DeviceBuffer<float> dlse(int64_t(p.Hq) * p.T);
  test::DeviceBuffer<int32_t> dcu(int64_t(p.cu.size()));
  dq_.upload(q);
  dk_.upload(k);
  dv_.upload(v);
  dcu.upload_raw(p.cu);
  dout.poison();
  dlse.poison();
  run_forward(path, dout.get(), dlse.get(), dq_.get(), dk_.get(), dv_.get(), dcu.get(), p);
  const std::vector<float> out = dout.download(), lse = dlse.download();

  std::vector<float> out_ref(static_cast<size_t>(nq)), lse_ref(static_cast<size_t>(p.Hq) * p.T);
  hone::cpu::attention_forward(out_ref.data(), lse_ref.data(), q.data(), k.data(), v.data(), p.cu.data(), p.num_seqs,
                               p.T, p.Hq, p.Hkv, p.D, p.scale);
  return {test::rel_l2(out.data(), out_ref.data(), nq), test::rel_l2(lse.data(), lse_ref.data(), int64_t(lse.size()))};
}

// dq, dk, dv start from random values as large as the gradients themselves, so an overwrite instead of an
// accumulation fails (error ~0.7) while bf16 rounding of the sum stays well inside the tolerance.
double check_backward(Path path, const test::OpShape& shape, std::mt19937_64& rng) {
  const Problem p = parse(shape);
  const int64_t nq = int64_t(p.T) * p.Hq * p.D, nkv = int64_t(p.T) * p.Hkv * p.D;
  std::vector<float> q = test::random_vector(nq, rng), k = test::random_vector(nkv, rng),
                     v = test::random_vector(nkv, rng), g = test::random_vector(nq, rng);
  test::DeviceBuffer<bf16> dq_(nq), dk_(nkv), dv_(nkv), dg(nq), dout(nq), dgq(nq), dgk(nkv), dgv(nkv);
  test::DeviceBuffer<float> dlse(int64_t(p.Hq) * p.T);
  test::DeviceBuffer<int32_t> dcu(int64_t(p.cu.size()));
  dq_.upload(q);
  dk_.upload(k);
  dv_.upload(v);
  dg.upload(g);
  dcu.upload_raw(p.cu);

  // The saved forward state, from the CPU: out rounded to bf16 as the GPU keeps it, lse in fp32.
  std::vector<float> out(static_cast<size_t>(nq)), lse(static_cast<size_t>(p.Hq) * p.T);
  hone::cpu::attention_forward(out.data(), lse.data(), q.data(), k.data(), v.data(), p.cu.data(), p.num_seqs, p.T,
                               p.Hq, p.Hkv, p.D, p.scale);
  dout.upload(out);
  dlse.upload(lse);

  // The backward writes its gradients (cuDNN in place): they start poisoned.
  dgq.poison();
  dgk.poison();
  dgv.poison();

  const auto& ctx = context();
  if (path == Path::cudnn) {
    HONE_CHECK(hone::cuda::attention_backward_cudnn(dgq.get(), dgk.get(), dgv.get(), dg.get(), dout.get(), dlse.get(),
                                                    dq_.get(), dk_.get(), dv_.get(), dcu.get(), p.num_seqs,
                                                    p.max_len, p.T, p.Hq, p.Hkv, p.D, p.scale, ctx),
               "cuDNN refused this attention backward (its reason is on stderr)");
  } else {
    test::DeviceBuffer<float> delta(int64_t(p.Hq) * p.T);
    delta.poison();
    hone::cuda::attention_backward_reference(dgq.get(), dgk.get(), dgv.get(), dg.get(), dout.get(), dlse.get(),
                                             dq_.get(), dk_.get(), dv_.get(), dcu.get(), p.num_seqs, p.T, p.Hq,
                                             p.Hkv, p.D, p.scale, delta.get(), ctx);
    CUDA_CHECK(cudaStreamSynchronize(ctx.stream));
  }
  const std::vector<float> rq = dgq.download(), rk = dgk.download(), rv = dgv.download();

  std::vector<float> gq(static_cast<size_t>(nq)), gk(static_cast<size_t>(nkv)), gv(static_cast<size_t>(nkv));
  hone::cpu::attention_backward(gq.data(), gk.data(), gv.data(), g.data(), out.data(), lse.data(), q.data(), k.data(),
                                v.data(), p.cu.data(), p.num_seqs, p.T, p.Hq, p.Hkv, p.D, p.scale);
  return std::max({test::rel_l2(rq.data(), gq.data(), nq), test::rel_l2(rk.data(), gk.data(), nkv),
                   test::rel_l2(rv.data(), gv.data(), nkv)});
}

// {Hq, Hkv, D, lengths...}: one token; GQA 1, 2 (Qwen3-0.6B heads), 4 (Llama-3.2-1B heads); odd lengths; more
// sequences than one batch bucket (9 > 8); a sequence longer than one 64-row bucket.
const std::vector<test::OpShape> kShapes = {
    {8, 8, 64, 1},
    {4, 4, 128, 200},
    {16, 8, 128, 1, 17, 130, 333},
    {32, 8, 64, 17, 1, 130, 333, 64},
    {8, 2, 64, 3, 50, 1, 7, 100, 31, 2, 64, 5},
};

double forward_out(Path path, const test::OpShape& s, std::mt19937_64& rng) { return check_forward(path, s, rng).out; }
double forward_lse(Path path, const test::OpShape& s, std::mt19937_64& rng) { return check_forward(path, s, rng).lse; }

const test::OpCheckRegistration reg_fwd_cudnn{
    {"attention_forward_cudnn", 1e-2, kShapes, [](auto& s, auto& r) { return forward_out(Path::cudnn, s, r); }}};
const test::OpCheckRegistration reg_lse_cudnn{
    {"attention_forward_cudnn_lse", 1e-3, kShapes, [](auto& s, auto& r) { return forward_lse(Path::cudnn, s, r); }}};
const test::OpCheckRegistration reg_bwd_cudnn{
    {"attention_backward_cudnn", 1e-2, kShapes, [](auto& s, auto& r) { return check_backward(Path::cudnn, s, r); }}};
const test::OpCheckRegistration reg_fwd_ref{{"attention_forward_reference", 1e-2, kShapes, [](auto& s, auto& r) {
                                               return forward_out(Path::reference, s, r);
                                             }}};
const test::OpCheckRegistration reg_lse_ref{{"attention_forward_reference_lse", 1e-3, kShapes, [](auto& s, auto& r) {
                                               return forward_lse(Path::reference, s, r);
                                             }}};
const test::OpCheckRegistration reg_bwd_ref{{"attention_backward_reference", 1e-2, kShapes, [](auto& s, auto& r) {
                                               return check_backward(Path::reference, s, r);
                                             }}};

}  // namespace
