// NcclComm on one GPU with a one-rank communicator: every collective and type (sums, max, min; all_to_all,
// all_to_allv and send_recv as transfers of the rank with itself, which NCCL allows inside one group; plain send and
// recv need another rank and are refused), the asynchronous form, the watchdog's timeout path (a stream blocked by a
// spinning kernel), a stream-ordered communicator (its collectives return while the stream is blocked, the watchdog
// thread sees them complete, and reports one that times out), and the GPU data-parallel optimizers with the
// overlapped GradReducer against one GPU's AdamW. (Two ranks on two GPUs: tests/programs/nccl_check.cpp.)
#include <boost/test/unit_test.hpp>

#include "common/gpu.h"

#if HONE_CUDA
#include <cuda_runtime.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <mutex>
#include <thread>
#include <cstdlib>
#include <random>
#include <string>
#include <vector>

#include "comm/mpi_comm.h"
#include "cuda/check.h"
#include "comm/nccl_comm.h"
#include "gpu/gpu_transformer_test_util.h"
#include "model/transformer.h"
#include "runtime/error.h"
#include "tensor/dtype.h"
#include "train/all_reduce_adamw.h"
#include "train/grad_reducer.h"
#include "train/sharded_adamw.h"

void launch_spin_until_flag(const int* device_flag, double max_seconds, cudaStream_t stream);

namespace {

template <typename T>
std::vector<T> values(int64_t n, double base) {
  std::vector<T> v(static_cast<size_t>(n));
  for (int64_t i = 0; i < n; ++i) {
    const double x = base + double(i % 11) - 5.0;
    if constexpr (std::is_same_v<T, uint16_t>)
      v[size_t(i)] = hone::f32_to_bf16(float(x));
    else
      v[size_t(i)] = T(x);
  }
  return v;
}

template <typename T>
std::vector<T> to_host(const T* d, int64_t n) {
  std::vector<T> h(static_cast<size_t>(n));
  CUDA_CHECK(cudaMemcpy(h.data(), d, size_t(n) * sizeof(T), cudaMemcpyDeviceToHost));
  return h;
}

template <typename T>
T* to_device(const std::vector<T>& h) {
  T* d = nullptr;
  CUDA_CHECK(cudaMalloc(&d, h.size() * sizeof(T)));
  CUDA_CHECK(cudaMemcpy(d, h.data(), h.size() * sizeof(T), cudaMemcpyHostToDevice));
  return d;
}

template <typename T>
void check_type(hone::NcclComm& c) {
  const int64_t n = 1000;
  BOOST_TEST_CONTEXT(hone::comm_type_name(hone::comm_type_of<T>())) {
    const std::vector<T> in = values<T>(n, 3.0);
    T* a = to_device(in);
    T* b = to_device(std::vector<T>(size_t(n), T(0)));
    c.all_reduce_sum(a, b, n);
    BOOST_TEST(to_host(b, n) == in);
    c.all_reduce_sum(a, n);
    BOOST_TEST(to_host(a, n) == in);
    CUDA_CHECK(cudaMemset(b, 0, size_t(n) * sizeof(T)));
    c.reduce_scatter_sum(a, b, n);  // one rank: its block is everything
    BOOST_TEST(to_host(b, n) == in);
    CUDA_CHECK(cudaMemset(b, 0, size_t(n) * sizeof(T)));
    c.all_gather(a, b, n);
    BOOST_TEST(to_host(b, n) == in);
    c.broadcast(a, n, 0);
    BOOST_TEST(to_host(a, n) == in);
    CUDA_CHECK(cudaMemset(b, 0, size_t(n) * sizeof(T)));
    c.all_reduce_max(a, b, n);
    BOOST_TEST(to_host(b, n) == in);
    c.all_reduce_min(a, n);
    BOOST_TEST(to_host(a, n) == in);
    c.barrier();

    // Transfers of the rank with itself.
    CUDA_CHECK(cudaMemset(b, 0, size_t(n) * sizeof(T)));
    c.all_to_all(a, b, n);
    BOOST_TEST(to_host(b, n) == in);
    CUDA_CHECK(cudaMemset(b, 0, size_t(n) * sizeof(T)));
    c.send_recv(a, n, 0, b, n, 0);
    BOOST_TEST(to_host(b, n) == in);
    // all_to_allv: elements [10, 10 + 500) of a land at b + 300; the rest of b stays zero.
    CUDA_CHECK(cudaMemset(b, 0, size_t(n) * sizeof(T)));
    const std::vector<int64_t> counts{500}, send_displs{10}, recv_displs{300};
    c.all_to_allv(a, counts, send_displs, b, counts, recv_displs);
    std::vector<T> expect(size_t(n), T(0));
    std::copy(in.begin() + 10, in.begin() + 510, expect.begin() + 300);
    BOOST_TEST(to_host(b, n) == expect);
    BOOST_CHECK_THROW(c.send(a, n, 0), hone::Error);  // to itself: only send_recv
    CUDA_CHECK(cudaFree(a));
    CUDA_CHECK(cudaFree(b));
  }
}

}  // namespace

