// nccl_check: NCCL across ranks and GPUs, run by hand with one rank per GPU:
//   mpirun -np 2 build/tests/programs/nccl_check        (or srun --ntasks-per-node=2 --gpus-per-task=1 ...)
// Maps ranks to GPUs, bootstraps NCCL over MPI, checks every collective and type on every rank (sums, max, min,
// all_to_all; send/recv, send_recv around a ring and all_to_allv with uneven blocks), compares the
// distributed optimizer (ZeRO-1) with the plain all-reduce + AdamW on a small GpuTransformer (each rank its own
// batch, overlapped bucket reduction; fp32 and bf16 reduction; the weighted clipping norm of a sharded model over
// many buckets), round-trips the sharded state through rank 0 (as a
// checkpoint does), offload and gradient release, checks a stream-ordered communicator (the tensor-parallel group's
// kind: bf16 all-gathers and reduce-scatters in chunks on a second stream, as the overlapped sequence-parallel
// layers issue them, the host not waiting), and prints the bus bandwidth of a 256 MB fp32 all-reduce as
// nccl-tests defines it (algorithm bandwidth bytes / time, times 2 (n - 1) / n). Prints PASS/FAIL lines (rank 0,
// results agreed over all ranks); exits 1 when anything failed.
#include <cstdio>

#if HONE_CUDA
#include <cuda_runtime.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <string>
#include <thread>
#include <vector>

#include "comm/comm_factory.h"
#include "comm/mpi_comm.h"
#include "common/compare.h"
#include "cuda/check.h"
#include "backend/gpu_device_select.h"
#include "comm/nccl_comm.h"
#include "model/transformer.h"
#include "model/weights.h"
#include "runtime/error.h"
#include "runtime/rank_grid.h"
#include "runtime/runtime.h"
#include "tensor/dtype.h"
#include "train/all_reduce_adamw.h"
#include "train/grad_reducer.h"
#include "train/sharded_adamw.h"

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

  c.all_reduce_max(dx, dy, n);  // value() grows with the rank: the last rank's is the max, rank 0's the min
  const std::vector<T> mx = down(dy, n);
  ok = true;
  for (int64_t i = 0; i < n; ++i) ok = ok && read(mx[size_t(i)]) == value(P - 1, i);
  report(world, ok, hone::cat("all_reduce_max ", tn));
  c.all_reduce_min(dx, dy, n);
  const std::vector<T> mn = down(dy, n);
  ok = true;
  for (int64_t i = 0; i < n; ++i) ok = ok && read(mn[size_t(i)]) == value(0, i);
  report(world, ok, hone::cat("all_reduce_min ", tn));

  c.all_to_all(dx, dy, m);  // block r of the result: block me of rank r's values
  const std::vector<T> a2a = down(dy, n);
  ok = true;
  for (int r = 0; r < P; ++r)
    for (int64_t i = 0; i < m; ++i) ok = ok && read(a2a[size_t(r * m + i)]) == value(r, me * m + i);
  report(world, ok, hone::cat("all_to_all ", tn));

  c.broadcast(dx, n, P - 1);
  const std::vector<T> bc = down(dx, n);
  ok = true;
  for (int64_t i = 0; i < n; ++i) ok = ok && read(bc[size_t(i)]) == value(P - 1, i);
  report(world, ok, hone::cat("broadcast ", tn));
  CUDA_CHECK(cudaFree(dx));
  CUDA_CHECK(cudaFree(dy));
}

