// nccl_check: NCCL across ranks and GPUs, run by hand with one rank per GPU:
//   mpirun -np 2 build/tests/programs/nccl_check        (or srun --ntasks-per-node=2 --gpus-per-task=1 ...)
// Maps ranks to GPUs, bootstraps NCCL over MPI, checks every collective and type on every rank, compares the
// distributed optimizer (ZeRO-1) with the plain all-reduce + AdamW on a small GpuTransformer (each rank its own
// batch, overlapped bucket reduction), and prints the bus bandwidth of a 256 MB fp32 all-reduce as nccl-tests
// defines it (algorithm bandwidth bytes / time, times 2 (n - 1) / n). Prints PASS/FAIL lines (rank 0, results
// agreed over all ranks); exits 1 when anything failed.
#include <cstdio>

#if HONE_CUDA
#include <cuda_runtime.h>

#include <chrono>
#include <cmath>
#include <string>
#include <vector>

#include "comm/comm_factory.h"
#include "comm/mpi_comm.h"
#include "cuda/check.h"
#include "cuda/device_select.h"
#include "cuda/nccl_comm.h"
#include "model/gpu_transformer.h"
#include "model/weights.h"
#include "runtime/error.h"
#include "runtime/rank_grid.h"
#include "runtime/runtime.h"
#include "tensor/dtype.h"
#include "train/gpu_distributed_adamw.h"
#include "train/grad_reducer.h"