BOOST_AUTO_TEST_SUITE(nccl_comm)

BOOST_AUTO_TEST_CASE(every_collective_on_a_one_rank_communicator, *boost::unit_test::precondition(test::needs_gpu)) {
  CUDA_CHECK(cudaSetDevice(0));
  hone::MpiComm local;
  hone::NcclComm c(local, {.timeout_s = 60});
  BOOST_TEST(c.size() == 1);
  BOOST_TEST(c.rank() == 0);
  BOOST_TEST(c.on_device());
  BOOST_TEST(std::getenv("NCCL_NVLS_ENABLE") != nullptr);  // set before the first communicator
  check_type<float>(c);
  check_type<uint16_t>(c);
  check_type<double>(c);
  check_type<int64_t>(c);
  check_type<int32_t>(c);

  // Asynchronous on a stream of the caller's.
  cudaStream_t s = nullptr;
  CUDA_CHECK(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
  const std::vector<float> in = values<float>(4096, 1.0);
  float* a = to_device(in);
  float* b = to_device(std::vector<float>(in.size(), 0.f));
  hone::NcclWork w = c.all_reduce_sum_async(a, b, int64_t(in.size()), hone::CommType::f32, s);
  BOOST_TEST(w.pending());
  w.wait();
  BOOST_TEST(!w.pending());
  BOOST_TEST(to_host(b, int64_t(in.size())) == in);
  // An all_to_all in flight on the caller's stream.
  CUDA_CHECK(cudaMemset(b, 0, in.size() * sizeof(float)));
  hone::NcclWork t = c.all_to_all_async(a, b, int64_t(in.size()), hone::CommType::f32, s);
  BOOST_TEST(t.pending());
  t.wait();
  BOOST_TEST(to_host(b, int64_t(in.size())) == in);
  CUDA_CHECK(cudaFree(a));
  CUDA_CHECK(cudaFree(b));
  CUDA_CHECK(cudaStreamDestroy(s));
}

BOOST_AUTO_TEST_CASE(a_collective_that_times_out_is_reported_and_aborted,
                     *boost::unit_test::precondition(test::needs_gpu)) {
  CUDA_CHECK(cudaSetDevice(0));
  int* flag = nullptr;  // mapped pinned memory: the host releases the spinning kernel through it
  CUDA_CHECK(cudaHostAlloc(&flag, sizeof(int), cudaHostAllocMapped));
  *flag = 0;
  int* dflag = nullptr;
  CUDA_CHECK(cudaHostGetDevicePointer(reinterpret_cast<void**>(&dflag), flag, 0));
  cudaStream_t s = nullptr;
  CUDA_CHECK(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));

  std::string reported;
  const double timeout = 1.0;
  hone::MpiComm local;
  hone::NcclComm c(local, {.timeout_s = timeout, .stream = s, .on_failure = [&](const std::string& m) {
                             reported = m;
                             *reinterpret_cast<volatile int*>(flag) = 1;  // release the kernel
                           }});
  float* x = nullptr;
  CUDA_CHECK(cudaMalloc(&x, 1024 * sizeof(float)));
  CUDA_CHECK(cudaMemset(x, 0, 1024 * sizeof(float)));

  launch_spin_until_flag(dflag, 30.0, s);  // blocks the stream
  const auto t0 = std::chrono::steady_clock::now();
  // ncclCommAbort waits for work queued ahead of NCCL's on the stream (here the spinning kernel, which is not
  // NCCL's and so does not see the abort): a stand-in for the stuck peer, released half a second after the
  // timeout. What is checked is that the watchdog notices at the timeout.
  std::thread releaser([&] {
    std::this_thread::sleep_for(std::chrono::duration<double>(timeout + 0.5));
    *reinterpret_cast<volatile int*>(flag) = 1;
  });
  std::string thrown;
  try {
    c.all_reduce_sum(x, 1024);
  } catch (const hone::Error& e) {
    thrown = e.what();
  }
  const double waited = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  releaser.join();
  CUDA_CHECK(cudaStreamSynchronize(s));

  BOOST_TEST_MESSAGE("reported after " << waited << " s: " << reported);
  BOOST_TEST(waited >= timeout);
  BOOST_TEST(waited < timeout + 2.0);
  BOOST_TEST(thrown == reported);
  BOOST_TEST(reported.find("all_reduce_sum of 4096 bytes") != std::string::npos);
  BOOST_TEST(reported.find("world ranks 0") != std::string::npos);
  BOOST_TEST(reported.find("did not complete within 1 s") != std::string::npos);
  BOOST_TEST(c.aborted());
  BOOST_CHECK_THROW(c.all_reduce_sum(x, 1024), hone::Error);  // an aborted communicator refuses work

  CUDA_CHECK(cudaFree(x));
  CUDA_CHECK(cudaStreamDestroy(s));
  CUDA_CHECK(cudaFreeHost(flag));
}

