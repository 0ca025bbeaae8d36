// GPU op checks of the mixture-of-experts ops (cuda/moe_ops.h) against their CPU twins (src/ops/cpu/moe.cpp): the
// router (softmax, top-k, its backward, replay, statistics; fp32, 1e-5), the routing plan (exact), permute and
// unpermute (bf16, 1e-2) and the grouped linear layers, our kernel and the cuBLAS loop (bf16, 1e-2). Routings
// include an expert with no rows and every token on the same experts.
#if HONE_CUDA
#include <algorithm>
#include <numeric>

#include "check_common.h"
#include "cuda/moe_ops.h"
#include "device_buffer.h"
#include "op_checks.h"
#include "ops/ops.h"

namespace {

using hone::cuda::bf16;

// k distinct experts per token; skewed = true sends every token to experts 0..k-1 (the rest get nothing); and
// expert E - 1 never gets a row otherwise when E > k + 1.
std::vector<int32_t> random_routing(int T, int E, int k, bool skewed, std::mt19937_64& rng) {
  std::vector<int32_t> idx(size_t(T) * k);
  std::vector<int32_t> perm(size_t(std::max(E - 1, k)));
  for (int t = 0; t < T; ++t) {
    std::iota(perm.begin(), perm.end(), 0);
    if (!skewed) std::shuffle(perm.begin(), perm.end(), rng);
    for (int j = 0; j < k; ++j) idx[size_t(t) * k + size_t(j)] = perm[size_t(j)];
  }
  return idx;
}

std::vector<float> as_float(const std::vector<int32_t>& v) { return std::vector<float>(v.begin(), v.end()); }

// Router logits whose sorted values are at least 0.04 apart (a shuffled ladder plus small noise): the top-k is the
// same whatever the last bits of the softmax, on both engines.
std::vector<float> ladder_logits(int T, int E, std::mt19937_64& rng) {
  std::vector<float> z(size_t(T) * E);
  std::vector<int> perm(static_cast<size_t>(E));
  std::uniform_real_distribution<float> noise(-0.005f, 0.005f);
  for (int t = 0; t < T; ++t) {
    std::iota(perm.begin(), perm.end(), 0);
    std::shuffle(perm.begin(), perm.end(), rng);
    for (int e = 0; e < E; ++e) z[size_t(t) * E + size_t(e)] = 0.05f * float(perm[size_t(e)] - E / 2) + noise(rng);
  }
  return z;
}

double exact(const std::vector<float>& got, const std::vector<float>& want) {
  return got == want ? 0.0 : INFINITY;
}

// {T, E, k, norm}
double check_topk_forward(const test::OpShape& s, std::mt19937_64& rng) {
  const int T = int(s[0]), E = int(s[1]), k = int(s[2]);
  const bool norm = s[3] != 0;
  std::vector<float> logits = ladder_logits(T, E, rng);
  test::DeviceBuffer<float> dl(int64_t(T) * E), dp(int64_t(T) * E), dw(int64_t(T) * k);
  test::DeviceBuffer<int32_t> di(int64_t(T) * k);
  dl.upload(logits);
  dp.poison();
  dw.poison();
  di.poison();
  test::inputs_ready();
  hone::cuda::moe_topk_forward(dp.get(), di.get(), dw.get(), dl.get(), T, E, k, norm, test::check_context());
  std::vector<float> probs(size_t(T) * E), w(size_t(T) * k);
  std::vector<int32_t> idx(size_t(T) * k);
  hone::cpu::moe_topk_forward(probs.data(), idx.data(), w.data(), logits.data(), T, E, k, norm);
  return test::worst(test::worst(test::rel_l2(dp.download(), probs), test::rel_l2(dw.download(), w)),
                     exact(di.download(), as_float(idx)));
}

double check_topk_backward(const test::OpShape& s, std::mt19937_64& rng) {
  const int T = int(s[0]), E = int(s[1]), k = int(s[2]);
  const bool norm = s[3] != 0;
  std::vector<float> logits = ladder_logits(T, E, rng);
  std::vector<float> probs(size_t(T) * E), w(size_t(T) * k);
  std::vector<int32_t> idx(size_t(T) * k);
  hone::cpu::moe_topk_forward(probs.data(), idx.data(), w.data(), logits.data(), T, E, k, norm);
  std::vector<float> dw = test::random_vector(int64_t(T) * k, rng), daux = test::random_vector(E, rng, 0.1f);
  std::vector<float> dz = test::random_vector(int64_t(T) * E, rng, 0.5f);
  test::DeviceBuffer<float> bp(int64_t(T) * E), bw(int64_t(T) * k), bdw(int64_t(T) * k), bda(E), bdz(int64_t(T) * E);
  test::DeviceBuffer<int32_t> bi(int64_t(T) * k);
  bp.upload(probs);
  bw.upload(w);
  bdw.upload(dw);
  bda.upload(daux);
  bdz.upload(dz);
  bi.upload_raw(idx);
  test::inputs_ready();
  hone::cuda::moe_topk_backward(bdz.get(), bdw.get(), bda.get(), bp.get(), bi.get(), bw.get(), T, E, k, norm,
                                test::check_context());
  hone::cpu::moe_topk_backward(dz.data(), dw.data(), daux.data(), probs.data(), idx.data(), w.data(), T, E, k, norm);
  return test::rel_l2(bdz.download(), dz);
}

double check_topk_replay(const test::OpShape& s, std::mt19937_64& rng) {
  const int T = int(s[0]), E = int(s[1]), k = int(s[2]);
  const bool norm = s[3] != 0;
  std::vector<float> logits = ladder_logits(T, E, rng);
  std::vector<float> probs(size_t(T) * E), w(size_t(T) * k);
  std::vector<int32_t> idx(size_t(T) * k);
  hone::cpu::moe_topk_forward(probs.data(), idx.data(), w.data(), logits.data(), T, E, k, norm);
  // Rows of 2 k entries (the second half unused), every third row not forced.
  std::vector<int32_t> forced = random_routing(T, E, 2 * k <= E ? 2 * k : k, false, rng);
  const int64_t stride = 2 * k <= E ? 2 * k : k;
  for (int t = 0; t < T; t += 3) forced[size_t(t) * size_t(stride)] = -1;
  test::DeviceBuffer<float> bp(int64_t(T) * E), bw(int64_t(T) * k);
  test::DeviceBuffer<int32_t> bi(int64_t(T) * k), bf(int64_t(forced.size()));
  bp.upload(probs);
  bw.upload(w);
  bi.upload_raw(idx);
  bf.upload_raw(forced);
  test::inputs_ready();
  hone::cuda::moe_topk_replay(bi.get(), bw.get(), bp.get(), bf.get(), stride, T, E, k, norm, test::check_context());
  hone::cpu::moe_topk_replay(idx.data(), w.data(), probs.data(), forced.data(), stride, T, E, k, norm);
  return test::worst(test::rel_l2(bw.download(), w), exact(bi.download(), as_float(idx)));
}

double check_router_stats(const test::OpShape& s, std::mt19937_64& rng) {
  const int T = int(s[0]), E = int(s[1]);
  std::vector<float> probs = test::random_vector(int64_t(T) * E, rng), sum = test::random_vector(E, rng);
  test::DeviceBuffer<float> bp(int64_t(T) * E), bs(E);
  bp.upload(probs);
  bs.upload(sum);
  test::inputs_ready();
  hone::cuda::moe_router_stats(bs.get(), bp.get(), T, E, test::check_context());
  hone::cpu::moe_router_stats(sum.data(), probs.data(), T, E);
  return test::rel_l2(bs.download(), sum);
}

// {L, E}
double check_aux_backward(const test::OpShape& s, std::mt19937_64& rng) {
  const int L = int(s[0]), E = int(s[1]);
  const std::vector<int32_t> counts = test::random_ids(int64_t(L) * E, 0, 1000, rng);
  const int T = 37, k = std::min(E, 3);
  const std::vector<int32_t> idx = random_routing(T + 5, E, k, false, rng);  // 5 more rows: padding, not counted
  test::DeviceBuffer<int32_t> bc(int64_t(L) * E), bi(int64_t(idx.size())), bc1(E);
  test::DeviceBuffer<float> bd(E);
  bc.upload_raw(counts);
  bi.upload_raw(idx);
  bd.poison();
  bc1.poison();
  test::inputs_ready();
  hone::cuda::moe_aux_loss_backward(bd.get(), bc.get(), L, E, 3e-7f, test::check_context());
  hone::cuda::moe_expert_counts(bc1.get(), bi.get(), T, k, E, test::check_context());
  std::vector<float> daux(static_cast<size_t>(E));
  std::vector<int32_t> c1(static_cast<size_t>(E));
  hone::cpu::moe_aux_loss_backward(daux.data(), counts.data(), L, E, 3e-7f);
  hone::cpu::moe_expert_counts(c1.data(), idx.data(), T, k, E);
  return test::worst(test::rel_l2(bd.download(), daux), exact(bc1.download(), as_float(c1)));
}

// {T, E, k, skewed}
double check_route(const test::OpShape& s, std::mt19937_64& rng) {
  const int T = int(s[0]), E = int(s[1]), k = int(s[2]);
  const std::vector<int32_t> idx = random_routing(T, E, k, s[3] != 0, rng);
  const int N = T * k;
  const size_t ws = hone::cuda::moe_route_workspace_bytes(N, E);
  test::DeviceBuffer<int32_t> bi(N), bo(E + 1), br(N), bt(N);
  test::DeviceBuffer<char> bws(static_cast<int64_t>(ws));
  bi.upload_raw(idx);
  bo.poison();
  br.poison();
  bt.poison();
  test::inputs_ready();
  hone::cuda::moe_route(bo.get(), br.get(), bt.get(), bi.get(), T, k, E, bws.get(), ws, test::check_context());
  std::vector<int32_t> offsets(size_t(E) + 1), row_of(static_cast<size_t>(N)), token_of(static_cast<size_t>(N));
  hone::cpu::moe_route(offsets.data(), row_of.data(), token_of.data(), idx.data(), T, k, E);
  return test::worst(exact(bo.download(), as_float(offsets)),
                     test::worst(exact(br.download(), as_float(row_of)), exact(bt.download(), as_float(token_of))));
}

struct Plan {
  std::vector<int32_t> idx, offsets, row_of, token_of;
};
Plan make_plan(int T, int E, int k, bool skewed, std::mt19937_64& rng) {
  Plan p;
  p.idx = random_routing(T, E, k, skewed, rng);
  p.offsets.resize(size_t(E) + 1);
  p.row_of.resize(size_t(T) * k);
  p.token_of.resize(size_t(T) * k);
  hone::cpu::moe_route(p.offsets.data(), p.row_of.data(), p.token_of.data(), p.idx.data(), T, k, E);
  return p;
}

// {T, E, k, C}
double check_permute(const test::OpShape& s, std::mt19937_64& rng, bool forward) {
  const int T = int(s[0]), E = int(s[1]), k = int(s[2]), C = int(s[3]), N = T * k;
  const Plan p = make_plan(T, E, k, false, rng);
  test::DeviceBuffer<int32_t> br(N), bt(N);
  br.upload_raw(p.row_of);
  bt.upload_raw(p.token_of);
  if (forward) {
    std::vector<float> x = test::random_vector(int64_t(T) * C, rng);
    test::DeviceBuffer<bf16> bx(int64_t(T) * C), bxp(int64_t(N) * C);
    bx.upload(x);
    bxp.poison();
    test::inputs_ready();
    hone::cuda::moe_permute_forward(bxp.get(), bx.get(), bt.get(), N, C, test::check_context());
    std::vector<float> xp(size_t(N) * C);
    hone::cpu::moe_permute_forward(xp.data(), x.data(), p.token_of.data(), N, C);
    return test::rel_l2(bxp.download(), xp);
  }
  std::vector<float> dxp = test::random_vector(int64_t(N) * C, rng), dx = test::random_vector(int64_t(T) * C, rng);
  test::DeviceBuffer<bf16> bdxp(int64_t(N) * C), bdx(int64_t(T) * C);
  bdxp.upload(dxp);
  bdx.upload(dx);
  test::inputs_ready();
  hone::cuda::moe_permute_backward(bdx.get(), bdxp.get(), br.get(), T, k, C, test::check_context());
  hone::cpu::moe_permute_backward(dx.data(), dxp.data(), p.row_of.data(), T, k, C);
  return test::rel_l2(bdx.download(), dx);
}

double check_unpermute(const test::OpShape& s, std::mt19937_64& rng, bool forward) {
  const int T = int(s[0]), E = int(s[1]), k = int(s[2]), C = int(s[3]), N = T * k;
  const Plan p = make_plan(T, E, k, false, rng);
  std::vector<float> yp = test::random_vector(int64_t(N) * C, rng), w = test::random_vector(N, rng, 0.5f);
  test::DeviceBuffer<int32_t> br(N);
  test::DeviceBuffer<bf16> byp(int64_t(N) * C);
  test::DeviceBuffer<float> bw(N);
  br.upload_raw(p.row_of);
  byp.upload(yp);
  bw.upload(w);
  if (forward) {
    test::DeviceBuffer<bf16> by(int64_t(T) * C);
    by.poison();
    test::inputs_ready();
    hone::cuda::moe_unpermute_forward(by.get(), byp.get(), br.get(), bw.get(), T, k, C, test::check_context());
    std::vector<float> y(size_t(T) * C);
    hone::cpu::moe_unpermute_forward(y.data(), yp.data(), p.row_of.data(), w.data(), T, k, C);
    return test::rel_l2(by.download(), y);
  }
  std::vector<float> dy = test::random_vector(int64_t(T) * C, rng), dyp = test::random_vector(int64_t(N) * C, rng);
  std::vector<float> dw = test::random_vector(N, rng);
  test::DeviceBuffer<bf16> bdy(int64_t(T) * C), bdyp(int64_t(N) * C);
  test::DeviceBuffer<float> bdw(N);
  bdy.upload(dy);
  bdyp.upload(dyp);
  bdw.upload(dw);
  test::inputs_ready();
  hone::cuda::moe_unpermute_backward(bdyp.get(), bdw.get(), bdy.get(), byp.get(), br.get(), bw.get(), T, k, C,
                                     test::check_context());
  hone::cpu::moe_unpermute_backward(dyp.data(), dw.data(), dy.data(), yp.data(), p.row_of.data(), w.data(), T, k, C);
  return test::worst(test::rel_l2(bdyp.download(), dyp), test::rel_l2(bdw.download(), dw));
}

// {T, E, k, IC, OC, skewed}
double check_grouped(const test::OpShape& s, std::mt19937_64& rng, bool forward, bool cublas) {
  const int T = int(s[0]), E = int(s[1]), k = int(s[2]), IC = int(s[3]), OC = int(s[4]), N = T * k;
  const Plan p = make_plan(T, E, k, s[5] != 0, rng);
  std::vector<float> x = test::random_vector(int64_t(N) * IC, rng), w = test::random_vector(int64_t(E) * OC * IC, rng, 0.05f);
  test::DeviceBuffer<bf16> bx(int64_t(N) * IC), bw(int64_t(E) * OC * IC);
  test::DeviceBuffer<int32_t> bo(E + 1);
  bx.upload(x);
  bw.upload(w);
  bo.upload_raw(p.offsets);
  const auto& ctx = test::check_context();
  if (forward) {
    test::DeviceBuffer<bf16> bout(int64_t(N) * OC);
    bout.poison();
    test::inputs_ready();
    if (cublas) hone::cuda::moe_grouped_linear_forward_cublas(bout.get(), bx.get(), bw.get(), p.offsets.data(), E, IC, OC, ctx);
    else hone::cuda::moe_grouped_linear_forward(bout.get(), bx.get(), bw.get(), bo.get(), E, IC, OC, N, ctx);
    std::vector<float> out(size_t(N) * OC);
    hone::cpu::moe_grouped_linear_forward(out.data(), x.data(), w.data(), p.offsets.data(), E, IC, OC);
    return test::rel_l2(bout.download(), out);
  }
  std::vector<float> dout = test::random_vector(int64_t(N) * OC, rng), dx = test::random_vector(int64_t(N) * IC, rng);
  std::vector<float> dw = test::random_vector(int64_t(E) * OC * IC, rng);
  test::DeviceBuffer<bf16> bdout(int64_t(N) * OC), bdx(int64_t(N) * IC);
  test::DeviceBuffer<float> bdw(int64_t(E) * OC * IC);
  bdout.upload(dout);
  bdx.upload(dx);
  bdw.upload(dw);
  test::inputs_ready();
  if (cublas)
    hone::cuda::moe_grouped_linear_backward_cublas(bdx.get(), bdw.get(), bdout.get(), bx.get(), bw.get(), p.offsets.data(),
                                                   E, IC, OC, ctx);
  else
    hone::cuda::moe_grouped_linear_backward(bdx.get(), bdw.get(), bdout.get(), bx.get(), bw.get(), bo.get(), E, IC, OC, N,
                                            ctx);
  hone::cpu::moe_grouped_linear_backward(dx.data(), dw.data(), dout.data(), x.data(), w.data(), p.offsets.data(), E, IC,
                                         OC);
  return test::worst(test::rel_l2(bdx.download(), dx), test::rel_l2(bdw.download(), dw));
}

const std::vector<test::OpShape> kRouter = {{1, 4, 1, 0}, {37, 8, 2, 1}, {100, 60, 4, 0}, {513, 128, 8, 1}};
const std::vector<test::OpShape> kRoute = {{1, 4, 1, 0}, {37, 8, 2, 0}, {9, 16, 2, 0}, {50, 8, 2, 1},
                                           {4096, 128, 8, 0}};
const std::vector<test::OpShape> kRows = {{1, 4, 1, 8}, {37, 8, 2, 33}, {300, 16, 4, 256}};
// At most 64 rows an expert on average the forward runs the few-rows kernel: 100 x 2 rows over 8 experts skewed onto
// two (100 rows each: two chunks of 64) covers its row chunks; 2048 x 2 over 8 and an input width that is not a
// multiple of 8 (36) run the tiled kernel.
const std::vector<test::OpShape> kGemm = {{5, 4, 2, 16, 16, 0},   {37, 8, 2, 40, 24, 0},      {64, 8, 2, 64, 96, 1},
                                          {9, 16, 2, 32, 48, 0}, {512, 128, 8, 2048, 768, 0}, {300, 32, 4, 768, 2048, 0},
                                          {100, 8, 2, 64, 200, 1}, {2048, 8, 2, 64, 96, 0},   {37, 8, 2, 36, 24, 0}};

const test::OpCheckRegistration reg_topk_f{{"moe_topk_forward", 1e-5, kRouter, &check_topk_forward}};
const test::OpCheckRegistration reg_topk_b{{"moe_topk_backward", 1e-5, kRouter, &check_topk_backward}};
const test::OpCheckRegistration reg_replay{{"moe_topk_replay", 1e-5, kRouter, &check_topk_replay}};
const test::OpCheckRegistration reg_stats{{"moe_router_stats", 1e-5, {{1, 4}, {513, 128}}, &check_router_stats}};
const test::OpCheckRegistration reg_route{{"moe_route", 0, kRoute, &check_route}};
const test::OpCheckRegistration reg_aux{{"moe_aux_loss_backward", 1e-6, {{1, 4}, {48, 128}}, &check_aux_backward}};
const test::OpCheckRegistration reg_perm_f{
    {"moe_permute_forward", 1e-2, kRows, [](const test::OpShape& s, std::mt19937_64& r) { return check_permute(s, r, true); }}};
const test::OpCheckRegistration reg_perm_b{
    {"moe_permute_backward", 1e-2, kRows, [](const test::OpShape& s, std::mt19937_64& r) { return check_permute(s, r, false); }}};
const test::OpCheckRegistration reg_unperm_f{
    {"moe_unpermute_forward", 1e-2, kRows, [](const test::OpShape& s, std::mt19937_64& r) { return check_unpermute(s, r, true); }}};
const test::OpCheckRegistration reg_unperm_b{
    {"moe_unpermute_backward", 1e-2, kRows, [](const test::OpShape& s, std::mt19937_64& r) { return check_unpermute(s, r, false); }}};
const test::OpCheckRegistration reg_gemm_f{{"moe_grouped_linear_forward", 1e-2, kGemm,
                                            [](const test::OpShape& s, std::mt19937_64& r) { return check_grouped(s, r, true, false); }}};
const test::OpCheckRegistration reg_gemm_b{{"moe_grouped_linear_backward", 1e-2, kGemm,
                                            [](const test::OpShape& s, std::mt19937_64& r) { return check_grouped(s, r, false, false); }}};
// The few-rows kernel's variants one by one (the forward runs one of them): IC a multiple of 8.
double check_few_rows(const test::OpShape& s, std::mt19937_64& rng, int variant) {
  const int T = int(s[0]), E = int(s[1]), k = int(s[2]), IC = int(s[3]), OC = int(s[4]), N = T * k;
  const Plan p = make_plan(T, E, k, s[5] != 0, rng);
  std::vector<float> x = test::random_vector(int64_t(N) * IC, rng), w = test::random_vector(int64_t(E) * OC * IC, rng, 0.05f);
  test::DeviceBuffer<bf16> bx(int64_t(N) * IC), bw(int64_t(E) * OC * IC), bout(int64_t(N) * OC);
  test::DeviceBuffer<int32_t> bo(E + 1);
  bx.upload(x);
  bw.upload(w);
  bo.upload_raw(p.offsets);
  bout.poison();
  test::inputs_ready();
  hone::cuda::moe_grouped_linear_forward_few_rows(variant, bout.get(), bx.get(), bw.get(), bo.get(), E, IC, OC,
                                                  test::check_context());
  std::vector<float> out(size_t(N) * OC);
  hone::cpu::moe_grouped_linear_forward(out.data(), x.data(), w.data(), p.offsets.data(), E, IC, OC);
  return test::rel_l2(bout.download(), out);
}
const std::vector<test::OpShape> kFewRows = {{5, 4, 2, 16, 16, 0},   {37, 8, 2, 40, 24, 0},   {64, 8, 2, 64, 96, 1},
                                             {100, 8, 2, 64, 200, 1}, {300, 32, 4, 768, 2048, 0},
                                             {512, 128, 8, 2048, 768, 0}};
const test::OpCheckRegistration reg_few_0{{"moe_grouped_linear_forward_few_rows_0", 1e-2, kFewRows,
                                           [](const test::OpShape& s, std::mt19937_64& r) { return check_few_rows(s, r, 0); }}};
const test::OpCheckRegistration reg_few_1{{"moe_grouped_linear_forward_few_rows_1", 1e-2, kFewRows,
                                           [](const test::OpShape& s, std::mt19937_64& r) { return check_few_rows(s, r, 1); }}};
const test::OpCheckRegistration reg_few_2{{"moe_grouped_linear_forward_few_rows_2", 1e-2, kFewRows,
                                           [](const test::OpShape& s, std::mt19937_64& r) { return check_few_rows(s, r, 2); }}};
const test::OpCheckRegistration reg_few_3{{"moe_grouped_linear_forward_few_rows_3", 1e-2, kFewRows,
                                           [](const test::OpShape& s, std::mt19937_64& r) { return check_few_rows(s, r, 3); }}};
const test::OpCheckRegistration reg_few_4{{"moe_grouped_linear_forward_few_rows_4", 1e-2, kFewRows,
                                           [](const test::OpShape& s, std::mt19937_64& r) { return check_few_rows(s, r, 4); }}};
const test::OpCheckRegistration reg_cublas_f{
    {"moe_grouped_linear_forward_cublas", 1e-2, kGemm,
     [](const test::OpShape& s, std::mt19937_64& r) { return check_grouped(s, r, true, true); }}};
const test::OpCheckRegistration reg_cublas_b{
    {"moe_grouped_linear_backward_cublas", 1e-2, kGemm,
     [](const test::OpShape& s, std::mt19937_64& r) { return check_grouped(s, r, false, true); }}};

}  // namespace
#endif  // HONE_CUDA
