// GPU op checks for the fused per-head q/k norm + RoPE (cuda/qk_norm_rope.cu) against its CPU twin: forward out
// (bf16, 1e-2) and rstd (fp32, 1e-5); backward dx (bf16, 1e-2; written over a NaN-poisoned buffer, so a row left
// unwritten fails) and dw (fp32, accumulated into random values, 5e-5: both sides sum up to 32768 rows in fp32, in
// different orders), and dw bitwise equal over two runs (tolerance 0: the reduction is deterministic).
// Shapes {T, H, D, max_pos}: rows T*H of 1, 7, 1000 and 32768; D 16/32/64/128 (1, 2, 4, 8 lanes a row), 48/80/96
// (lanes without columns), 256/512; H 1, 2, 3, 6, 8, 16 (H below, equal to and above the rows a warp holds, and not
// a multiple of them); decode-sized T with several head steps (8 x 16, 9 x 12, 6 x 40), spread over warps. The
// strided forward reads rows padded apart, as q and k inside one fused QKV product.
#if HONE_CUDA
#include "check_common.h"
#include "device_buffer.h"
#include "op_checks.h"
#include "ops/ops.h"

namespace {

using hone::cuda::bf16;

constexpr float kEps = 1e-6f;

struct Inputs {
  int T, H, D;
  int64_t n, rows;
  std::vector<float> x, w, inv;
  std::vector<int32_t> pos;
};

Inputs draw(const test::OpShape& s, std::mt19937_64& rng, int64_t ldx = 0) {
  Inputs in{int(s[0]), int(s[1]), int(s[2]), 0, 0, {}, {}, {}, {}};
  in.rows = int64_t(in.T) * in.H;
  in.n = in.rows * in.D;
  in.x = test::random_vector(ldx ? in.T * ldx : in.n, rng, 2.f);
  in.w = test::random_vector(in.D, rng, 0.5f);
  for (auto& v : in.w) v += 1.f;
  hone::RopeParams p;
  p.head_dim = in.D;
  p.theta = 1000000.f;
  in.inv.resize(size_t(in.D / 2));
  hone::cpu::rope_inv_freq(in.inv.data(), p);
  in.pos = test::random_ids(in.T, 0, int(s[3]), rng);
  return in;
}

struct Forward {
  double out_err, rstd_err;
};

// A fifth shape value pads the input rows (q or k inside one fused QKV product): they lie H * D + pad apart.
Forward run_forward(const test::OpShape& s, std::mt19937_64& rng) {
  const int64_t ldx = s.size() > 4 ? s[1] * s[2] + s[4] : 0;
  Inputs in = draw(s, rng, ldx);
  test::DeviceBuffer<bf16> bx(int64_t(in.x.size())), bw(in.D), bout(in.n);
  test::DeviceBuffer<float> brstd(in.rows), binv(in.D / 2);
  test::DeviceBuffer<int32_t> bpos(in.T);
  bx.upload(in.x);
  bw.upload(in.w);
  binv.upload(in.inv);
  bpos.upload_raw(in.pos);
  bout.poison();
  brstd.poison();
  test::inputs_ready();
  hone::cuda::qk_norm_rope_forward(bout.get(), brstd.get(), bx.get(), bw.get(), bpos.get(), binv.get(), in.T, in.H,
                                   in.D, kEps, test::check_context(), ldx);
  const std::vector<float> got = bout.download(), got_rstd = brstd.download();
  std::vector<float> want(size_t(in.n)), want_rstd(size_t(in.rows));
  hone::cpu::qk_norm_rope_forward(want.data(), want_rstd.data(), in.x.data(), in.w.data(), in.pos.data(),
                                  in.inv.data(), in.T, in.H, in.D, kEps, ldx);
  return {test::rel_l2(got.data(), want.data(), in.n), test::rel_l2(got_rstd.data(), want_rstd.data(), in.rows)};
}

struct Backward {
  double dx_err, dw_err, repeat_err;
};

Backward run_backward(const test::OpShape& s, std::mt19937_64& rng) {
  Inputs in = draw(s, rng);
  std::vector<float> g = test::random_vector(in.n, rng), dw = test::random_vector(in.D, rng);
  std::vector<float> rstd(size_t(in.rows)), tmp(size_t(in.n));
  hone::cpu::qk_norm_rope_forward(tmp.data(), rstd.data(), in.x.data(), in.w.data(), in.pos.data(), in.inv.data(),
                                  in.T, in.H, in.D, kEps);
  test::DeviceBuffer<bf16> bx(in.n), bw(in.D), bg(in.n), bdx(in.n);
  test::DeviceBuffer<float> bdw(in.D), brstd(in.rows), binv(in.D / 2);
  test::DeviceBuffer<int32_t> bpos(in.T);
  bx.upload(in.x);
  bw.upload(in.w);
  bg.upload(g);
  binv.upload(in.inv);
  bpos.upload_raw(in.pos);
  brstd.upload(rstd);  // both sides use the CPU's rstd
  bdw.upload(dw);
  const std::vector<float> dw0 = dw;
  bdx.poison();
  test::inputs_ready();
  const auto& ctx = test::check_context();
  hone::cuda::qk_norm_rope_backward(bdx.get(), bdw.get(), bg.get(), bx.get(), bw.get(), brstd.get(), bpos.get(),
                                    binv.get(), in.T, in.H, in.D, ctx);
  const std::vector<float> got_dx = bdx.download(), got_dw = bdw.download();
  // Again from the same dw: the reduction's order is fixed, so the result is the same to the bit.
  std::vector<float> again = dw0;
  bdw.upload(again);
  test::inputs_ready();
  hone::cuda::qk_norm_rope_backward(bdx.get(), bdw.get(), bg.get(), bx.get(), bw.get(), brstd.get(), bpos.get(),
                                    binv.get(), in.T, in.H, in.D, ctx);
  const std::vector<float> got_dw2 = bdw.download();
  std::vector<float> want_dx(size_t(in.n));
  hone::cpu::qk_norm_rope_backward(want_dx.data(), dw.data(), g.data(), in.x.data(), in.w.data(), rstd.data(),
                                   in.pos.data(), in.inv.data(), in.T, in.H, in.D);
  return {test::rel_l2(got_dx.data(), want_dx.data(), in.n), test::rel_l2(got_dw.data(), dw.data(), in.D),
          test::rel_l2(got_dw2.data(), got_dw.data(), in.D)};
}

const std::vector<test::OpShape> kShapes = {
    {1, 1, 128, 10},       {7, 1, 64, 100},       {7, 1, 16, 100},        {1, 7, 32, 4096},
    {500, 2, 128, 4096},   {125, 8, 64, 2048},    {1000, 1, 16, 4096},    {2048, 16, 128, 32768},
    {4096, 8, 128, 40000}, {16384, 2, 64, 8192},  {33, 3, 80, 1000},      {5, 6, 96, 100},
    {11, 3, 48, 300},      {13, 5, 256, 1000},    {3, 2, 512, 100},       {8, 16, 128, 4096},
    {9, 12, 128, 4096},    {6, 40, 64, 4096}};

const test::OpCheckRegistration reg_fwd{
    {"qk_norm_rope_forward", 1e-2, kShapes,
     [](const test::OpShape& s, std::mt19937_64& r) { return run_forward(s, r).out_err; }}};
// {T, H, D, max_pos, pad}: Qwen3-0.6B's q and k inside its fused QKV rows at a decode step of 512 and of 8 rows (the
// latter spread over warps), and a pad of one 16-byte vector.
const std::vector<test::OpShape> kStridedShapes = {
    {512, 16, 128, 640, 2048}, {512, 8, 128, 640, 3072}, {8, 16, 128, 4096, 2048}, {5, 6, 96, 100, 8}};
const test::OpCheckRegistration reg_fwd_strided{
    {"qk_norm_rope_forward_strided", 1e-2, kStridedShapes,
     [](const test::OpShape& s, std::mt19937_64& r) { return run_forward(s, r).out_err; }}};
const test::OpCheckRegistration reg_rstd{
    {"qk_norm_rope_forward_rstd", 1e-5, kShapes,
     [](const test::OpShape& s, std::mt19937_64& r) { return run_forward(s, r).rstd_err; }}};
const test::OpCheckRegistration reg_dx{
    {"qk_norm_rope_backward_dx", 1e-2, kShapes,
     [](const test::OpShape& s, std::mt19937_64& r) { return run_backward(s, r).dx_err; }}};
const test::OpCheckRegistration reg_dw{
    {"qk_norm_rope_backward_dw", 5e-5, kShapes,
     [](const test::OpShape& s, std::mt19937_64& r) { return run_backward(s, r).dw_err; }}};
const test::OpCheckRegistration reg_repeat{
    {"qk_norm_rope_backward_dw_repeat", 0.0, kShapes,
     [](const test::OpShape& s, std::mt19937_64& r) { return run_backward(s, r).repeat_err; }}};

}  // namespace
#endif  // HONE_CUDA