// Mapped pinned memory the host sets to release launch_spin_until_flag's kernel.
struct SpinFlag {
  int* host = nullptr;
  int* device = nullptr;
  SpinFlag() {
    CUDA_CHECK(cudaHostAlloc(&host, sizeof(int), cudaHostAllocMapped));
    *host = 0;
    CUDA_CHECK(cudaHostGetDevicePointer(reinterpret_cast<void**>(&device), host, 0));
  }
  ~SpinFlag() { cudaFreeHost(host); }
  void release() { *reinterpret_cast<volatile int*>(host) = 1; }
};

double seconds_since(std::chrono::steady_clock::time_point t) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t).count();
}

BOOST_AUTO_TEST_CASE(stream_ordered_collectives_return_at_once_and_are_watched,
                     *boost::unit_test::precondition(test::needs_gpu)) {
  CUDA_CHECK(cudaSetDevice(0));
  SpinFlag flag;
  cudaStream_t s = nullptr, other = nullptr;
  CUDA_CHECK(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
  CUDA_CHECK(cudaStreamCreateWithFlags(&other, cudaStreamNonBlocking));
  hone::MpiComm local;
  hone::NcclComm c(local, {.timeout_s = 60, .stream = s, .stream_ordered = true});
  BOOST_TEST(c.stream_ordered());
  const std::vector<float> in = values<float>(4096, 2.0);
  const int64_t n = int64_t(in.size());
  float* a = to_device(in);
  float* b = to_device(std::vector<float>(in.size(), 0.f));
  float* g = to_device(std::vector<float>(in.size(), 0.f));
  float* r = to_device(std::vector<float>(in.size(), 0.f));

  launch_spin_until_flag(flag.device, 30.0, s);  // holds the stream
  const auto t0 = std::chrono::steady_clock::now();
  c.all_reduce_sum(a, b, n);
  c.all_gather(b, g, n);
  // On another stream, ordered after s by an event (as the sequence-parallel layers order their communication
  // stream): the one-rank reduce-scatter is a copy of g.
  cudaEvent_t e = nullptr;
  CUDA_CHECK(cudaEventCreateWithFlags(&e, cudaEventDisableTiming));
  CUDA_CHECK(cudaEventRecord(e, s));
  CUDA_CHECK(cudaStreamWaitEvent(other, e, 0));
  c.reduce_scatter_sum_on(g, r, n, other);
  const double returned = seconds_since(t0);
  BOOST_TEST(returned < 1.0);  // none waited for the spinning kernel
  BOOST_TEST(c.watched() == 3u);
  flag.release();
  CUDA_CHECK(cudaStreamSynchronize(other));
  BOOST_TEST(to_host(r, n) == in);
  const auto t1 = std::chrono::steady_clock::now();
  while (c.watched() > 0 && seconds_since(t1) < 10) std::this_thread::sleep_for(std::chrono::milliseconds(5));
  BOOST_TEST(c.watched() == 0u);  // the watchdog saw every one complete
  c.barrier();  // waits on the host
  BOOST_TEST(!c.aborted());
  CUDA_CHECK(cudaEventDestroy(e));
  for (float* p : {a, b, g, r}) CUDA_CHECK(cudaFree(p));
  CUDA_CHECK(cudaStreamDestroy(s));
  CUDA_CHECK(cudaStreamDestroy(other));
}

BOOST_AUTO_TEST_CASE(a_stream_ordered_collective_that_times_out_is_reported_by_the_watchdog,
                     *boost::unit_test::precondition(test::needs_gpu)) {
  CUDA_CHECK(cudaSetDevice(0));
  SpinFlag flag;
  cudaStream_t s = nullptr;
  CUDA_CHECK(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
  std::mutex mutex;
  std::string reported;
  std::atomic<bool> done{false};
  const double timeout = 1.0;
  hone::MpiComm local;
  hone::NcclComm c(local, {.timeout_s = timeout,
                           .stream = s,
                           .on_failure =
                               [&](const std::string& m) {  // on the watchdog's thread
                                 std::lock_guard<std::mutex> lock(mutex);
                                 reported = m;
                                 done = true;
                               },
                           .stream_ordered = true});
  float* x = nullptr;
  CUDA_CHECK(cudaMalloc(&x, 1024 * sizeof(float)));
  CUDA_CHECK(cudaMemset(x, 0, 1024 * sizeof(float)));

  launch_spin_until_flag(flag.device, 30.0, s);
  const auto t0 = std::chrono::steady_clock::now();
  c.all_reduce_sum(x, 1024);
  const double returned = seconds_since(t0);
  // ncclCommAbort waits for the spinning kernel queued ahead (not NCCL's, so the abort does not end it): released
  // half a second after the timeout, as in the synchronous test.
  std::thread releaser([&] {
    std::this_thread::sleep_for(std::chrono::duration<double>(timeout + 0.5));
    flag.release();
  });
  while (!done.load() && seconds_since(t0) < 20) std::this_thread::sleep_for(std::chrono::milliseconds(5));
  const double waited = seconds_since(t0);
  releaser.join();
  CUDA_CHECK(cudaStreamSynchronize(s));

  std::string message;
  {
    std::lock_guard<std::mutex> lock(mutex);
    message = reported;
  }
  BOOST_TEST_MESSAGE("returned after " << returned << " s, reported after " << waited << " s: " << message);
  BOOST_TEST(returned < 0.5);
  BOOST_TEST(waited >= timeout);
  BOOST_TEST(waited < timeout + 3.0);
  BOOST_TEST(message.find("all_reduce_sum of 4096 bytes") != std::string::npos);
  BOOST_TEST(message.find("did not complete within 1 s") != std::string::npos);
  BOOST_TEST(c.aborted());
  std::string thrown;  // the main thread's next call throws the watchdog's failure
  try {
    c.all_reduce_sum(x, 1024);
  } catch (const hone::Error& e) {
    thrown = e.what();
  }
  BOOST_TEST(thrown == message);
  CUDA_CHECK(cudaFree(x));
  CUDA_CHECK(cudaStreamDestroy(s));
}

BOOST_AUTO_TEST_CASE(data_parallel_optimizers_on_one_rank_match_gpu_adamw,
                     *boost::unit_test::precondition(test::needs_gpu)) {
  CUDA_CHECK(cudaSetDevice(0));
  hone::cuda::GpuContext ctx = hone::cuda::create_gpu_context(0);
  const hone::ModelConfig cfg = test::gpu_tiny_config(hone::Architecture::qwen3, /*tied=*/true);
  const hone::ModelWeights w = test::gpu_test_weights(cfg, 11);
  const hone::ParamLayout layout = hone::ParamLayout::of(cfg);
  const int64_t n = layout.num_params;
  hone::MpiComm local;
  hone::NcclComm dp(local, {.timeout_s = 60, .stream = ctx.stream});
  hone::AdamWConfig ac;
  ac.weight_decay = 0.1f;
  // Small buckets: several per layer boundary, so the reducer launches during backward.
  hone::DataParallelOptions opts;
  opts.layout = &layout;
  opts.bucket_bytes = 64 << 10;
  const hone::CudaBackend::Exec x(ctx);

  hone::GpuTransformer model(cfg, layout, ctx, 128);
  model.upload_weights(w);
  hone::AllReduceAdamW<hone::CudaBackend> ref(w, ac, nullptr, {}, x);  // no communicator
  hone::ShardedAdamW<hone::CudaBackend> zero(w, ac, dp, opts, x);
  hone::AllReduceAdamW<hone::CudaBackend> plain(w, ac, &dp, opts, x);
  BOOST_TEST(zero.zero_layout().buckets().size() > 2u);
  hone::GradReducer<hone::CudaBackend> reducer(zero, layout, x);
  reducer.attach(model);

  const auto seqs = std::vector<std::vector<int32_t>>{{1, 5, 9, 200, 7, 3}, {4, 4, 17, 300, 2}};
  const hone::PackedBatch batch = hone::PackedBatch::pack(seqs);
  std::vector<float> d(size_t(batch.num_tokens()), -0.1f);
  hone::DeviceArray<hone::cuda::bf16> wz(n), wp(n), wr(n);
  for (hone::cuda::bf16* dst : {wz.get(), wp.get(), wr.get()})
    CUDA_CHECK(cudaMemcpy(dst, model.weights(), size_t(n) * sizeof(hone::cuda::bf16), cudaMemcpyDeviceToDevice));
  hone::DeviceArray<float> dd(int64_t(d.size()));
  CUDA_CHECK(cudaMemcpy(dd.get(), d.data(), d.size() * sizeof(float), cudaMemcpyHostToDevice));

  model.forward(batch, 1.f, false);
  reducer.arm();
  zero.zero_grads();
  model.backward(dd.get(), nullptr, zero.grads());
  reducer.wait_all();
  BOOST_TEST(reducer.buckets_launched_during_backward() > 0);
  // The same gradients for the other two optimizers.
  CUDA_CHECK(cudaMemcpy(ref.grads(), zero.grads(), size_t(n) * sizeof(float), cudaMemcpyDeviceToDevice));
  CUDA_CHECK(cudaMemcpy(plain.grads(), zero.grads(), size_t(n) * sizeof(float), cudaMemcpyDeviceToDevice));
  const hone::OptimizerStepResult rz = zero.step(1e-3f, 0.5, wz.get());
  const hone::OptimizerStepResult rp = plain.step(1e-3f, 0.5, wp.get());
  const hone::OptimizerStepResult rr = ref.step(1e-3f, 0.5, wr.get());
  BOOST_TEST(rz.grad_norm > 0.0);
  BOOST_TEST(std::abs(rz.grad_norm - rr.grad_norm) <= 1e-6 * rr.grad_norm);
  BOOST_TEST(rp.grad_norm == rr.grad_norm);
  auto as_f32 = [&](const hone::cuda::bf16* p) {
    std::vector<float> f(static_cast<size_t>(n));
    std::vector<hone::cuda::bf16> h = to_host(p, n);
    for (int64_t i = 0; i < n; ++i) f[size_t(i)] = float(h[size_t(i)]);
    return f;
  };
  const std::vector<float> fz = as_f32(wz.get()), fp = as_f32(wp.get()), fr = as_f32(wr.get());
  int64_t differ = 0;
  for (int64_t i = 0; i < n; ++i) differ += fz[size_t(i)] != fr[size_t(i)] || fp[size_t(i)] != fr[size_t(i)];
  BOOST_TEST(differ == 0);  // one rank: the same fp32 math, the same bf16 rounding
  hone::ModelWeights master = hone::allocate_weights(cfg), master_ref = hone::allocate_weights(cfg);
  zero.download_master(master);
  ref.download_master(master_ref);
  double worst = 0;
  for (int64_t i = 0; i < n; ++i)
    worst = std::max(worst, double(std::abs(master.flat.f32()[i] - master_ref.flat.f32()[i])));
  BOOST_TEST(worst <= 1e-7);
  reducer.detach();
  hone::cuda::destroy_gpu_context(ctx);
}

BOOST_AUTO_TEST_SUITE_END()
#endif  // HONE_CUDA