namespace {

int failures = 0;

// Agrees over the world (every rank's verdict) and prints one line on rank 0.
void report(hone::Comm& world, bool ok, const std::string& what) {
  int64_t bad = ok ? 0 : 1;
  world.all_reduce_sum(&bad, 1);
  if (bad) ++failures;
  if (world.rank() == 0) std::printf("%s: %s%s\n", bad ? "FAIL" : "PASS", what.c_str(),
                                     bad ? hone::cat(" (", bad, " rank(s) wrong)").c_str() : "");
  std::fflush(stdout);
}

// Small integers: exact in bf16 and in any sum over up to 16 ranks.
double value(int r, int64_t i) { return double(r + 1) + double(i % 13) - 6.0; }

template <typename T>
T make(double v) {
  if constexpr (std::is_same_v<T, uint16_t>) return hone::f32_to_bf16(float(v));
  else return T(v);
}
template <typename T>
double read(T v) {
  if constexpr (std::is_same_v<T, uint16_t>) return double(hone::bf16_to_f32(v));
  else return double(v);
}

template <typename T>
void check_collectives(hone::Comm& world, hone::NcclComm& c) {
  const int P = c.size(), me = c.rank();
  const int64_t m = 4099, n = m * P;
  const char* tn = hone::comm_type_name(hone::comm_type_of<T>());
  auto up = [](const std::vector<T>& h) {
    T* d = nullptr;
    CUDA_CHECK(cudaMalloc(&d, h.size() * sizeof(T)));
    CUDA_CHECK(cudaMemcpy(d, h.data(), h.size() * sizeof(T), cudaMemcpyHostToDevice));
    return d;
  };
  auto down = [](const T* d, int64_t k) {
    std::vector<T> h(static_cast<size_t>(k));
    CUDA_CHECK(cudaMemcpy(h.data(), d, size_t(k) * sizeof(T), cudaMemcpyDeviceToHost));
    return h;
  };
  std::vector<T> x(static_cast<size_t>(n));
  for (int64_t i = 0; i < n; ++i) x[size_t(i)] = make<T>(value(me, i));
  auto summed = [&](int64_t i) {
    double s = 0;
    for (int r = 0; r < P; ++r) s += value(r, i);
    return s;
  };
  T* dx = up(x);
  T* dy = up(std::vector<T>(size_t(n), T(0)));
  c.all_reduce_sum(dx, dy, n);
  bool ok = true;
  const std::vector<T> ar = down(dy, n);
  for (int64_t i = 0; i < n; ++i) ok = ok && read(ar[size_t(i)]) == summed(i);
  report(world, ok, hone::cat("all_reduce_sum ", tn));

  c.reduce_scatter_sum(dx, dy, m);
  const std::vector<T> rs = down(dy, m);
  ok = true;
  for (int64_t i = 0; i < m; ++i) ok = ok && read(rs[size_t(i)]) == summed(me * m + i);
  report(world, ok, hone::cat("reduce_scatter_sum ", tn));

  c.all_gather(dx, dy, m);  // block r = rank r's first m values
  const std::vector<T> ag = down(dy, n);
  ok = true;
  for (int r = 0; r < P; ++r)
    for (int64_t i = 0; i < m; ++i) ok = ok && read(ag[size_t(r * m + i)]) == value(r, i);
  report(world, ok, hone::cat("all_gather ", tn));

  c.broadcast(dx, n, P - 1);
  const std::vector<T> bc = down(dx, n);
  ok = true;
  for (int64_t i = 0; i < n; ++i) ok = ok && read(bc[size_t(i)]) == value(P - 1, i);
  report(world, ok, hone::cat("broadcast ", tn));
  CUDA_CHECK(cudaFree(dx));
  CUDA_CHECK(cudaFree(dy));
}

hone::ModelConfig small_model() {
  hone::ModelConfig c;
  c.arch = hone::Architecture::qwen3;
  c.vocab_size = 1001;
  c.hidden_size = 256;
  c.intermediate_size = 704;
  c.num_hidden_layers = 4;
  c.num_attention_heads = 4;
  c.num_key_value_heads = 2;
  c.head_dim = 64;
  c.max_position_embeddings = 512;
  c.rms_norm_eps = 1e-6f;
  c.rope.head_dim = 64;
  c.rope.theta = 1e6f;
  c.tie_word_embeddings = true;
  c.qk_norm = true;
  c.validate();
  return c;
}

void check_optimizers(hone::Comm& world, hone::NcclComm& dp, const hone::cuda::GpuContext& ctx) {
  const hone::ModelConfig cfg = small_model();
  hone::ModelWeights w = hone::allocate_weights(cfg);
  hone::init_random_weights(w, cfg, 7);
  const hone::GpuParamLayout layout = hone::GpuParamLayout::of(w);
  const int64_t n = layout.num_params;
  hone::AdamWConfig ac;
  ac.weight_decay = 0.1f;
  const hone::GpuDataParallelOptions opts{true, 1 << 20};
  hone::GpuTransformer model_z(cfg, layout, ctx, 512), model_p(cfg, layout, ctx, 512);
  model_z.upload_weights(w);
  model_p.upload_weights(w);
  hone::GpuDistributedAdamW zero(w, layout, ac, ctx, dp, opts);
  hone::GpuDataParallelAdamW plain(w, layout, ac, ctx, dp, opts);
  hone::GradReducer rz(zero, layout, ctx), rp(plain, layout, ctx);
  rz.attach(model_z);
  rp.attach(model_p);
  std::vector<std::vector<int32_t>> seqs;
  for (int s = 0; s < 4; ++s) {
    std::vector<int32_t> ids;
    for (int t = 0; t < 60 + 17 * s; ++t) ids.push_back(int32_t((t * 37 + s * 101 + dp.rank() * 211) % cfg.vocab_size));
    seqs.push_back(ids);
  }
  const hone::PackedBatch batch = hone::PackedBatch::pack(seqs);
  std::vector<float> d(size_t(batch.num_tokens()));
  for (size_t t = 0; t < d.size(); ++t) d[t] = (t % 3 == 0 ? -1.f : 0.5f) / float(d.size() * size_t(dp.size()));
  hone::DeviceArray<float> dd(int64_t(d.size()));
  CUDA_CHECK(cudaMemcpy(dd.get(), d.data(), d.size() * sizeof(float), cudaMemcpyHostToDevice));
  double norm_diff = 0;
  int launched = 0;
  for (int step = 0; step < 3; ++step) {
    const double max_norm = step == 1 ? 1e9 : 0.05;
    for (auto [model, reducer] : {std::pair{&model_z, &rz}, {&model_p, &rp}}) {
      model->forward(batch, 1.f, false);
      reducer->arm();
      model->backward(dd.get(), nullptr, model == &model_z ? zero.grads() : plain.grads());
      reducer->wait_all();
      launched += reducer->buckets_launched_during_backward();
    }
    const hone::GpuStepResult a = zero.step(1e-3f, max_norm, model_z.weights());
    const hone::GpuStepResult b = plain.step(1e-3f, max_norm, model_p.weights());
    norm_diff = std::max(norm_diff, std::abs(a.grad_norm - b.grad_norm) / b.grad_norm);
    zero.zero_grads();
    plain.adamw().zero_grads();
  }
  report(world, norm_diff < 1e-5, hone::cat("global gradient norm, distributed vs plain (rel diff ", norm_diff, ")"));
  report(world, launched > 0, hone::cat("buckets reduced during backward: ", launched));
  hone::ModelWeights mz = hone::allocate_weights(cfg), mp = hone::allocate_weights(cfg);
  zero.download_master(mz);
  plain.adamw().download_master(mp);
  double num = 0, den = 0;
  for (int64_t i = 0; i < n; ++i) {
    const double e = double(mz.flat.f32()[i]) - mp.flat.f32()[i];
    num += e * e;
    den += double(mp.flat.f32()[i]) * mp.flat.f32()[i];
  }
  const double rel = std::sqrt(num / den);
  report(world, rel < 1e-6, hone::cat("master weights after 3 steps, distributed vs plain: relative L2 ", rel));
  std::vector<uint16_t> bz(static_cast<size_t>(n)), bp(static_cast<size_t>(n));
  CUDA_CHECK(cudaMemcpy(bz.data(), model_z.weights(), size_t(n) * 2, cudaMemcpyDeviceToHost));
  CUDA_CHECK(cudaMemcpy(bp.data(), model_p.weights(), size_t(n) * 2, cudaMemcpyDeviceToHost));
  int64_t differ = 0;
  for (int64_t i = 0; i < n; ++i) differ += bz[size_t(i)] != bp[size_t(i)];
  report(world, double(differ) <= 1e-4 * double(n), hone::cat("bf16 compute weights differing: ", differ, " of ", n));
  rz.detach();
  rp.detach();
}

void bandwidth(hone::Comm& world, hone::NcclComm& c) {
  const int64_t bytes = int64_t(256) << 20, n = bytes / 4;
  float* x = nullptr;
  CUDA_CHECK(cudaMalloc(&x, size_t(bytes)));
  CUDA_CHECK(cudaMemset(x, 0, size_t(bytes)));
  for (int i = 0; i < 5; ++i) c.all_reduce_sum(x, n);
  const int iters = 20;
  world.barrier();
  const auto t0 = std::chrono::steady_clock::now();
  std::vector<hone::NcclWork> works;
  for (int i = 0; i < iters; ++i) works.push_back(c.all_reduce_sum_async(x, x, n, hone::CommType::f32, c.stream()));
  for (auto& w : works) w.wait();
  const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count() / iters;
  const double algbw = double(bytes) / s / 1e9, busbw = algbw * 2.0 * (c.size() - 1) / c.size();
  if (world.rank() == 0)
    std::printf("BANDWIDTH: all_reduce_sum 256 MB fp32 over %d ranks: %.3f ms, algbw %.1f GB/s, busbw %.1f GB/s\n",
                c.size(), s * 1e3, algbw, busbw);
  CUDA_CHECK(cudaFree(x));
}

}  // namespace

