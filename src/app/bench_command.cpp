// `hone bench`: the GPU engine's speed at a real model shape with random weights: a bf16 GEMM ceiling and the
// device copy bandwidth (the roofline), then the logprob pass, the training step (forward + backward + clip +
// AdamW) and the refit cast over 512 sequences of 640 tokens packed into micro-batches, all timed with CUDA events
// after a warm-up; then the causal attention of one sequence of seq-len tokens alone (cuDNN forward and backward, the
// best of the repetitions) against the attention inside the model (with --profile). Prints a table and writes
// out/bench-<shape>.h5. See doc/performance.md.
// A mixture of experts (qwen3-30b-a3b) is cut to bench.layers of its layers (0: as many as fit next to the
// optimizer state), counts FLOPs on the parameters a token computes with (k of the E experts), times the experts'
// GEMMs (our one-launch kernel and a cuBLAS GEMM per expert) against the dense GEMM ceiling, and projects its
// per-layer time to the whole model, on one GPU and on eight (expert parallelism's all-to-all not counted).
//
//   hone bench [deck.toml | qwen3-0.6b | qwen3-1.7b | llama-3.2-1b | qwen3-30b-a3b] [--micro-batch-tokens 16384]
//              [--sequences 512] [--seq-len 640] [--reps 10] [--layers N] [--recompute [none|selective|full]]
//              [--profile]
//              [--output-dir out]
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <numeric>
#include <random>
#include <string>
#include <tuple>
#include <vector>

#include "io/hdf5_file.h"
#include "app/bench_args.h"
#include "model/model_config.h"
#include "model/packed_batch.h"
#include "model/recompute.h"
#include "model/param_table.h"
#include "ops/ops.h"
#include "model/weights.h"
#include "runtime/command.h"
#include "runtime/error.h"

#if HONE_CUDA
#include "cuda/check.h"
#include "cuda/moe_ops.h"
#include "backend/gpu_device_select.h"
#include "backend/op_profiler.h"
#include "model/transformer.h"
#include "train/all_reduce_adamw.h"
#endif

