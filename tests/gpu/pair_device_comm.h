// Two "ranks" of one GPU for the tensor- and context-parallel tests: two threads with their own streams whose
// DeviceComm combines through the host. A collective synchronizes its stream (the context's, or the one a *_on call
// names: the sequence-parallel layers' communication stream), posts its values, and both ranks combine them in rank
// order (the same bits on both); the result is uploaded on that stream and waited for. So a collective that the code
// orders wrongly against the compute stream (a missing event) reads or overwrites rows the GEMMs still use, and the
// comparison with the whole model fails. Not for CUDA graph capture (it waits on the host): the tests run eager.
// Types: sums, max and min of f32 and bf16 (formed in fp32, rounded once), all-gathers of any type, reduce-scatter
// of f32 and bf16, send_recv between the two, and i64 / f64 scalars (agreed sizes, norms).
// PairRank: what one such rank (or the whole model, without a pair) holds: its GpuTensorParallel, layout, weights.
#pragma once

#include <algorithm>
#include <barrier>
#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "comm/device_comm.h"
#include "cuda/check.h"
#include "model/model_config.h"
#include "parallel/shard_weights.h"
#include "parallel/tensor_parallel.h"
#include "runtime/error.h"
#include "tensor/dtype.h"

namespace test {

struct Pair {
  std::barrier<> sync{2};
  std::vector<float> posted[2];
  std::vector<double> posted64[2];
  std::vector<char> posted_raw[2];  // send_recv: the bytes each rank sends
  std::vector<char> posted_bytes[2];
};

class PairDeviceComm final : public hone::DeviceComm {
 public:
  PairDeviceComm(Pair& p, int rank, cudaStream_t stream) : p_(p), rank_(rank), stream_(stream) {}
  int rank() const override { return rank_; }
  int size() const override { return 2; }
  const std::vector<int>& world_ranks() const override { return ranks_; }
  const std::string& name() const override { return name_; }
  cudaStream_t stream() const override { return stream_; }
  int collectives() const { return collectives_; }  // issued so far (the tests count the chunks moved)
  void all_reduce_sum_raw(const void* send, void* recv, int64_t n, hone::CommType t) override {
    if (wide(t)) return combine64(send, recv, n, t, [](double a, double b) { return a + b; });
    combine(send, recv, n, t, [](float a, float b) { return a + b; }, 0, n, stream_);
  }
  void all_reduce_max_raw(const void* send, void* recv, int64_t n, hone::CommType t) override {
    if (wide(t)) return combine64(send, recv, n, t, [](double a, double b) { return std::max(a, b); });
    combine(send, recv, n, t, [](float a, float b) { return std::max(a, b); }, 0, n, stream_);
  }
  void all_reduce_min_raw(const void* send, void* recv, int64_t n, hone::CommType t) override {
    if (wide(t)) return combine64(send, recv, n, t, [](double a, double b) { return std::min(a, b); });
    combine(send, recv, n, t, [](float a, float b) { return std::min(a, b); }, 0, n, stream_);
  }
  // recv gets rank 0's n values, then rank 1's (send may be recv's own block, NCCL's in-place form).
  void all_gather_raw(const void* send, void* recv, int64_t n, hone::CommType t) override {
    all_gather_on_raw(send, recv, n, t, stream_);
  }
  // The sum of both ranks' 2n values (f32 or bf16, formed in fp32, rounded once); recv gets block rank().
  void reduce_scatter_sum_raw(const void* send, void* recv, int64_t n, hone::CommType t) override {
    reduce_scatter_sum_on_raw(send, recv, n, t, stream_);
  }
  void all_gather_on_raw(const void* send, void* recv, int64_t n, hone::CommType t, cudaStream_t s) override {
    ++collectives_;
    const size_t bytes = size_t(n) * hone::comm_type_size(t);
    CUDA_CHECK(cudaStreamSynchronize(s));
    std::vector<char>& mine = p_.posted_bytes[rank_];
    mine.resize(bytes);
    CUDA_CHECK(cudaMemcpy(mine.data(), send, bytes, cudaMemcpyDeviceToHost));
    p_.sync.arrive_and_wait();
    std::vector<char> out(p_.posted_bytes[0]);
    out.insert(out.end(), p_.posted_bytes[1].begin(), p_.posted_bytes[1].end());
    p_.sync.arrive_and_wait();  // both read before either posts again
    upload(recv, out.data(), out.size(), s);
  }
  void reduce_scatter_sum_on_raw(const void* send, void* recv, int64_t n, hone::CommType t, cudaStream_t s) override {
    combine(send, recv, 2 * n, t, [](float a, float b) { return a + b; }, rank_ * n, n, s);
  }
  void broadcast_raw(void*, int64_t, hone::CommType, int) override { unused("broadcast"); }
  void barrier() override { p_.sync.arrive_and_wait(); }
  void send_raw(const void*, int64_t, hone::CommType, int) override { unused("send"); }
  void recv_raw(void*, int64_t, hone::CommType, int) override { unused("recv"); }
  // The ring of context parallelism: each rank sends to the other and receives the other's, any type.
  void send_recv_raw(const void* send, int64_t send_count, int dest, void* recv, int64_t recv_count, int source,
                     hone::CommType t) override {
    HONE_CHECK(dest == 1 - rank_ && source == 1 - rank_, "the pair's send_recv exchanges with the other rank");
    CUDA_CHECK(cudaStreamSynchronize(stream_));
    std::vector<char>& mine = p_.posted_raw[rank_];
    mine.resize(size_t(send_count) * hone::comm_type_size(t));
    CUDA_CHECK(cudaMemcpy(mine.data(), send, mine.size(), cudaMemcpyDeviceToHost));
    p_.sync.arrive_and_wait();
    const std::vector<char> theirs = p_.posted_raw[source];
    HONE_CHECK(theirs.size() == size_t(recv_count) * hone::comm_type_size(t), "send_recv: the counts differ");
    p_.sync.arrive_and_wait();  // both read before either posts again
    upload(recv, theirs.data(), theirs.size(), stream_);
  }
  void all_to_all_raw(const void*, void*, int64_t, hone::CommType) override { unused("all_to_all"); }
  void all_to_allv_raw(const void*, std::span<const int64_t>, std::span<const int64_t>, void*,
                       std::span<const int64_t>, std::span<const int64_t>, hone::CommType) override {
    unused("all_to_allv");
  }

