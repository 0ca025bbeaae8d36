// The mixture-of-experts feed-forward's memory on each backend (what lives where: moe_memory.h).
#include "backend/moe_memory.h"

#include <algorithm>
#include <cstring>

#include "runtime/error.h"

#if HONE_CUDA
#include "cuda/carver.h"
#include "cuda/check.h"
#endif

namespace hone {

// ---- CPU: host vectors of every sparse layer ------------------------------------------------------------------

MoeMemory<CpuBackend>::MoeMemory(int layers, int sparse_layers, int experts, bool dispatched)
    : dispatched_(dispatched),
      layers_(size_t(layers)),
      counts_(int64_t(sparse_layers) * experts, "expert counts"),
      prob_sum_(int64_t(sparse_layers) * experts, "router probability sums"),
      daux_(experts, "load-balancing gradient") {
  std::memset(counts_.get(), 0, counts_.bytes());
  std::memset(prob_sum_.get(), 0, prob_sum_.bytes());
}

MoeSaved<float> MoeMemory<CpuBackend>::saved(int layer, const LayerShape& s, int T, char*, bool forward) {
  Layer& st = layers_[size_t(layer)];
  const int64_t E = s.experts_total, k = s.top_k, Nt = int64_t(T) * k, C = s.hidden;
  if (forward) {
    st.T = T;
    st.probs.resize(size_t(T * E));
    st.topk.resize(size_t(Nt));
    st.topk_w.resize(size_t(Nt));
    st.offsets.resize(size_t(E) + 1);
    st.row_of.resize(size_t(Nt));
    st.token_of.resize(size_t(Nt));
    st.yp.resize(size_t(Nt * C));
  } else {
    HONE_CHECK(st.T == T, "backward of layer ", layer, " over ", T, " rows after a forward of ", st.T);
  }
  MoeSaved<float> v;
  v.probs = st.probs.data();
  v.topk_w = st.topk_w.data();
  v.topk = st.topk.data();
  v.offsets = st.offsets.data();
  v.row_of = st.row_of.data();
  v.token_of = st.token_of.data();
  v.yp = st.yp.data();
  return v;
}

MoeForwardScratch<float> MoeMemory<CpuBackend>::forward_scratch(const LayerShape& s, int T, char*) {
  MoeForwardScratch<float> v;
  logits_.resize(size_t(T) * size_t(s.experts_total));
  v.logits = logits_.data();
  if (dispatched_) {
    xp_.resize(size_t(T) * size_t(s.top_k) * size_t(s.hidden));
    v.xp = xp_.data();
  }
  return v;
}

MoeBackwardScratch<float> MoeMemory<CpuBackend>::backward_scratch(const LayerShape& s, int T, char*) {
  const size_t Nt = size_t(T) * size_t(s.top_k);
  dyp_.resize(Nt * size_t(s.hidden));
  dtopk_w_.resize(Nt);
  dlogits_.resize(size_t(T) * size_t(s.experts_total));
  MoeBackwardScratch<float> v;
  v.dyp = dyp_.data();
  v.dtopk_w = dtopk_w_.data();
  v.dlogits = dlogits_.data();
  return v;
}

const int64_t* MoeMemory<CpuBackend>::route_counts(const int32_t* offsets, int E, const Exec&) {
  route_counts_.resize(size_t(E));
  for (int e = 0; e < E; ++e) route_counts_[size_t(e)] = offsets[e + 1] - offsets[e];
  return route_counts_.data();
}

int64_t* MoeMemory<CpuBackend>::expert_counts(int El) {
  expert_counts_.resize(size_t(El));
  return expert_counts_.data();
}

MoeExperts<float> MoeMemory<CpuBackend>::dispatched_experts(int layer, const LayerShape& s, int64_t N, const Exec&) {
  Layer& st = layers_[size_t(layer)];
  const int El = s.experts;
  const size_t C = size_t(s.hidden), Im = size_t(s.moe_intermediate);
  st.expert_offsets.assign(size_t(El) + 1, 0);
  for (int e = 0; e < El; ++e)
    st.expert_offsets[size_t(e) + 1] = st.expert_offsets[size_t(e)] + int32_t(expert_counts_[size_t(e)]);
  HONE_CHECK(st.expert_offsets[size_t(El)] == N, "expert rows disagree with the plan");
  st.xe.resize(size_t(N) * C);
  st.gate.resize(size_t(N) * Im);
  st.up.resize(size_t(N) * Im);
  st.act.resize(size_t(N) * Im);
  ye_.resize(size_t(N) * C);
  MoeExperts<float> ex;
  ex.N = N;
  ex.offsets = {st.expert_offsets.data(), st.expert_offsets.data()};
  ex.xe = st.xe.data(), ex.gate = st.gate.data(), ex.up = st.up.data(), ex.act = st.act.data();
  ex.ye = ye_.data();
  return ex;
}

MoeExperts<float> MoeMemory<CpuBackend>::local_experts(int layer, const LayerShape& s, const MoeSaved<float>& sv,
                                                       int T) {
  Layer& st = layers_[size_t(layer)];
  const int64_t N = int64_t(T) * s.top_k;
  const size_t C = size_t(s.hidden), Im = size_t(s.moe_intermediate);
  st.xe.resize(size_t(N) * C);
  st.gate.resize(size_t(N) * Im);
  st.up.resize(size_t(N) * Im);
  st.act.resize(size_t(N) * Im);
  MoeExperts<float> ex;
  ex.N = N;
  ex.xe = st.xe.data(), ex.gate = st.gate.data(), ex.up = st.up.data(), ex.act = st.act.data();
  ex.ye = sv.yp;  // the experts' outputs are the token side's
  return ex;
}

// The experts' offsets are the routing's, kept on the host for the backward.
void MoeMemory<CpuBackend>::local_offsets(int layer, MoeExperts<float>& ex, const int32_t* offsets, int El,
                                          const Exec&) {
  Layer& st = layers_[size_t(layer)];
  st.expert_offsets.assign(offsets, offsets + El + 1);
  HONE_CHECK(st.expert_offsets[size_t(El)] == ex.N, "expert rows disagree with the plan");
  ex.offsets = {st.expert_offsets.data(), st.expert_offsets.data()};
}

MoeExperts<float> MoeMemory<CpuBackend>::experts(int layer, const LayerShape& s, const MoeSaved<float>&, int) {
  Layer& st = layers_[size_t(layer)];
  MoeExperts<float> ex;
  ex.N = st.expert_offsets[size_t(s.experts)];
  ex.offsets = {st.expert_offsets.data(), st.expert_offsets.data()};
  ex.xe = st.xe.data(), ex.gate = st.gate.data(), ex.up = st.up.data(), ex.act = st.act.data();
  return ex;
}

MoeExpertGrads<float> MoeMemory<CpuBackend>::expert_grads(int, const LayerShape& s, const MoeExperts<float>& ex,
                                                          const MoeBackwardScratch<float>& bs, int T, const Exec&) {
  const size_t N = size_t(ex.N), C = size_t(s.hidden), Im = size_t(s.moe_intermediate);
  MoeExpertGrads<float> g;
  g.dye = bs.dyp;
  if (dispatched_) {
    dye_.resize(N * C);
    g.dye = dye_.data();
    dxp_.resize(size_t(T) * size_t(s.top_k) * C);
    g.dxp = dxp_.data();
  }
  dact_.resize(N * Im);
  dgate_.resize(N * Im);
  dup_.resize(N * Im);
  dxe_.resize(N * C);
  g.dact = dact_.data(), g.dgate = dgate_.data(), g.dup = dup_.data(), g.dxe = dxe_.data();
  return g;
}

// ---- CUDA: carved from the layer body's regions, the pool under expert parallelism ------------------------------

#if HONE_CUDA

namespace {

// A sparse layer's saved region: routing (and at ep = 1 the expert-side rows, N = T k).
size_t carve_saved(MoeSaved<bf16>& v, char* base, const LayerShape& s, int T) {
  const int64_t Nt = int64_t(T) * s.top_k, E = s.experts_total, C = s.hidden, Im = s.moe_intermediate;
  cuda::Carver c{base};
  v.probs = c.take<float>(int64_t(T) * E);
  v.topk_w = c.take<float>(Nt);
  v.topk = c.take<int32_t>(Nt);
  v.offsets = c.take<int32_t>(E + 1);
  v.row_of = c.take<int32_t>(Nt);
  v.token_of = c.take<int32_t>(Nt);
  v.yp = c.take<bf16>(Nt * C);
  if (s.ep == 1) {
    v.xe = c.take<bf16>(Nt * C);
    v.gate = c.take<bf16>(Nt * Im);
    v.up = c.take<bf16>(Nt * Im);
    v.act = c.take<bf16>(Nt * Im);
  }
  return c.used;
}

size_t carve_forward(MoeForwardScratch<bf16>& v, char* base, const LayerShape& s, int T) {
  const int64_t Nt = int64_t(T) * s.top_k;
  cuda::Carver c{base};
  v.logits = c.take<float>(int64_t(T) * s.experts_total);
  v.route_bytes = cuda::moe_route_workspace_bytes(int(Nt), s.experts_total);
  v.route = c.take<char>(int64_t(v.route_bytes));
  v.xp = s.ep > 1 ? c.take<bf16>(Nt * s.hidden) : nullptr;
  return c.used;
}

size_t carve_backward(MoeBackwardScratch<bf16>& v, char* base, const LayerShape& s, int T) {
  const int64_t Nt = int64_t(T) * s.top_k, E = s.experts_total, C = s.hidden, Im = s.moe_intermediate;
  cuda::Carver c{base};
  v.dyp = c.take<bf16>(Nt * C);
  v.dtopk_w = c.take<float>(Nt);
  v.dlogits = c.take<float>(int64_t(T) * E);
  v.dlogits_act = c.take<bf16>(int64_t(T) * E);
  if (s.ep == 1) {
    v.dact = c.take<bf16>(Nt * Im);
    v.dgate = c.take<bf16>(Nt * Im);
    v.dup = c.take<bf16>(Nt * Im);
    v.dxe = c.take<bf16>(Nt * C);
  }
  return c.used;
}

// The expert-side rows of one layer under expert parallelism, one pool allocation each: the forward's xe and ye
// [N, C], gate, up and act [N, Im] (kept for the backward), the backward's gradients of the same sizes.
size_t pool_bytes(int64_t N, int C, int Im) {
  return size_t(N) * (2 * size_t(C) + 3 * size_t(Im)) * sizeof(bf16) + 5 * 256;
}

// The experts' GEMMs go through cuBLAS, one GEMM per expert (as Megatron's grouped GEMM does), when the pass is
// large enough for the host to wait for the routing: from kCublasRowsPerExpert rows per expert on average (training,
// logprobs, prefill). Decode steps (few rows, and captured in CUDA graphs, where nothing may wait for the host) take
// our one-launch kernel, which reads the offsets on the device. doc/performance.md has both measured.
constexpr int64_t kCublasRowsPerExpert = 64;
bool expert_gemms_by_cublas(int64_t rows, int experts, const cuda::GpuContext& ctx) {
  if (experts <= 0 || rows < kCublasRowsPerExpert * experts) return false;
  cudaStreamCaptureStatus capture = cudaStreamCaptureStatusNone;
  CUDA_CHECK(cudaStreamIsCapturing(ctx.stream, &capture));
  return capture == cudaStreamCaptureStatusNone;
}

const int32_t* host_or_null(const std::vector<int32_t>& host) { return host.empty() ? nullptr : host.data(); }

}  // namespace

FeedForwardBytes MoeMemory<CudaBackend>::bytes(const LayerShape& s, int T) {
  if (s.experts_total <= 0) return {};
  MoeSaved<bf16> sv;
  MoeForwardScratch<bf16> fs;
  MoeBackwardScratch<bf16> bs;
  return {carve_saved(sv, nullptr, s, T), carve_forward(fs, nullptr, s, T), carve_backward(bs, nullptr, s, T)};
}

MoeMemory<CudaBackend>::MoeMemory(int layers, int sparse_layers, int experts, bool dispatched)
    : dispatched_(dispatched),
      counts_(int64_t(sparse_layers) * experts, "expert counts"),
      prob_sum_(int64_t(sparse_layers) * experts, "router probability sums"),
      daux_(experts, "load-balancing gradient") {
  CUDA_CHECK(cudaMemset(counts_.get(), 0, counts_.bytes()));
  CUDA_CHECK(cudaMemset(prob_sum_.get(), 0, prob_sum_.bytes()));
  host_eo_.resize(size_t(layers));
  if (dispatched_) {
    expert_offsets_.resize(size_t(layers));
    expert_rows_.assign(size_t(layers), 0);
    pool_.assign(size_t(layers), nullptr);
  }
}

MoeSaved<bf16> MoeMemory<CudaBackend>::saved(int, const LayerShape& s, int T, char* region, bool) {
  HONE_CHECK(region, "the mixture of experts' regions are not carved");
  MoeSaved<bf16> v;
  carve_saved(v, region, s, T);
  return v;
}

MoeForwardScratch<bf16> MoeMemory<CudaBackend>::forward_scratch(const LayerShape& s, int T, char* region) {
  HONE_CHECK(region, "the mixture of experts' regions are not carved");
  MoeForwardScratch<bf16> v;
  carve_forward(v, region, s, T);
  return v;
}

MoeBackwardScratch<bf16> MoeMemory<CudaBackend>::backward_scratch(const LayerShape& s, int T, char* region) {
  HONE_CHECK(region, "the mixture of experts' regions are not carved");
  MoeBackwardScratch<bf16> v;
  carve_backward(v, region, s, T);
  return v;
}

const int64_t* MoeMemory<CudaBackend>::route_counts(const int32_t* offsets, int E, const Exec& x) {
  const cuda::GpuContext& ctx = x.ctx();
  host_offsets_.resize(size_t(E) + 1);
  CUDA_CHECK(cudaMemcpyAsync(host_offsets_.data(), offsets, host_offsets_.size() * sizeof(int32_t),
                             cudaMemcpyDeviceToHost, ctx.stream));
  CUDA_CHECK(cudaStreamSynchronize(ctx.stream));  // the counts cross the group before the rows
  host_counts_.resize(size_t(E));
  for (int e = 0; e < E; ++e) host_counts_[size_t(e)] = host_offsets_[size_t(e) + 1] - host_offsets_[size_t(e)];
  return host_counts_.data();
}

int64_t* MoeMemory<CudaBackend>::expert_counts(int El) {
  host_expert_counts_.resize(size_t(El));
  return host_expert_counts_.data();
}

MoeExperts<bf16> MoeMemory<CudaBackend>::dispatched_experts(int layer, const LayerShape& s, int64_t N,
                                                            const Exec& x) {
  const cuda::GpuContext& ctx = x.ctx();
  const int El = s.experts, C = s.hidden, Im = s.moe_intermediate;
  std::vector<int32_t> off(size_t(El) + 1, 0);
  for (int e = 0; e < El; ++e) off[size_t(e) + 1] = off[size_t(e)] + int32_t(host_expert_counts_[size_t(e)]);
  DeviceArray<int32_t>& d_off = expert_offsets_[size_t(layer)];
  if (d_off.size() < El + 1) d_off = DeviceArray<int32_t>(El + 1, "expert offsets");
  CUDA_CHECK(cudaMemcpyAsync(d_off.get(), off.data(), off.size() * sizeof(int32_t), cudaMemcpyHostToDevice,
                             ctx.stream));
  host_eo_[size_t(layer)].clear();
  if (expert_gemms_by_cublas(N, El, ctx)) host_eo_[size_t(layer)] = off;
  if (pool_[size_t(layer)]) CUDA_CHECK(cudaFreeAsync(pool_[size_t(layer)], ctx.stream));
  // At least a little: a generation idle pass may receive no rows at all.
  CUDA_CHECK(cudaMallocAsync(&pool_[size_t(layer)], std::max<size_t>(pool_bytes(N, C, Im), 256), ctx.stream));
  expert_rows_[size_t(layer)] = N;
  cuda::Carver c{static_cast<char*>(pool_[size_t(layer)])};
  MoeExperts<bf16> ex;
  ex.N = N;
  ex.offsets = {d_off.get(), host_or_null(host_eo_[size_t(layer)])};
  ex.xe = c.take<bf16>(N * C);
  ex.gate = c.take<bf16>(N * Im);
  ex.up = c.take<bf16>(N * Im);
  ex.act = c.take<bf16>(N * Im);
  ex.ye = c.take<bf16>(N * C);
  return ex;
}

// ep = 1: the permuted rows themselves, carved with the routing; the experts' offsets are the routing's.
MoeExperts<bf16> MoeMemory<CudaBackend>::local_experts(int, const LayerShape& s, const MoeSaved<bf16>& sv, int T) {
  MoeExperts<bf16> ex;
  ex.N = int64_t(T) * s.top_k;
  ex.offsets = {sv.offsets, nullptr};
  ex.xe = sv.xe, ex.gate = sv.gate, ex.up = sv.up, ex.act = sv.act, ex.ye = sv.yp;
  return ex;
}

void MoeMemory<CudaBackend>::local_offsets(int layer, MoeExperts<bf16>& ex, const int32_t* offsets, int El,
                                           const Exec& x) {
  const cuda::GpuContext& ctx = x.ctx();
  std::vector<int32_t>& host = host_eo_[size_t(layer)];
  host.clear();
  if (expert_gemms_by_cublas(ex.N, El, ctx)) {  // the routing's offsets to the host: the pass waits for them here
    host.resize(size_t(El) + 1);
    CUDA_CHECK(cudaMemcpyAsync(host.data(), offsets, host.size() * sizeof(int32_t), cudaMemcpyDeviceToHost,
                               ctx.stream));
    CUDA_CHECK(cudaStreamSynchronize(ctx.stream));
  }
  ex.offsets.host = host_or_null(host);
}

// The forward's expert side and its choice of path for the experts' GEMMs (its offsets on the host when cuBLAS ran
// them).
MoeExperts<bf16> MoeMemory<CudaBackend>::experts(int layer, const LayerShape& s, const MoeSaved<bf16>& sv, int T) {
  const int C = s.hidden, Im = s.moe_intermediate;
  const int32_t* host = host_or_null(host_eo_[size_t(layer)]);
  if (!dispatched_) {
    MoeExperts<bf16> ex = local_experts(layer, s, sv, T);
    ex.offsets.host = host;
    return ex;
  }
  MoeExperts<bf16> ex;
  ex.N = expert_rows_[size_t(layer)];
  ex.offsets = {expert_offsets_[size_t(layer)].get(), host};
  HONE_CHECK(pool_[size_t(layer)], "backward of layer ", layer, " without its forward's expert rows");
  cuda::Carver c{static_cast<char*>(pool_[size_t(layer)])};
  ex.xe = c.take<bf16>(ex.N * C);
  ex.gate = c.take<bf16>(ex.N * Im);
  ex.up = c.take<bf16>(ex.N * Im);
  ex.act = c.take<bf16>(ex.N * Im);
  return ex;
}

MoeExpertGrads<bf16> MoeMemory<CudaBackend>::expert_grads(int, const LayerShape& s, const MoeExperts<bf16>& ex,
                                                          const MoeBackwardScratch<bf16>& bs, int, const Exec& x) {
  MoeExpertGrads<bf16> g;
  if (!dispatched_) {
    g.dye = bs.dyp, g.dact = bs.dact, g.dgate = bs.dgate, g.dup = bs.dup, g.dxe = bs.dxe;
    return g;
  }
  const int64_t N = ex.N, C = s.hidden, Im = s.moe_intermediate;
  char* grads = nullptr;
  CUDA_CHECK(cudaMallocAsync(reinterpret_cast<void**>(&grads), pool_bytes(N, int(C), int(Im)), x.ctx().stream));
  cuda::Carver d{grads};
  g.dye = d.take<bf16>(N * C);
  g.dact = d.take<bf16>(N * Im);
  g.dgate = d.take<bf16>(N * Im);
  g.dup = d.take<bf16>(N * Im);
  g.dxe = d.take<bf16>(N * C);
  g.dxp = bs.dyp;  // spent by then: the token-side input gradients go there
  g.block = grads;
  return g;
}

// Expert parallelism, after the backward's combine: the gradients' and the forward's pool memory go back.
void MoeMemory<CudaBackend>::end_backward(int layer, MoeExpertGrads<bf16>& g, const Exec& x) {
  const cuda::GpuContext& ctx = x.ctx();
  CUDA_CHECK(cudaFreeAsync(g.block, ctx.stream));
  g.block = nullptr;
  CUDA_CHECK(cudaFreeAsync(pool_[size_t(layer)], ctx.stream));
  pool_[size_t(layer)] = nullptr;
}

void MoeMemory<CudaBackend>::release(const Exec& x) {
  const cuda::GpuContext& ctx = x.ctx();
  for (void*& p : pool_)
    if (p) {
      CUDA_CHECK(cudaFreeAsync(p, ctx.stream));
      p = nullptr;
    }
}

#endif  // HONE_CUDA

}  // namespace hone