// Point to point and uneven all-to-all (f32): send/recv between rank pairs (2k, 2k+1) in both directions, ordered
// by parity; send_recv around the ring (to the next rank, from the previous); all_to_allv where rank r sends
// (r + 2q) % 3 * 1000 elements to rank q (some blocks empty), with gaps in both buffers.
void check_exchanges(hone::Comm& world, hone::NcclComm& c) {
  const int P = c.size(), me = c.rank();
  auto up = [](const std::vector<float>& h) {
    float* d = nullptr;
    CUDA_CHECK(cudaMalloc(&d, std::max<size_t>(1, h.size()) * sizeof(float)));
    if (!h.empty()) CUDA_CHECK(cudaMemcpy(d, h.data(), h.size() * sizeof(float), cudaMemcpyHostToDevice));
    return d;
  };
  auto down = [](const float* d, size_t k) {
    std::vector<float> h(k);
    if (k) CUDA_CHECK(cudaMemcpy(h.data(), d, k * sizeof(float), cudaMemcpyDeviceToHost));
    return h;
  };
  auto msg = [](int from, int to, int64_t i) { return float(from * 64 + to * 4 + int(i % 3)); };
  const int64_t n = 1 << 20;
  std::vector<float> out(static_cast<size_t>(n));

  const int peer = me ^ 1;
  if (peer < P) {
    for (int64_t i = 0; i < n; ++i) out[size_t(i)] = msg(me, peer, i);
    float* ds = up(out);
    float* dr = up(std::vector<float>(size_t(n), 0.f));
    if (me % 2 == 0) {
      c.send(ds, n, peer);
      c.recv(dr, n, peer);
    } else {
      c.recv(dr, n, peer);
      c.send(ds, n, peer);
    }
    const std::vector<float> got = down(dr, size_t(n));
    bool ok = true;
    for (int64_t i = 0; i < n; ++i) ok = ok && got[size_t(i)] == msg(peer, me, i);
    CUDA_CHECK(cudaFree(ds));
    CUDA_CHECK(cudaFree(dr));
    report(world, ok, "send/recv f32 both ways between rank pairs");
  }

  const int next = (me + 1) % P, prev = (me + P - 1) % P;
  for (int64_t i = 0; i < n; ++i) out[size_t(i)] = msg(me, next, i);
  float* ds = up(out);
  float* dr = up(std::vector<float>(size_t(n), 0.f));
  c.send_recv(ds, n, next, dr, n, prev);
  const std::vector<float> ring = down(dr, size_t(n));
  bool ok = true;
  for (int64_t i = 0; i < n; ++i) ok = ok && ring[size_t(i)] == msg(prev, me, i);
  CUDA_CHECK(cudaFree(ds));
  CUDA_CHECK(cudaFree(dr));
  report(world, ok, "send_recv f32 around the ring");

  auto count = [](int r, int q) { return int64_t((r + 2 * q) % 3) * 1000; };
  const size_t np = static_cast<size_t>(P);
  std::vector<int64_t> sc(np), sd(np), rc(np), rd(np);
  int64_t at = 0;
  for (int q = 0; q < P; ++q) sc[size_t(q)] = count(me, q), sd[size_t(q)] = at + 5, at += 5 + sc[size_t(q)];
  std::vector<float> send(size_t(at), -1.f);
  for (int q = 0; q < P; ++q)
    for (int64_t i = 0; i < sc[size_t(q)]; ++i) send[size_t(sd[size_t(q)] + i)] = msg(me, q, i);
  at = 0;
  for (int r = P - 1; r >= 0; --r) rc[size_t(r)] = count(r, me), rd[size_t(r)] = at + 7, at += 7 + rc[size_t(r)];
  std::vector<float> expect(size_t(at), -9.f);
  for (int r = 0; r < P; ++r)
    for (int64_t i = 0; i < rc[size_t(r)]; ++i) expect[size_t(rd[size_t(r)] + i)] = msg(r, me, i);
  float* dsend = up(send);
  float* drecv = up(std::vector<float>(size_t(at), -9.f));
  c.all_to_allv(dsend, sc, sd, drecv, rc, rd);
  report(world, down(drecv, size_t(at)) == expect, "all_to_allv f32 with uneven and empty blocks");
  CUDA_CHECK(cudaFree(dsend));
  CUDA_CHECK(cudaFree(drecv));
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

struct OptimizerCase {
  hone::ModelConfig cfg = small_model();
  hone::ModelWeights w;
  hone::ParamLayout layout;
  hone::AdamWConfig ac;
  hone::PackedBatch batch;
  hone::DeviceArray<float> dd;
};

OptimizerCase make_case(const hone::NcclComm& dp) {
  OptimizerCase c;
  c.w = hone::allocate_weights(c.cfg);
  hone::init_random_weights(c.w, c.cfg, 7);
  c.layout = hone::ParamLayout::of(c.cfg);
  c.ac.weight_decay = 0.1f;
  std::vector<std::vector<int32_t>> seqs;
  for (int s = 0; s < 4; ++s) {
    std::vector<int32_t> ids;
    for (int t = 0; t < 60 + 17 * s; ++t)
      ids.push_back(int32_t((t * 37 + s * 101 + dp.rank() * 211) % c.cfg.vocab_size));
    seqs.push_back(ids);
  }
  c.batch = hone::PackedBatch::pack(seqs);
  std::vector<float> d(size_t(c.batch.num_tokens()));
  for (size_t t = 0; t < d.size(); ++t) d[t] = (t % 3 == 0 ? -1.f : 0.5f) / float(d.size() * size_t(dp.size()));
  c.dd = hone::DeviceArray<float>(int64_t(d.size()));
  CUDA_CHECK(cudaMemcpy(c.dd.get(), d.data(), d.size() * sizeof(float), cudaMemcpyHostToDevice));
  return c;
}

using test::rel_l2;

std::vector<uint16_t> bf16_weights(const hone::GpuTransformer& m, int64_t n) {
  std::vector<uint16_t> h(static_cast<size_t>(n));
  CUDA_CHECK(cudaMemcpy(h.data(), m.weights(), size_t(n) * 2, cudaMemcpyDeviceToHost));
  return h;
}

// One data-parallel optimizer trained for `steps` steps on each rank's own batch (overlapped bucket reduction on
// the last micro-batch), the step split into update() + refit().
struct Trained {
  std::vector<float> master;  // full fp32 master weights (every rank)
  std::vector<uint16_t> compute;
  std::vector<double> norms;
  int launched = 0;
};

using Zero = hone::ShardedAdamW<hone::CudaBackend>;
using Plain = hone::AllReduceAdamW<hone::CudaBackend>;

Trained train(OptimizerCase& c, hone::DataParallelOptimizer<hone::CudaBackend>& opt, hone::GpuTransformer& model,
              const hone::cuda::GpuContext& ctx, int steps) {
  Trained t;
  hone::GradReducer<hone::CudaBackend> reducer(opt, c.layout, hone::CudaBackend::Exec(ctx));
  reducer.attach(model);
  for (int step = 0; step < steps; ++step) {
    const double max_norm = step == 1 ? 1e9 : 0.05;
    opt.zero_grads();
    model.forward(c.batch, 1.f, false);
    reducer.arm();
    model.backward(c.dd.get(), nullptr, opt.grads());
    reducer.wait_all();
    t.launched += reducer.buckets_launched_during_backward();
    t.norms.push_back(opt.update(1e-3f, max_norm).grad_norm);
    opt.refit(model.weights());
  }
  reducer.detach();
  hone::ModelWeights m = hone::allocate_weights(c.cfg);
  if (auto* z = dynamic_cast<Zero*>(&opt)) z->download_master(m);
  else dynamic_cast<Plain&>(opt).download_master(m);
  t.master.assign(m.flat.f32(), m.flat.f32() + m.flat.numel());
  t.compute = bf16_weights(model, c.layout.num_params);
  return t;
}

// The clipping norm of a sharded model (tensor or pipeline parallelism weighs each value by the ranks holding it): a
// weighting that depends on where a value lies in the flat buffer (the first half counted 1/4, as a value four
// ranks hold), so that ZeRO-1, which sums per bucket chunk, must weigh each chunk at its own place: distributed vs
// plain, one step.
void check_weighted_norm(hone::Comm& world, hone::NcclComm& dp, const hone::cuda::GpuContext& ctx,
                         OptimizerCase& c) {
  const int64_t half = c.layout.num_params / 2;
  const hone::CudaBackend::Exec x(ctx);
  hone::DataParallelOptions opts;
  opts.layout = &c.layout;
  opts.bucket_bytes = 256 << 10;  // many buckets: chunks all over the buffer
  opts.norm.weighted_sum_squares = [x, half](const float* g, int64_t begin, int64_t n) {
    const int64_t split = std::clamp<int64_t>(half - begin, 0, n);  // g[0, split) lies in the first half
    return (split > 0 ? 0.25 * hone::sum_squares(x, g, split) : 0.0) +
           (n > split ? hone::sum_squares(x, g + split, n - split) : 0.0);
  };
  hone::GpuTransformer model_z(c.cfg, c.layout, ctx, 512), model_p(c.cfg, c.layout, ctx, 512);
  model_z.upload_weights(c.w);
  model_p.upload_weights(c.w);
  Zero zero(c.w, c.ac, dp, opts, x);
  Plain plain(c.w, c.ac, &dp, opts, x);
  const Trained tz = train(c, zero, model_z, ctx, 1), tp = train(c, plain, model_p, ctx, 1);
  const double diff = std::abs(tz.norms[0] - tp.norms[0]) / tp.norms[0];
  const size_t buckets = zero.zero_layout().buckets().size();
  report(world, buckets > 2 && diff < 1e-5,
         hone::cat("distributed optimizer: weighted (sharded-model) clipping norm over ", buckets,
                   " buckets equals the plain one's (rel diff ", diff, ")"));
}

void check_optimizers(hone::Comm& world, hone::NcclComm& dp, const hone::cuda::GpuContext& ctx) {
  OptimizerCase c = make_case(dp);
  const int64_t n = c.layout.num_params;
  std::vector<float> initial(c.w.flat.f32(), c.w.flat.f32() + n);
  auto update_of = [&](const std::vector<float>& m) {
    std::vector<float> u(m.size());
    for (size_t i = 0; i < m.size(); ++i) u[i] = m[i] - initial[i];
    return u;
  };
  Trained runs[2][2];  // [fp32 reduction?][distributed?]
  for (int fp32 = 0; fp32 < 2; ++fp32) {
    hone::DataParallelOptions opts;
    opts.grad_reduce_in_fp32 = fp32 == 1;
    opts.layout = &c.layout;
    opts.bucket_bytes = 1 << 20;
    const hone::CudaBackend::Exec x(ctx);
    hone::GpuTransformer model_z(c.cfg, c.layout, ctx, 512), model_p(c.cfg, c.layout, ctx, 512);
    model_z.upload_weights(c.w);
    model_p.upload_weights(c.w);
    Zero zero(c.w, c.ac, dp, opts, x);
    Plain plain(c.w, c.ac, &dp, opts, x);
    runs[fp32][1] = train(c, zero, model_z, ctx, 3);
    runs[fp32][0] = train(c, plain, model_p, ctx, 3);
    const char* how = fp32 ? "fp32 reduction" : "bf16 reduction";
    // Two ranks add the same two values whichever collective sums them: the runs agree to the last bits. More ranks
    // sum in another order (a ring reduce-scatter against a ring all-reduce): step 1 agrees within the rounding of
    // the reduction's type, and the later steps drift as the bf16 compute weights round differently (measured on
    // four H200s: master weights within 1.8e-4 (fp32) and 1.7e-3 (bf16) after 3 steps).
    const bool same_sums = dp.size() == 2;
    double norm_diff = 0;
    for (size_t i = 0; i < (same_sums ? 3u : 1u); ++i)
      norm_diff = std::max(norm_diff, std::abs(runs[fp32][1].norms[i] - runs[fp32][0].norms[i]) / runs[fp32][0].norms[i]);
    const double norm_tol = same_sums || fp32 ? 1e-5 : 1e-3;
    report(world, norm_diff < norm_tol,
           hone::cat(how, ": global gradient norm, distributed vs plain (rel diff ", norm_diff,
                     same_sums ? ", 3 steps)" : ", step 1)"));
    report(world, runs[fp32][1].launched > 0 && runs[fp32][0].launched > 0,
           hone::cat(how, ": buckets reduced during backward: ", runs[fp32][1].launched, " (distributed), ",
                     runs[fp32][0].launched, " (plain)"));
    const double rel = rel_l2(runs[fp32][1].master, runs[fp32][0].master);
    const double rel_tol = same_sums ? 1e-6 : fp32 ? 1e-3 : 1e-2;
    report(world, rel < rel_tol, hone::cat(how, ": master weights after 3 steps, distributed vs plain: relative L2 ", rel));
    int64_t differ = 0;
    for (int64_t i = 0; i < n; ++i) differ += runs[fp32][1].compute[size_t(i)] != runs[fp32][0].compute[size_t(i)];
    if (same_sums)
      report(world, double(differ) <= 1e-4 * double(n),
             hone::cat(how, ": bf16 compute weights differing: ", differ, " of ", n));
    else if (world.rank() == 0)
      std::printf("INFO: %s: bf16 compute weights differing after 3 steps: %lld of %lld\n", how, (long long)differ,
                  (long long)n);

    if (fp32 == 1) {
      // Checkpoint state: read to rank 0, handed to every rank, written into a fresh optimizer: the same shard,
      // the same compute weights after refit, the same next step.
      hone::ModelWeights master = hone::allocate_weights(c.cfg);
      std::vector<float> m(static_cast<size_t>(n)), v(static_cast<size_t>(n));
      const bool root = dp.rank() == 0;
      zero.read_state(root ? &master : nullptr, root ? m.data() : nullptr, root ? v.data() : nullptr, 0);
      world.broadcast(master.flat.f32(), n, 0);
      world.broadcast(m.data(), n, 0);
      world.broadcast(v.data(), n, 0);
      Zero again(c.w, c.ac, dp, opts, x);
      again.write_state(master, m.data(), v.data(), zero.step_count());
      hone::GpuTransformer model_a(c.cfg, c.layout, ctx, 512);
      again.refit(model_a.weights());
      const hone::ShardOptimizerState a = zero.shard_state(), b = again.shard_state();
      report(world, a.master == b.master && a.exp_avg == b.exp_avg && a.exp_avg_sq == b.exp_avg_sq && a.step == b.step,
             "distributed optimizer: state read to rank 0 and written back gives the same shard");
      report(world, bf16_weights(model_a, n) == bf16_weights(model_z, n),
             "distributed optimizer: compute weights refitted from a restored state are identical");
      // Offload and release round trips.
      zero.offload_state();
      const bool off = zero.state_offloaded();
      zero.reload_state();
      const hone::ShardOptimizerState r = zero.shard_state();
      report(world, off && r.exp_avg == a.exp_avg && r.exp_avg_sq == a.exp_avg_sq,
             "distributed optimizer: moments offloaded to the host and back are unchanged");
      const size_t held = zero.device_bytes();
      zero.release_grads();
      const size_t released = zero.device_bytes();
      zero.zero_grads();
      report(world, zero.grads() != nullptr && held - released == size_t(zero.zero_layout().padded_size()) * 4,
             hone::cat("distributed optimizer: gradient buffer released (", held - released, " bytes) and allocated again"));
      // The next step from the restored state equals the next step of the original.
      // (GPU backward sums the embedding gradient with atomics: equal up to that order, not bitwise.)
      const Trained t1 = train(c, zero, model_z, ctx, 1), t2 = train(c, again, model_a, ctx, 1);
      const double rel_r = rel_l2(t2.master, t1.master);
      report(world, rel_r < 1e-7, hone::cat("distributed optimizer: a step after restoring equals the step of the "
                                           "original (relative L2 ", rel_r, ")"));
    }
  }
  check_weighted_norm(world, dp, ctx, c);
  // bf16 reduction: the updates within bf16 rounding of the fp32 ones.
  const double rel_b = rel_l2(update_of(runs[0][1].master), update_of(runs[1][1].master));
  report(world, rel_b < 5e-2, hone::cat("bf16 vs fp32 reduction: the 3-step update differs by relative L2 ", rel_b));
}

// A stream-ordered communicator: four chunks of rows gathered on a communication stream (after an event of the
// compute stream), then reduce-scattered back, bf16 small integers (exact); the host waits only at the end.
void check_stream_ordered(hone::Comm& world, hone::NcclComm& c, cudaStream_t compute) {
  const int P = c.size(), me = c.rank();
  const int64_t chunk = 4097, chunks = 4, local = chunk * chunks;
  std::vector<uint16_t> mine(static_cast<size_t>(local));
  for (int64_t i = 0; i < local; ++i) mine[size_t(i)] = make<uint16_t>(value(me, i));
  uint16_t *d_local = nullptr, *d_full = nullptr, *d_back = nullptr;
  CUDA_CHECK(cudaMalloc(&d_local, size_t(local) * 2));
  CUDA_CHECK(cudaMalloc(&d_full, size_t(local * P) * 2));
  CUDA_CHECK(cudaMalloc(&d_back, size_t(local) * 2));
  CUDA_CHECK(cudaMemcpyAsync(d_local, mine.data(), size_t(local) * 2, cudaMemcpyHostToDevice, compute));
  cudaStream_t comm = nullptr;
  cudaEvent_t ready = nullptr;
  CUDA_CHECK(cudaStreamCreateWithFlags(&comm, cudaStreamNonBlocking));
  CUDA_CHECK(cudaEventCreateWithFlags(&ready, cudaEventDisableTiming));
  CUDA_CHECK(cudaEventRecord(ready, compute));
  CUDA_CHECK(cudaStreamWaitEvent(comm, ready, 0));
  const auto t0 = std::chrono::steady_clock::now();
  // Chunk j of every rank lands side by side: block j of the gathered rows holds P blocks of `chunk` values.
  for (int64_t j = 0; j < chunks; ++j)
    c.all_gather_on(d_local + j * chunk, d_full + j * chunk * P, chunk, comm);
  for (int64_t j = 0; j < chunks; ++j)
    c.reduce_scatter_sum_on(d_full + j * chunk * P, d_back + j * chunk, chunk, comm);
  const double enqueue_ms = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count() * 1e3;
  CUDA_CHECK(cudaStreamSynchronize(comm));
  std::vector<uint16_t> full(static_cast<size_t>(local * P)), back(static_cast<size_t>(local));
  CUDA_CHECK(cudaMemcpy(full.data(), d_full, full.size() * 2, cudaMemcpyDeviceToHost));
  CUDA_CHECK(cudaMemcpy(back.data(), d_back, back.size() * 2, cudaMemcpyDeviceToHost));
  bool ok = true;
  for (int64_t j = 0; j < chunks; ++j)
    for (int r = 0; r < P; ++r)
      for (int64_t i = 0; i < chunk; ++i)
        ok = ok && read(full[size_t((j * P + r) * chunk + i)]) == value(r, j * chunk + i);
  report(world, ok, hone::cat("stream-ordered all_gather of 4 chunks on a second stream (enqueued in ", enqueue_ms,
                              " ms)"));
  // Rank me's block of chunk j is every rank's chunk j gathered again from rank me: P times rank me's values.
  ok = true;
  for (int64_t i = 0; i < local; ++i) ok = ok && read(back[size_t(i)]) == P * value(me, i);
  report(world, ok, "stream-ordered reduce_scatter of 4 chunks on a second stream");
  c.barrier();
  const auto t1 = std::chrono::steady_clock::now();
  while (c.watched() > 0 && std::chrono::duration<double>(std::chrono::steady_clock::now() - t1).count() < 10)
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  report(world, c.watched() == 0 && !c.aborted(), "the watchdog thread saw every stream-ordered collective complete");
  // Many short collectives in a row, as sequence parallelism issues them (a few per layer, thousands a step): the
  // watchdog thread polls the communicator all the while the main thread enqueues on it. Each round gathers the
  // rows and scatters their sum back, so every rank's values are multiplied by P each round (kept small: 2 rounds
  // between resets of the input).
  const int rounds = 3000;
  bool stress_ok = true;
  for (int k = 0; k < rounds; ++k) {
    if (k % 2 == 0)
      CUDA_CHECK(cudaMemcpyAsync(d_local, mine.data(), size_t(local) * 2, cudaMemcpyHostToDevice, comm));
    c.all_gather_on(k % 2 == 0 ? d_local : d_back, d_full, local, comm);
    c.reduce_scatter_sum_on(d_full, d_back, local, comm);
  }
  CUDA_CHECK(cudaStreamSynchronize(comm));
  CUDA_CHECK(cudaMemcpy(back.data(), d_back, back.size() * 2, cudaMemcpyDeviceToHost));
  for (int64_t i = 0; i < local; ++i) stress_ok = stress_ok && read(back[size_t(i)]) == P * P * value(me, i);
  c.barrier();
  const auto t2 = std::chrono::steady_clock::now();
  while (c.watched() > 0 && std::chrono::duration<double>(std::chrono::steady_clock::now() - t2).count() < 10)
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  report(world, stress_ok && c.watched() == 0 && !c.aborted(),
         hone::cat(2 * rounds, " stream-ordered collectives in a row under the watchdog: results exact, none failed"));
  CUDA_CHECK(cudaEventDestroy(ready));
  CUDA_CHECK(cudaStreamDestroy(comm));
  for (uint16_t* p : {d_local, d_full, d_back}) CUDA_CHECK(cudaFree(p));
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
      check_collectives<int32_t>(*world, *nccl);
      check_exchanges(*world, *nccl);
      auto dp = factory.device(hone::CommGroup::dp, {.timeout_s = 120, .stream = ctx.stream});
      check_optimizers(*world, *dp, ctx);
      auto ordered = factory.device(hone::CommGroup::world,
                                    {.timeout_s = 120, .stream = ctx.stream, .stream_ordered = true});
      check_stream_ordered(*world, *ordered, ctx.stream);
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