 private:
  static void unused(const char* op) { HONE_CHECK(false, op, " is not used by tensor or context parallelism"); }
  static bool wide(hone::CommType t) { return t == hone::CommType::i64 || t == hone::CommType::f64; }
  // Host to device on the collective's stream, waited for: the context's stream is non-blocking, so a plain
  // cudaMemcpy (the legacy stream; from pageable memory it may return before the data lands) would not order with
  // it.
  static void upload(void* recv, const void* host, size_t bytes, cudaStream_t s) {
    CUDA_CHECK(cudaMemcpyAsync(recv, host, bytes, cudaMemcpyHostToDevice, s));
    CUDA_CHECK(cudaStreamSynchronize(s));
  }
  // Both ranks' n values combined; recv gets elements [begin, begin + count) of the result.
  template <class Op>
  void combine(const void* send, void* recv, int64_t n, hone::CommType t, Op op, int64_t begin, int64_t count,
               cudaStream_t s) {
    HONE_CHECK(t == hone::CommType::f32 || t == hone::CommType::bf16, "f32 and bf16 only");
    ++collectives_;
    CUDA_CHECK(cudaStreamSynchronize(s));
    std::vector<float>& mine = p_.posted[rank_];
    mine.resize(size_t(n));
    if (t == hone::CommType::f32) {
      CUDA_CHECK(cudaMemcpy(mine.data(), send, size_t(n) * 4, cudaMemcpyDeviceToHost));
    } else {
      std::vector<uint16_t> h(static_cast<size_t>(n));
      CUDA_CHECK(cudaMemcpy(h.data(), send, size_t(n) * 2, cudaMemcpyDeviceToHost));
      for (int64_t i = 0; i < n; ++i) mine[size_t(i)] = hone::bf16_to_f32(h[size_t(i)]);
    }
    p_.sync.arrive_and_wait();
    std::vector<float> out(static_cast<size_t>(count));
    for (int64_t i = 0; i < count; ++i)
      out[size_t(i)] = op(p_.posted[0][size_t(begin + i)], p_.posted[1][size_t(begin + i)]);
    p_.sync.arrive_and_wait();  // both read before either posts again
    if (t == hone::CommType::f32) {
      upload(recv, out.data(), size_t(count) * 4, s);
    } else {
      std::vector<uint16_t> h(static_cast<size_t>(count));
      for (int64_t i = 0; i < count; ++i) h[size_t(i)] = hone::f32_to_bf16(out[size_t(i)]);
      upload(recv, h.data(), size_t(count) * 2, s);
    }
  }
  // i64 (small counts: exact as doubles) and f64.
  template <class Op>
  void combine64(const void* send, void* recv, int64_t n, hone::CommType t, Op op) {
    ++collectives_;
    CUDA_CHECK(cudaStreamSynchronize(stream_));
    std::vector<double>& mine = p_.posted64[rank_];
    mine.resize(size_t(n));
    if (t == hone::CommType::f64) {
      CUDA_CHECK(cudaMemcpy(mine.data(), send, size_t(n) * 8, cudaMemcpyDeviceToHost));
    } else {
      std::vector<int64_t> h(static_cast<size_t>(n));
      CUDA_CHECK(cudaMemcpy(h.data(), send, size_t(n) * 8, cudaMemcpyDeviceToHost));
      for (int64_t i = 0; i < n; ++i) mine[size_t(i)] = double(h[size_t(i)]);
    }
    p_.sync.arrive_and_wait();
    std::vector<double> out(static_cast<size_t>(n));
    for (int64_t i = 0; i < n; ++i) out[size_t(i)] = op(p_.posted64[0][size_t(i)], p_.posted64[1][size_t(i)]);
    p_.sync.arrive_and_wait();
    if (t == hone::CommType::f64) {
      upload(recv, out.data(), size_t(n) * 8, stream_);
    } else {
      std::vector<int64_t> h(static_cast<size_t>(n));
      for (int64_t i = 0; i < n; ++i) h[size_t(i)] = int64_t(out[size_t(i)]);
      upload(recv, h.data(), size_t(n) * 8, stream_);
    }
  }
  Pair& p_;
  int rank_;
  cudaStream_t stream_;
  int collectives_ = 0;
  std::vector<int> ranks_{0, 1};
  std::string name_ = "tp (two threads)";
};

// The whole model (pair == nullptr: the layout of the config, weights sharing whole's storage, no tp) or rank's
// shard of it over the pair (the shard's layout and a copy of its slices), with sequence parallelism as sp says.
// ctx: the rank's thread's context.
struct PairRank {
  std::unique_ptr<PairDeviceComm> comm;
  std::unique_ptr<hone::GpuTensorParallel> tp;
  hone::ParamLayout layout;
  hone::ModelWeights weights;

  PairRank(const hone::ModelConfig& c, const hone::ModelWeights& whole, Pair* pair, int rank,
           const hone::cuda::GpuContext& ctx, hone::SequenceParallelism sp = {})
      : layout(hone::ParamLayout::of(c)), weights(whole) {
    if (!pair) return;
    comm = std::make_unique<PairDeviceComm>(*pair, rank, ctx.stream);
    tp = std::make_unique<hone::GpuTensorParallel>(c, *comm, ctx, sp);
    layout = tp->layout().param_layout();
    weights = hone::allocate_shard_weights(tp->layout(), c);
    hone::extract_shard(tp->layout(), whole, weights);
  }
};

}  // namespace test