namespace hone {
namespace {

const char* kUsage =
    "usage: hone bench [deck.toml | qwen3-0.6b | qwen3-1.7b | llama-3.2-1b | qwen3-30b-a3b]\n"
    "                  [--micro-batch-tokens 16384] [--sequences 512] [--seq-len 640] [--reps 10] [--layers N]\n"
    "                  [--recompute [none|selective|full]] [--profile] [--output-dir out]\n"
    "  GPU engine speed at a model shape (a deck's, or a named one): logprob pass, training step, refit, and the\n"
    "  attention of one sequence alone. --recompute alone is full. --layers cuts the model to its first N layers\n"
    "  (0: the shape's; a mixture of experts: as many as fit). Needs a CUDA build and a GPU.\n";

#if HONE_CUDA

// Median of per-repetition times (ms) of fn, timed with CUDA events after `warmup` untimed calls.
template <typename Fn>
double median_ms(int reps, int warmup, cudaStream_t stream, Fn fn) {
  for (int i = 0; i < warmup; ++i) fn();
  cudaEvent_t a, b;
  CUDA_CHECK(cudaEventCreate(&a));
  CUDA_CHECK(cudaEventCreate(&b));
  std::vector<double> ms;
  for (int i = 0; i < reps; ++i) {
    CUDA_CHECK(cudaEventRecord(a, stream));
    fn();
    CUDA_CHECK(cudaEventRecord(b, stream));
    CUDA_CHECK(cudaEventSynchronize(b));
    float t = 0.f;
    CUDA_CHECK(cudaEventElapsedTime(&t, a, b));
    ms.push_back(double(t));
  }
  cudaEventDestroy(a);
  cudaEventDestroy(b);
  std::sort(ms.begin(), ms.end());
  return ms[ms.size() / 2];
}

// Fills n device floats with normal(0, std) values: a random host block tiled over the buffer (enough for timing).
void fill_random(float* dst, int64_t n, float std, uint64_t seed, cudaStream_t stream) {
  const int64_t block = std::min<int64_t>(n, (int64_t(1) << 20) + 7);
  std::mt19937_64 rng(seed);
  std::normal_distribution<float> nd(0.f, std);
  std::vector<float> host(static_cast<size_t>(block));
  for (float& x : host) x = nd(rng);
  CUDA_CHECK(cudaMemcpyAsync(dst, host.data(), size_t(block) * 4, cudaMemcpyHostToDevice, stream));
  for (int64_t off = block; off < n; off += block)
    CUDA_CHECK(cudaMemcpyAsync(dst + off, dst, size_t(std::min(block, n - off)) * 4, cudaMemcpyDeviceToDevice, stream));
  CUDA_CHECK(cudaStreamSynchronize(stream));
}

struct PhaseResult {
  double ms = 0, tokens = 0, flops = 0;
  size_t arena_peak = 0, device_in_use = 0;
  double tokens_per_s() const { return tokens / (ms * 1e-3); }
  double tflops() const { return flops / (ms * 1e-3) / 1e12; }
};

double gib(size_t b) { return double(b) / double(size_t(1) << 30); }

void print_profile(const char* phase, const GpuOpProfiler& p, Hdf5File& h5) {
  double total = 0;
  for (const auto& [name, ms] : p.totals_ms()) total += ms;
  std::printf("  %s: per-op time (ms, share of the op total %.1f ms)\n", phase, total);
  for (const auto& [name, ms] : p.totals_ms()) {
    std::printf("    %-22s %10.2f  %5.1f%%\n", name.c_str(), ms, total > 0 ? 100.0 * ms / total : 0.0);
    const float v = float(ms);
    h5.write_f32(cat("/profile/", phase, "/", name, "_ms"), &v, 1);
  }
}

// The layers of c that fit on this GPU next to the optimizer: bf16 compute weights and the fp32 master weights,
// gradients and two moments (18 bytes a parameter), with a third of the free memory left to activations.
int layers_that_fit(ModelConfig c) {
  size_t free_b = 0, total_b = 0;
  CUDA_CHECK(cudaMemGetInfo(&free_b, &total_b));
  const int whole = c.num_hidden_layers;
  c.num_hidden_layers = 1;
  const int64_t one = count_parameters(c);
  c.num_hidden_layers = 2;
  const int64_t per_layer = count_parameters(c) - one, rest = one - per_layer;
  const double fit = (0.66 * double(free_b) - 18.0 * double(rest)) / (18.0 * double(per_layer));
  return std::clamp(int(fit), 1, whole);
}

// The experts' grouped GEMMs of one micro-batch of T tokens with a random routing (k distinct experts a token),
// timed for both of a layer's shapes (C -> Im: gate and up; Im -> C: down), forward and backward (dx and dw), our
// kernel and a cuBLAS GEMM per expert.
struct GroupedGemm {
  double ms[2][2][2] = {};  // [shape][forward, backward][kernel, cublas]
  double flops[2][2] = {};  // [shape][forward, backward]
};
GroupedGemm bench_grouped_gemm(const ModelConfig& c, int T, int reps, const cuda::GpuContext& ctx) {
  const int E = c.num_experts, k = c.num_experts_per_tok, C = c.hidden_size, Im = c.moe_intermediate_size;
  const int N = T * k;
  std::mt19937 rng(11);
  std::vector<int32_t> idx(static_cast<size_t>(N)), perm(static_cast<size_t>(E));
  for (int t = 0; t < T; ++t) {
    std::iota(perm.begin(), perm.end(), 0);
    for (int j = 0; j < k; ++j) {
      std::swap(perm[size_t(j)], perm[size_t(j) + rng() % size_t(E - j)]);
      idx[size_t(t) * k + size_t(j)] = perm[size_t(j)];
    }
  }
  std::vector<int32_t> offsets(size_t(E) + 1), row_of(static_cast<size_t>(N)), token_of(static_cast<size_t>(N));
  cpu::moe_route(offsets.data(), row_of.data(), token_of.data(), idx.data(), T, k, E);
  DeviceArray<int32_t> d_off(E + 1);
  CUDA_CHECK(cudaMemcpy(d_off.get(), offsets.data(), offsets.size() * 4, cudaMemcpyHostToDevice));
  GroupedGemm r;
  for (int shape = 0; shape < 2; ++shape) {
    const int IC = shape == 0 ? C : Im, OC = shape == 0 ? Im : C;
    DeviceArray<float> tmp(std::max<int64_t>(int64_t(N) * std::max(IC, OC), int64_t(E) * IC * OC));
    fill_random(tmp.get(), tmp.size(), 1.f, 5, ctx.stream);
    DeviceArray<bf16> x(int64_t(N) * IC), w(int64_t(E) * OC * IC), out(int64_t(N) * OC), dx(int64_t(N) * IC);
    DeviceArray<float> dw(int64_t(E) * OC * IC);
    cuda::f32_to_bf16(x.get(), tmp.get(), x.size(), ctx);
    cuda::f32_to_bf16(w.get(), tmp.get(), w.size(), ctx);
    cuda::f32_to_bf16(out.get(), tmp.get(), out.size(), ctx);
    CUDA_CHECK(cudaMemsetAsync(dx.get(), 0, dx.bytes(), ctx.stream));
    CUDA_CHECK(cudaMemsetAsync(dw.get(), 0, dw.bytes(), ctx.stream));
    r.flops[shape][0] = 2.0 * N * double(IC) * OC;
    r.flops[shape][1] = 4.0 * N * double(IC) * OC;
    r.ms[shape][0][0] = median_ms(reps, 2, ctx.stream, [&] {
      cuda::moe_grouped_linear_forward(out.get(), x.get(), w.get(), d_off.get(), E, IC, OC, N, ctx);
    });
    r.ms[shape][0][1] = median_ms(reps, 2, ctx.stream, [&] {
      cuda::moe_grouped_linear_forward_cublas(out.get(), x.get(), w.get(), offsets.data(), E, IC, OC, ctx);
    });
    r.ms[shape][1][0] = median_ms(reps, 2, ctx.stream, [&] {
      cuda::moe_grouped_linear_backward(dx.get(), dw.get(), out.get(), x.get(), w.get(), d_off.get(), E, IC, OC, N,
                                        ctx);
    });
    r.ms[shape][1][1] = median_ms(reps, 2, ctx.stream, [&] {
      cuda::moe_grouped_linear_backward_cublas(dx.get(), dw.get(), out.get(), x.get(), w.get(), offsets.data(), E, IC,
                                               OC, ctx);
    });
  }
  return r;
}

// The roofline: the bf16 GEMM ceiling (8192^3, cuBLASLt) and the device copy bandwidth (1 GiB, read + write).
struct Roofline {
  double gemm_ms = 0, gemm_tflops = 0, copy_gbps = 0;
};
Roofline measure_roofline(int reps, const cuda::GpuContext& ctx) {
  Roofline r;
  const int G = 8192;
  {
    DeviceArray<bf16> ga(int64_t(G) * G), gb(int64_t(G) * G), gc(int64_t(G) * G);
    {
      DeviceArray<float> tmp(int64_t(G) * G);
      fill_random(tmp.get(), tmp.size(), 1.f, 1, ctx.stream);
      cuda::f32_to_bf16(ga.get(), tmp.get(), tmp.size(), ctx);
      cuda::f32_to_bf16(gb.get(), tmp.get(), tmp.size(), ctx);
      CUDA_CHECK(cudaStreamSynchronize(ctx.stream));
    }
    r.gemm_ms = median_ms(reps, 3, ctx.stream, [&] {
      cuda::linear_forward(gc.get(), ga.get(), gb.get(), nullptr, G, G, G, ctx);
    });
  }
  r.gemm_tflops = 2.0 * G * double(G) * G / (r.gemm_ms * 1e-3) / 1e12;
  const size_t copy_bytes = size_t(1) << 30;
  {
    DeviceArray<char> src{int64_t(copy_bytes)}, dst{int64_t(copy_bytes)};
    CUDA_CHECK(cudaMemsetAsync(src.get(), 1, copy_bytes, ctx.stream));
    const double copy_ms = median_ms(reps, 2, ctx.stream, [&] {
      CUDA_CHECK(cudaMemcpyAsync(dst.get(), src.get(), copy_bytes, cudaMemcpyDeviceToDevice, ctx.stream));
    });
    r.copy_gbps = 2.0 * double(copy_bytes) / (copy_ms * 1e-3) / 1e9;
  }
  std::printf("  roofline: bf16 GEMM %d^3 %.3f ms = %.1f TFLOP/s; device copy %.0f GB/s (read + write)\n", G, r.gemm_ms,
              r.gemm_tflops, r.copy_gbps);
  return r;
}

// A mixture of experts: the experts' grouped GEMMs at the micro-batch's tokens (at most 16,384), printed against
// the dense ceiling.
GroupedGemm bench_experts(const ModelConfig& c, const BenchArgs& a, const Roofline& roof,
                          const cuda::GpuContext& ctx) {
  const int64_t tokens = std::min<int64_t>(a.micro_batch_tokens, 16384);
  GroupedGemm gg = bench_grouped_gemm(c, int(tokens), a.reps, ctx);
  std::printf("  experts' grouped GEMMs, %lld tokens x %d of %d experts (TFLOP/s, share of the dense ceiling; the\n"
              "  model runs cuBLAS per expert from 64 rows an expert on average, the kernel in decode steps):\n",
              (long long)tokens, c.num_experts_per_tok, c.num_experts);
  const char* shapes[2] = {"gate/up (C -> Im)", "down (Im -> C)"};
  for (int sh = 0; sh < 2; ++sh)
    for (int dir = 0; dir < 2; ++dir) {
      const double kt = gg.flops[sh][dir] / (gg.ms[sh][dir][0] * 1e-3) / 1e12;
      const double ct = gg.flops[sh][dir] / (gg.ms[sh][dir][1] * 1e-3) / 1e12;
      std::printf("    %-18s %-8s kernel %7.1f (%5.1f%%)   cuBLAS per expert %7.1f (%5.1f%%)\n", shapes[sh],
                  dir == 0 ? "forward" : "backward", kt, 100.0 * kt / roof.gemm_tflops, ct,
                  100.0 * ct / roof.gemm_tflops);
    }
  return gg;
}

// The model and its optimizer with random weights (norm weights 1), the compute weights refitted from them.
struct BenchModel {
  std::unique_ptr<AllReduceAdamW<CudaBackend>> opt;  // one GPU: no communicator
  std::unique_ptr<GpuTransformer> model;
};
BenchModel make_bench_model(const ModelConfig& c, const BenchArgs& a, const cuda::GpuContext& ctx) {
  BenchModel m;
  const ModelWeights layout = allocate_weights(c);
  m.opt = std::make_unique<AllReduceAdamW<CudaBackend>>(layout, AdamWConfig{}, nullptr, DataParallelOptions{},
                                                        CudaBackend::Exec(ctx));
  m.model = std::make_unique<GpuTransformer>(c, ParamLayout::of(c), ctx, int(a.micro_batch_tokens));
  fill_random(m.opt->master(), m.opt->num_params(), 0.02f, 2, ctx.stream);
  for (const auto& [name, t] : layout.named_parameters()) {
    if (name.find("norm") == std::string::npos) continue;
    const std::vector<float> ones(size_t(t.numel()), 1.f);
    CUDA_CHECK(cudaMemcpy(m.opt->master() + (t.f32() - layout.flat.f32()), ones.data(), ones.size() * 4,
                          cudaMemcpyHostToDevice));
  }
  m.model->set_recompute(a.recompute);
  m.opt->refit(m.model->weights());
  return m;
}

// Random sequences packed into micro-batches, with their token count and the causal attention's forward FLOPs.
struct BenchBatches {
  std::vector<PackedBatch> batches;
  int max_T = 0;
  double tokens = 0, attn_fwd_flops = 0;
};
BenchBatches make_bench_batches(const ModelConfig& c, const BenchArgs& a) {
  BenchBatches r;
  std::mt19937 rng(3);
  std::uniform_int_distribution<int> ud(0, c.vocab_size - 1);
  std::vector<std::vector<int32_t>> seqs(size_t(a.sequences), std::vector<int32_t>(size_t(a.seq_len)));
  for (auto& s : seqs)
    for (auto& x : s) x = ud(rng);
  const std::vector<int> lengths(size_t(a.sequences), a.seq_len);
  for (const auto& [b, e] : split_by_tokens(lengths, a.micro_batch_tokens)) {
    r.batches.push_back(PackedBatch::pack(std::vector<std::vector<int32_t>>(seqs.begin() + b, seqs.begin() + e)));
    r.max_T = std::max(r.max_T, r.batches.back().num_tokens());
  }
  for (int n : lengths) {
    r.tokens += n;
    r.attn_fwd_flops += 2.0 * double(c.head_dim) * double(n) * double(n + 1) * double(c.num_attention_heads) *
                        double(c.num_hidden_layers);
  }
  std::printf("  %d sequences x %d tokens in %zu micro-batches of <= %lld tokens, recompute %s\n", a.sequences,
              a.seq_len, r.batches.size(), (long long)a.micro_batch_tokens, recompute_name(a.recompute));
  return r;
}

// The timed phases: a logprob pass and a training step over every micro-batch (CUDA events around each, after a
// warm-up of both), and the refit cast (median of the repetitions).
struct BenchTimes {
  PhaseResult lp, tr;
  double refit_ms = 0, refit_gbps = 0;
};
BenchTimes time_phases(BenchModel& m, const BenchBatches& bb, const float* dlogprob, double matmul_params, int reps,
                       const cuda::GpuContext& ctx) {
  GpuTransformer& model = *m.model;
  AllReduceAdamW<CudaBackend>& opt = *m.opt;
  cudaEvent_t ev0, ev1;
  CUDA_CHECK(cudaEventCreate(&ev0));
  CUDA_CHECK(cudaEventCreate(&ev1));
  auto timed = [&](auto fn) {
    CUDA_CHECK(cudaEventRecord(ev0, ctx.stream));
    fn();
    CUDA_CHECK(cudaEventRecord(ev1, ctx.stream));
    CUDA_CHECK(cudaEventSynchronize(ev1));
    float ms = 0;
    CUDA_CHECK(cudaEventElapsedTime(&ms, ev0, ev1));
    return double(ms);
  };
  // Warm-up (plans, algorithm choices, first-touch).
  model.forward(bb.batches[0], 1.f, false, false);
  model.forward(bb.batches[0], 1.f, false);
  model.backward(dlogprob, nullptr, opt.grads());
  CUDA_CHECK(cudaStreamSynchronize(ctx.stream));

  BenchTimes t;
  model.reset_peaks();
  t.lp.ms = timed([&] {
    for (const PackedBatch& b : bb.batches) model.forward(b, 1.f, false, /*need_backward=*/false);
  });
  t.lp.tokens = bb.tokens;
  t.lp.flops = 2.0 * matmul_params * bb.tokens + bb.attn_fwd_flops;
  t.lp.arena_peak = model.forward_arena_peak();
  t.lp.device_in_use = cuda::device_memory_info().used_bytes();

  model.reset_peaks();
  t.tr.ms = timed([&] {
    opt.zero_grads();
    for (const PackedBatch& b : bb.batches) {
      model.forward(b, 1.f, false);
      model.backward(dlogprob, nullptr, opt.grads());
    }
    opt.update(1e-7f, 1.0);
  });
  t.tr.tokens = bb.tokens;
  t.tr.flops = 6.0 * matmul_params * bb.tokens + 3.0 * bb.attn_fwd_flops;
  t.tr.arena_peak = model.forward_arena_peak() + model.backward_arena_peak();
  t.tr.device_in_use = cuda::device_memory_info().used_bytes();
  CUDA_CHECK(cudaEventDestroy(ev0));
  CUDA_CHECK(cudaEventDestroy(ev1));

  t.refit_ms = median_ms(reps, 2, ctx.stream, [&] { opt.refit(model.weights()); });
  t.refit_gbps = double(opt.num_params()) * 6.0 / (t.refit_ms * 1e-3) / 1e9;
  return t;
}

void print_phases(const BenchTimes& t, int64_t num_params) {
  const size_t static_bytes = size_t(num_params) * (4 * 4 + 2);
  std::printf("\n  %-10s %12s %14s %12s %14s %16s\n", "phase", "time (ms)", "tokens/s", "TFLOP/s", "arena (GiB)",
              "device used (GiB)");
  for (const auto& [name, r] : {std::pair<const char*, const PhaseResult&>{"logprob", t.lp}, {"training", t.tr}})
    std::printf("  %-10s %12.1f %14.0f %12.1f %14.2f %16.2f\n", name, r.ms, r.tokens_per_s(), r.tflops(),
                gib(r.arena_peak), gib(r.device_in_use));
  std::printf("  %-10s %12.3f %14s %12s %14s %16s   (%.0f GB/s)\n", "refit", t.refit_ms, "-", "-", "-", "-",
              t.refit_gbps);
  std::printf("  weights + gradients + Adam moments + bf16 copy: %.2f GiB\n", gib(static_bytes));
}

// A mixture of experts cut to L of its shape_layers layers: the layers' share of each phase (the embedding and LM
// head's from a profiled run), per layer and projected to the whole model: on one GPU (were it to fit), and on eight
// holding 1/8 of the experts each with eight times the tokens (the all-to-all of expert parallelism not counted).
struct MoeProjection {
  double per_layer_ms[2] = {0, 0}, whole_ms[2] = {0, 0}, tokens_per_s_8[2] = {0, 0};
};
MoeProjection project_moe(BenchModel& m, const BenchBatches& bb, const float* dlogprob, const BenchTimes& t,
                          double matmul_params, double layer_matmul, int L, int shape_layers,
                          const cuda::GpuContext& ctx) {
  double head_share[2] = {0, 0};
  GpuOpProfiler prof(ctx.stream);
  m.model->set_profiler(&prof);
  for (int phase = 0; phase < 2; ++phase) {
    prof.clear();
    if (phase == 1) m.opt->zero_grads();
    for (const PackedBatch& b : bb.batches) {
      m.model->forward(b, 1.f, false, /*need_backward=*/phase == 1);
      if (phase == 1) m.model->backward(dlogprob, nullptr, m.opt->grads());
      prof.collect();
    }
    double total = 0, head = 0;
    for (const auto& [name, ms] : prof.totals_ms()) {
      total += ms;
      if (name.rfind("lm_head", 0) == 0 || name.rfind("embedding", 0) == 0) head += ms;
    }
    head_share[phase] = total > 0 ? head / total : 0;
  }
  m.model->set_profiler(nullptr);
  std::printf("\n  per layer and projected to all %d layers (the embedding and LM head: %.1f%% / %.1f%% of the "
              "phases here):\n",
              shape_layers, 100 * head_share[0], 100 * head_share[1]);
  MoeProjection p;
  for (int phase = 0; phase < 2; ++phase) {
    const PhaseResult& r = phase == 0 ? t.lp : t.tr;
    p.per_layer_ms[phase] = r.ms * (1 - head_share[phase]) / double(L);
    p.whole_ms[phase] = p.per_layer_ms[phase] * shape_layers + r.ms * head_share[phase];
    p.tokens_per_s_8[phase] = 8 * r.tokens / (p.whole_ms[phase] * 1e-3);
    const double whole_flops = r.flops / matmul_params * (matmul_params + layer_matmul * double(shape_layers - L));
    std::printf("    %-9s %8.2f ms a layer; %d layers: %9.1f ms, %8.0f tokens/s on one GPU, %9.0f tokens/s on "
                "eight (%.1f TFLOP/s a GPU)\n",
                phase == 0 ? "logprob" : "training", p.per_layer_ms[phase], shape_layers, p.whole_ms[phase],
                r.tokens / (p.whole_ms[phase] * 1e-3), p.tokens_per_s_8[phase],
                whole_flops / (p.whole_ms[phase] * 1e-3) / 1e12);
  }
  return p;
}

void put(Hdf5File& h5, const std::string& name, double v) {
  const float f = float(v);
  h5.write_f32(name, &f, 1);
}

// The numbers above in the output file.
void write_results(Hdf5File& h5, const BenchArgs& a, const cudaDeviceProp& prop, const ModelConfig& c,
                   int shape_layers, double matmul_params, const Roofline& roof, const BenchTimes& t,
                   const GroupedGemm& gg, const MoeProjection& moe) {
  h5.set_attribute("/", "shape", a.shape);
  h5.set_attribute("/", "device", prop.name);
  h5.set_attribute("/", "flop_count",
                   "logprob 2*P*tokens + causal attention forward; training 6*P*tokens + 3x attention forward; "
                   "P = matmul parameters incl. the LM head, tied embedding counted once");
  put(h5, "/config/sequences", a.sequences);
  put(h5, "/config/seq_len", a.seq_len);
  put(h5, "/config/micro_batch_tokens", double(a.micro_batch_tokens));
  put(h5, "/config/recompute", double(int(a.recompute)));  // 0 none, 1 selective, 2 full
  h5.set_attribute("/", "recompute", recompute_name(a.recompute));
  put(h5, "/config/matmul_params", matmul_params);
  put(h5, "/roofline/gemm_ms", roof.gemm_ms);
  put(h5, "/roofline/gemm_tflops", roof.gemm_tflops);
  put(h5, "/roofline/copy_gbps", roof.copy_gbps);
  for (const auto& [name, r] : {std::pair<const char*, const PhaseResult&>{"logprob", t.lp}, {"training", t.tr}}) {
    put(h5, cat("/", name, "/ms"), r.ms);
    put(h5, cat("/", name, "/tokens_per_s"), r.tokens_per_s());
    put(h5, cat("/", name, "/tflops"), r.tflops());
    put(h5, cat("/", name, "/arena_peak_gib"), gib(r.arena_peak));
    put(h5, cat("/", name, "/device_in_use_gib"), gib(r.device_in_use));
  }
  put(h5, "/refit/ms", t.refit_ms);
  put(h5, "/refit/gbps", t.refit_gbps);
  put(h5, "/config/layers", double(c.num_hidden_layers));
  if (!c.is_moe()) return;
  put(h5, "/config/shape_layers", shape_layers);
  const char* shapes[2] = {"up", "down"};
  for (int sh = 0; sh < 2; ++sh)
    for (int dir = 0; dir < 2; ++dir)
      for (int impl = 0; impl < 2; ++impl) {
        const double tf = gg.flops[sh][dir] / (gg.ms[sh][dir][impl] * 1e-3) / 1e12;
        const std::string name = cat("/grouped_gemm/", shapes[sh], "_", dir == 0 ? "forward" : "backward", "_",
                                     impl == 0 ? "kernel" : "cublas");
        put(h5, name + "_tflops", tf);
        put(h5, name + "_of_ceiling", tf / roof.gemm_tflops);
      }
  for (int phase = 0; phase < 2; ++phase) {
    const std::string p = phase == 0 ? "/logprob" : "/training";
    put(h5, p + "/ms_per_layer", moe.per_layer_ms[phase]);
    put(h5, p + "/projected_ms_all_layers", moe.whole_ms[phase]);
    put(h5, p + "/projected_tokens_per_s_8_gpus", moe.tokens_per_s_8[phase]);
  }
}

// --profile: per-op-family times of both phases, and the attention's TFLOP/s inside the model (a backward of 2.5
// times the forward's FLOPs).
void profile_phases(BenchModel& m, const BenchBatches& bb, const float* dlogprob, Hdf5File& h5,
                    const cuda::GpuContext& ctx) {
  auto family_ms = [](const GpuOpProfiler& p, const char* name) {
    for (const auto& [n, ms] : p.totals_ms())
      if (n == name) return ms;
    return 0.0;
  };
  GpuOpProfiler prof(ctx.stream);
  m.model->set_profiler(&prof);
  for (const PackedBatch& b : bb.batches) {
    m.model->forward(b, 1.f, false, /*need_backward=*/false);
    prof.collect();
  }
  std::printf("\n");
  print_profile("logprob", prof, h5);
  const double fwd_ms = family_ms(prof, "attention");
  prof.clear();
  m.opt->zero_grads();
  for (const PackedBatch& b : bb.batches) {
    m.model->forward(b, 1.f, false);
    m.model->backward(dlogprob, nullptr, m.opt->grads());
    prof.collect();
  }
  print_profile("training", prof, h5);
  const double bwd_ms = family_ms(prof, "attention_backward");
  m.model->set_profiler(nullptr);
  if (fwd_ms > 0 && bwd_ms > 0) {
    const double fwd = bb.attn_fwd_flops / (fwd_ms * 1e-3) / 1e12;
    const double bwd = 2.5 * bb.attn_fwd_flops / (bwd_ms * 1e-3) / 1e12;
    std::printf("  attention in the model: forward %.1f TFLOP/s, backward %.1f TFLOP/s\n", fwd, bwd);
    put(h5, "/attention/model_forward_tflops", fwd);
    put(h5, "/attention/model_backward_tflops", bwd);
  }
}

// The model's attention alone: one causal sequence of seq_len tokens through cuDNN, the best of the repetitions.
void bench_attention_alone(const ModelConfig& c, const BenchArgs& a, Hdf5File& h5, const cuda::GpuContext& ctx) {
  const int S = a.seq_len;
  const int64_t Hq = c.num_attention_heads, D = c.head_dim;
  const int64_t nq = int64_t(S) * Hq * D, nkv = int64_t(S) * c.num_key_value_heads * D;
  DeviceArray<bf16> q(nq), k(nkv), v(nkv), o(nq), dout(nq), dq(nq), dk(nkv), dv(nkv);
  DeviceArray<float> lse(int64_t(Hq) * S), tmp(std::max(nq, nkv));
  DeviceArray<int32_t> cu(2);
  const int32_t cu_host[2] = {0, S};
  CUDA_CHECK(cudaMemcpy(cu.get(), cu_host, sizeof cu_host, cudaMemcpyHostToDevice));
  for (auto [dst, n, seed] :
       {std::tuple{&q, nq, 11}, std::tuple{&k, nkv, 12}, std::tuple{&v, nkv, 13}, std::tuple{&dout, nq, 14}}) {
    fill_random(tmp.get(), n, 1.f, uint64_t(seed), ctx.stream);
    cuda::f32_to_bf16(dst->get(), tmp.get(), n, ctx);
  }
  const int Hkv = c.num_key_value_heads;
  const float scale = 1.f / std::sqrt(float(D));
  auto best_ms = [&](auto fn) {
    fn();  // plan and warm-up
    double best = 1e30;
    for (int r = 0; r < a.reps; ++r) best = std::min(best, median_ms(1, 0, ctx.stream, fn));
    return best;
  };
  const double f_ms = best_ms([&] {
    cuda::attention_forward(o.get(), lse.get(), q.get(), k.get(), v.get(), cu.get(), 1, S, S, int(Hq), Hkv, int(D),
                            scale, ctx);
  });
  const double b_ms = best_ms([&] {
    cuda::attention_backward(dq.get(), dk.get(), dv.get(), dout.get(), o.get(), lse.get(), q.get(), k.get(), v.get(),
                             cu.get(), 1, S, S, int(Hq), Hkv, int(D), scale, ctx);
  });
  const double flops = 2.0 * double(D) * double(S) * double(S + 1) * double(Hq);  // one layer's causal forward
  const double fwd = flops / (f_ms * 1e-3) / 1e12, bwd = 2.5 * flops / (b_ms * 1e-3) / 1e12;
  std::printf("  attention alone (cuDNN, one sequence of %d tokens, %lld heads): forward %.3f ms = %.1f TFLOP/s, "
              "backward %.3f ms = %.1f TFLOP/s\n",
              S, (long long)Hq, f_ms, fwd, b_ms, bwd);
  put(h5, "/attention/alone_forward_ms", f_ms);
  put(h5, "/attention/alone_backward_ms", b_ms);
  put(h5, "/attention/alone_forward_tflops", fwd);
  put(h5, "/attention/alone_backward_tflops", bwd);
}

// The whole benchmark, section by section.
int run_bench_cuda(const BenchArgs& a) {
  ModelConfig c = bench_shape(a.shape);
  cuda::GpuContext ctx = cuda::create_gpu_context(0);
  cudaDeviceProp prop{};
  CUDA_CHECK(cudaGetDeviceProperties(&prop, 0));
  const int shape_layers = c.num_hidden_layers;
  if (a.layers > 0) c.num_hidden_layers = std::min(a.layers, shape_layers);
  else if (c.is_moe()) c.num_hidden_layers = layers_that_fit(c);
  const int64_t C = c.hidden_size, Q = c.q_dim(), K = c.kv_dim(), I = c.intermediate_size, L = c.num_hidden_layers;
  const int64_t V = c.vocab_size;
  // Model FLOPs count the matrix multiplications: every layer's projections and the LM head (V x C, real work
  // even when tied); the tied embedding is counted once, as the LM head (the lookup is no FLOPs). A mixture of
  // experts counts what one token computes with: its router and its k experts (the active parameters).
  const double layer_matmul =
      c.is_moe() ? double(2 * C * Q + 2 * C * K) + double(C) * c.num_experts +
                       3.0 * double(C) * c.moe_intermediate_size * c.num_experts_per_tok
                 : double(2 * C * Q + 2 * C * K + 3 * C * I);
  const double matmul_params = double(L) * layer_matmul + double(V) * double(C);
  std::printf("hone bench: %s%s on %s (%d SMs), %lld parameters (%.0f M in matmuls incl. the LM head%s)\n",
              a.shape.c_str(), L < shape_layers ? cat(" cut to ", L, " of its ", shape_layers, " layers").c_str() : "",
              prop.name, prop.multiProcessorCount, (long long)c.num_parameters(), matmul_params / 1e6,
              c.is_moe() ? ", active: k of the experts" : "");

  const Roofline roof = measure_roofline(a.reps, ctx);
  const GroupedGemm gg = c.is_moe() ? bench_experts(c, a, roof, ctx) : GroupedGemm{};
  BenchModel m = make_bench_model(c, a, ctx);
  const BenchBatches bb = make_bench_batches(c, a);
  // The memory planner's count of one micro-batch's training arenas under each choice (rl/device_memory_plan.h).
  std::printf("  planned training arenas for %d tokens:", bb.max_T);
  for (Recompute r : {Recompute::none, Recompute::selective, Recompute::full})
    std::printf(" %s %.2f GiB", recompute_name(r), double(m.model->training_bytes(bb.max_T, r)) / double(1 << 30));
  std::printf("\n");
  const std::vector<float> dl(size_t(bb.max_T), -1.f / float(bb.tokens));
  DeviceArray<float> dlogprob(bb.max_T);
  CUDA_CHECK(cudaMemcpy(dlogprob.get(), dl.data(), dl.size() * 4, cudaMemcpyHostToDevice));

  const BenchTimes t = time_phases(m, bb, dlogprob.get(), matmul_params, a.reps, ctx);
  print_phases(t, m.opt->num_params());
  const MoeProjection moe =
      c.is_moe() ? project_moe(m, bb, dlogprob.get(), t, matmul_params, layer_matmul, int(L), shape_layers, ctx)
                 : MoeProjection{};

  std::filesystem::create_directories(a.output_dir);
  const std::string path = cat(a.output_dir, "/bench-", a.shape, ".h5");
  Hdf5File h5(path, Hdf5File::Mode::create);
  write_results(h5, a, prop, c, shape_layers, matmul_params, roof, t, gg, moe);
  if (a.profile) profile_phases(m, bb, dlogprob.get(), h5, ctx);
  m.model.reset();  // the attention alone takes the model's memory
  m.opt.reset();
  bench_attention_alone(c, a, h5, ctx);
  h5.close();
  std::printf("\n  wrote %s\n", path.c_str());
  cuda::destroy_gpu_context(ctx);
  return 0;
}

#endif  // HONE_CUDA

int run_bench(const std::vector<std::string>& args) {
  const BenchArgs a = parse_bench_args(args);
  bench_shape(a.shape);  // a bad shape is reported before anything else
#if HONE_CUDA
  usable_cuda_devices("hone bench");
  return run_bench_cuda(a);
#else
  throw UserError("bench: this hone was built without CUDA (make CUDA=1); the benchmark needs a GPU");
#endif
}

const CommandRegistration reg{{"bench", "GPU engine speed at a model shape (logprob, training, refit)", false,
                               &run_bench, kUsage}};

}  // namespace
}  // namespace hone
