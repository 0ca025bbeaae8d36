// GPU op checks for RoPE forward (also in place) and backward (accumulated into random dx, or written over NaN),
// bf16, tolerance 1e-2.
// Shapes {T, H, D, in_place, max_pos}: Qwen3 (theta 1e6) and Llama 3 (scaled) frequencies alternate by shape;
// positions are random in [0, max_pos), up to 40000 (large angles take sincosf's slow argument reduction). The
// strided forward's shapes add a sixth value: the input rows lie H * D + pad apart.
#if HONE_CUDA
#include "check_common.h"
#include "device_buffer.h"
#include "op_checks.h"
#include "ops/ops.h"

namespace {

using hone::cuda::bf16;

std::vector<float> inv_freq_for(int D, bool llama3) {
  hone::RopeParams p;
  p.head_dim = D;
  p.theta = llama3 ? 500000.f : 1000000.f;
  p.llama3 = llama3;
  std::vector<float> inv(size_t(D / 2));
  hone::cpu::rope_inv_freq(inv.data(), p);
  return inv;
}

double check_rope(const test::OpShape& s, std::mt19937_64& rng, bool backward, bool accumulate = true) {
  const int T = int(s[0]), H = int(s[1]), D = int(s[2]);
  const bool in_place = s[3] != 0;
  const int max_pos = int(s[4]);
  const int64_t n = int64_t(T) * H * D;
  // The forward's input rows pad values apart beyond H * D (q or k inside one fused QKV product).
  const int64_t ldx = s.size() > 5 ? int64_t(H) * D + s[5] : 0, nx = ldx ? int64_t(T) * ldx : n;
  std::vector<float> x = test::random_vector(nx, rng), acc = test::random_vector(n, rng, 0.5f);
  std::vector<float> inv = inv_freq_for(D, (T + H) % 2 == 1);
  const std::vector<int32_t> pos = test::random_ids(T, 0, max_pos, rng);
  test::DeviceBuffer<bf16> bx(nx), bout(n);
  test::DeviceBuffer<int32_t> bpos(T);
  test::DeviceBuffer<float> binv(D / 2);
  bx.upload(x);
  bpos.upload_raw(pos);
  binv.upload(inv);
  if (backward && accumulate)
    bout.upload(acc);
  else
    bout.poison();
  test::inputs_ready();
  const auto& ctx = test::check_context();
  std::vector<float> got;
  std::vector<float> want = backward ? acc : std::vector<float>(static_cast<size_t>(n));
  if (backward) {
    hone::cuda::rope_backward(bout.get(), bx.get(), bpos.get(), binv.get(), T, H, D, accumulate, ctx);
    got = bout.download();
    hone::cpu::rope_backward(want.data(), x.data(), pos.data(), inv.data(), T, H, D, accumulate);
  } else {
    bf16* out = in_place ? bx.get() : bout.get();
    hone::cuda::rope_forward(out, bx.get(), bpos.get(), binv.get(), T, H, D, ctx, ldx);
    got = in_place ? bx.download() : bout.download();
    hone::cpu::rope_forward(want.data(), x.data(), pos.data(), inv.data(), T, H, D, ldx);
  }
  return test::rel_l2(got.data(), want.data(), n);
}

const std::vector<test::OpShape> kShapes = {{1, 1, 64, 0, 10},       {7, 3, 128, 0, 4096}, {4096, 16, 128, 0, 4096},
                                            {33, 8, 64, 1, 40000},   {4096, 8, 128, 1, 32768},
                                            {5, 2, 1024, 0, 100},    {64, 40, 64, 0, 2048}};

const test::OpCheckRegistration reg_fwd{
    {"rope_forward", 1e-2, kShapes, [](const test::OpShape& s, std::mt19937_64& r) { return check_rope(s, r, false); }}};
// {T, H, D, 0, max_pos, pad}: q of a decode step inside Qwen3's and Llama 3's fused QKV rows, an odd pad.
const test::OpCheckRegistration reg_fwd_strided{{"rope_forward_strided", 1e-2,
                                                 {{512, 32, 64, 0, 640, 1024}, {37, 8, 64, 0, 4096, 4096},
                                                  {5, 3, 128, 0, 100, 7}},
                                                 [](const test::OpShape& s, std::mt19937_64& r) {
                                                   return check_rope(s, r, false);
                                                 }}};
const test::OpCheckRegistration reg_bwd{
    {"rope_backward", 1e-2, kShapes, [](const test::OpShape& s, std::mt19937_64& r) { return check_rope(s, r, true); }}};
const test::OpCheckRegistration reg_bwd_written{{"rope_backward_written", 1e-2, kShapes,
                                                 [](const test::OpShape& s, std::mt19937_64& r) {
                                                   return check_rope(s, r, true, /*accumulate=*/false);
                                                 }}};

}  // namespace
#endif  // HONE_CUDA