int main(int argc, char** argv) {
  return hone::run_guarded(true, &argc, &argv, [&] {
    const hone::DeviceChoice dev = hone::select_rank_device();
    (void)dev;
    const hone::RankGrid grid(hone::world_size(), 1, 1);
    hone::CommFactory factory(grid);
    auto world = factory.host(hone::CommGroup::world);
    hone::cuda::GpuContext ctx = hone::cuda::create_gpu_context(dev.device);
    {
      auto nccl = factory.device(hone::CommGroup::world, {.timeout_s = 120, .stream = ctx.stream});
      report(*world, true, hone::cat("bootstrap: NCCL communicator of ", nccl->size(), " ranks"));
      check_collectives<float>(*world, *nccl);
      check_collectives<uint16_t>(*world, *nccl);
      check_collectives<double>(*world, *nccl);
      check_collectives<int64_t>(*world, *nccl);
      auto dp = factory.device(hone::CommGroup::dp, {.timeout_s = 120, .stream = ctx.stream});
      check_optimizers(*world, *dp, ctx);
      bandwidth(*world, *nccl);
    }
    hone::cuda::destroy_gpu_context(ctx);
    if (world->rank() == 0) std::printf("%s: nccl_check, %d failure(s)\n", failures ? "FAIL" : "PASS", failures);
    return failures ? 1 : 0;
  });
}

#else

int main() {
  std::printf("SKIP: nccl_check needs a CUDA build\n");
  return 0;
}

#endif  // HONE_CUDA
