// The GPU mixture-of-experts feed-forward (what it computes and where its memory lives: gpu_moe_feed_forward.h).
#include "model/gpu_moe_feed_forward.h"

#if HONE_CUDA

#include <algorithm>

#include "cuda/carver.h"
#include "cuda/check.h"
#include "cuda/gemm.h"
#include "cuda/moe_ops.h"
#include "backend/op_profiler.h"
#include "runtime/error.h"

namespace hone {

namespace {

// A sparse layer's saved region: routing (and at ep = 1 the expert-side rows, N = T k).
struct Saved {
  float* probs = nullptr, *topk_w = nullptr;
  int32_t* topk = nullptr, *offsets = nullptr, *row_of = nullptr, *token_of = nullptr;
  bf16* yp = nullptr, *xe = nullptr, *gate = nullptr, *up = nullptr, *act = nullptr;
};
size_t carve_saved(Saved& v, char* base, const LayerShape& s, int T) {
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

struct ForwardScratch {
  float* logits = nullptr;
  char* route = nullptr;
  size_t route_bytes = 0;
  bf16* xp = nullptr;  // expert parallelism: the token-side rows before the dispatch
};
size_t carve_forward(ForwardScratch& v, char* base, const LayerShape& s, int T) {
  const int64_t Nt = int64_t(T) * s.top_k;
  cuda::Carver c{base};
  v.logits = c.take<float>(int64_t(T) * s.experts_total);
  v.route_bytes = cuda::moe_route_workspace_bytes(int(Nt), s.experts_total);
  v.route = c.take<char>(int64_t(v.route_bytes));
  v.xp = s.ep > 1 ? c.take<bf16>(Nt * s.hidden) : nullptr;
  return c.used;
}

struct BackwardScratch {
  bf16* dyp = nullptr, *dlogits16 = nullptr;
  float* dtopk_w = nullptr, *dlogits = nullptr;
  bf16* dact = nullptr, *dgate = nullptr, *dup = nullptr, *dxe = nullptr;  // ep = 1 (N = T k)
};
size_t carve_backward(BackwardScratch& v, char* base, const LayerShape& s, int T) {
  const int64_t Nt = int64_t(T) * s.top_k, E = s.experts_total, C = s.hidden, Im = s.moe_intermediate;
  cuda::Carver c{base};
  v.dyp = c.take<bf16>(Nt * C);
  v.dtopk_w = c.take<float>(Nt);
  v.dlogits = c.take<float>(int64_t(T) * E);
  v.dlogits16 = c.take<bf16>(int64_t(T) * E);
  if (s.ep == 1) {
    v.dact = c.take<bf16>(Nt * Im);
    v.dgate = c.take<bf16>(Nt * Im);
    v.dup = c.take<bf16>(Nt * Im);
    v.dxe = c.take<bf16>(Nt * C);
  }
  return c.used;
}

void zero(void* p, size_t bytes, const cuda::GpuContext& ctx) {
  if (bytes > 0) CUDA_CHECK(cudaMemsetAsync(p, 0, bytes, ctx.stream));
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

// out = x w[e]^T over each expert's rows: cuBLAS where the host holds the offsets (host_offsets non-empty), else the
// kernel.
void expert_linear_forward(bf16* out, const bf16* x, const bf16* w, const int32_t* offsets,
                           const std::vector<int32_t>& host_offsets, int E, int IC, int OC, int64_t rows,
                           const cuda::GpuContext& ctx) {
  if (!host_offsets.empty()) cuda::moe_grouped_linear_forward_cublas(out, x, w, host_offsets.data(), E, IC, OC, ctx);
  else cuda::moe_grouped_linear_forward(out, x, w, offsets, E, IC, OC, int(rows), ctx);
}
void expert_linear_backward(bf16* dx, float* dw, const bf16* dout, const bf16* x, const bf16* w,
                            const int32_t* offsets, const std::vector<int32_t>& host_offsets, int E, int IC, int OC,
                            int64_t rows, const cuda::GpuContext& ctx) {
  if (!host_offsets.empty())
    cuda::moe_grouped_linear_backward_cublas(dx, dw, dout, x, w, host_offsets.data(), E, IC, OC, ctx);
  else cuda::moe_grouped_linear_backward(dx, dw, dout, x, w, offsets, E, IC, OC, int(rows), ctx);
}

}  // namespace

size_t gpu_moe_saved_bytes(const LayerShape& s, int T) {
  Saved v;
  return s.experts_total > 0 ? carve_saved(v, nullptr, s, T) : 0;
}
size_t gpu_moe_forward_scratch_bytes(const LayerShape& s, int T) {
  ForwardScratch v;
  return s.experts_total > 0 ? carve_forward(v, nullptr, s, T) : 0;
}
size_t gpu_moe_backward_scratch_bytes(const LayerShape& s, int T) {
  BackwardScratch v;
  return s.experts_total > 0 ? carve_backward(v, nullptr, s, T) : 0;
}

template <>
std::unique_ptr<LayerFeedForward<CudaBackend>> make_layer_feed_forward<CudaBackend>(const ModelConfig& c,
                                                                                    ExpertDispatch<bf16>* dispatch) {
  if (c.is_moe()) return std::make_unique<GpuMoeFeedForward>(c, dispatch);
  return std::make_unique<DenseFeedForward<CudaBackend>>();
}

// The expert-side rows of one layer under expert parallelism, one pool allocation each: the forward's xe and ye
// [N, C], gate, up and act [N, Im] (kept for the backward), the backward's gradients of the same sizes.
struct GpuMoeFeedForward::Pool {
  static size_t bytes(int64_t N, int C, int Im) {
    return size_t(N) * (2 * size_t(C) + 3 * size_t(Im)) * sizeof(bf16) + 5 * 256;
  }
};

GpuMoeFeedForward::GpuMoeFeedForward(const ModelConfig& c, ExpertDispatch<bf16>* dispatch)
    : E_(c.num_experts), k_(c.num_experts_per_tok), L_(c.num_hidden_layers), dispatch_(dispatch) {
  HONE_CHECK(c.is_moe(), "a mixture-of-experts feed-forward for a model without experts");
  layer_sparse_.assign(size_t(L_), -1);
  for (int l = 0; l < L_; ++l)
    if (c.is_moe_layer(l)) layer_sparse_[size_t(l)] = sparse_layers_++;
  rows_.assign(size_t(sparse_layers_), 0);
  counts_ = DeviceArray<int32_t>(int64_t(sparse_layers_) * E_, "expert counts");
  prob_sum_ = DeviceArray<float>(int64_t(sparse_layers_) * E_, "router probability sums");
  daux_ = DeviceArray<float>(E_, "load-balancing gradient");
  CUDA_CHECK(cudaMemset(counts_.get(), 0, counts_.bytes()));
  CUDA_CHECK(cudaMemset(prob_sum_.get(), 0, prob_sum_.bytes()));
  host_eo_.resize(size_t(L_));
  if (dispatch_) {
    expert_offsets_.resize(size_t(L_));
    expert_rows_.assign(size_t(L_), 0);
    pool_.assign(size_t(L_), nullptr);
  }
}

void GpuMoeFeedForward::forward(int layer, const LayerShape& s, const W& w, const LayerBatch& b, const Acts& a,
                                const Scratch& scratch, LayerCollectives<bf16>* collectives, bf16* y, bf16* out,
                                const Exec& x) {
  const cuda::GpuContext& ctx = x.ctx();
  GpuOpProfiler* prof = x.prof;
  if (!sparse(layer)) {
    dense_.forward(layer, s, w, b, a, scratch, collectives, y, out, x);
    return;
  }
  const int T = b.T, Tl = collectives ? collectives->local_rows(T) : T;
  const int64_t C = s.hidden;
  if (Tl != T) collectives->gather_sequence(a.h2_local, a.h2, int64_t(Tl) * C);
  sparse_forward(layer, s, w, b, a, scratch, y, ctx, prof);
  // A generation idle pass has no rows (T = 0 on every rank of the tensor-parallel group alike): nothing to reduce.
  if (collectives && T > 0) collectives->reduce_row_parallel_output(y, out, int64_t(T) * C);
}

void GpuMoeFeedForward::backward(int layer, const LayerShape& s, const W& w, const LayerGradPtrs& g, const LayerBatch& b,
                                 const Acts& a, const Scratch& scratch, LayerCollectives<bf16>* collectives,
                                 bf16* dres, const Exec& x) {
  const cuda::GpuContext& ctx = x.ctx();
  GpuOpProfiler* prof = x.prof;
  if (!sparse(layer)) {
    dense_.backward(layer, s, w, g, b, a, scratch, collectives, dres, x);
    return;
  }
  const int T = b.T, Tl = collectives ? collectives->local_rows(T) : T;
  const int64_t C = s.hidden, TC = int64_t(T) * C, TlC = int64_t(Tl) * C;
  // The residual gradient of all T rows (the gradient of a reduce-scatter is an all-gather), and the normed rows
  // gathered again (the layers share one place for them).
  const bf16* dy = dres;
  if (Tl != T) {
    collectives->gather_sequence(dres, scratch.dy, TlC);
    dy = scratch.dy;
    collectives->gather_sequence(a.h2_local, a.h2, TlC);
  }
  zero(scratch.dh, size_t(TC) * sizeof(bf16), ctx);
  sparse_backward(layer, s, w, g, b, a, scratch, dy, scratch.dh, ctx, prof);
  if (collectives) collectives->reduce_column_parallel_input_grad(scratch.dh, scratch.dh_local, TC);
}

void GpuMoeFeedForward::sparse_forward(int layer, const LayerShape& s, const W& w, const LayerBatch& b, const Acts& a,
                                       const Scratch& scratch, bf16* y, const cuda::GpuContext& ctx,
                                       GpuOpProfiler* prof) {
  const int T = b.T, C = s.hidden, E = E_, k = k_, Im = s.moe_intermediate, El = s.experts;
  const int i = layer_sparse_[size_t(layer)];
  const int64_t Nt = int64_t(T) * k;
  HONE_CHECK(a.ffn && scratch.ffn, "the mixture of experts' regions are not carved");
  Saved sv;
  carve_saved(sv, a.ffn, s, T);
  ForwardScratch fs;
  carve_forward(fs, scratch.ffn, s, T);
  const int counted = counted_rows_ < 0 ? T : std::min(T, counted_rows_);
  rows_[size_t(i)] = counted;
  {
    ProfileScope ps(prof, "moe_router");
    cuda::gemm(false, true, T, E, C, 1.f, a.h2, C, w.router, C, 0.f, fs.logits, cuda::GemmOut::f32, E, nullptr, ctx);
    cuda::moe_topk_forward(sv.probs, sv.topk, sv.topk_w, fs.logits, T, E, k, s.norm_topk_prob, ctx);
    if (forced_)
      cuda::moe_topk_replay(sv.topk, sv.topk_w, sv.probs, forced_ + int64_t(i) * k, int64_t(sparse_layers_) * k, T,
                            E, k, s.norm_topk_prob, ctx);
    if (record_ && T > 0)
      CUDA_CHECK(cudaMemcpy2DAsync(record_ + int64_t(i) * k, size_t(sparse_layers_) * k * sizeof(int32_t), sv.topk,
                                   size_t(k) * sizeof(int32_t), size_t(k) * sizeof(int32_t), size_t(T),
                                   cudaMemcpyDeviceToDevice, ctx.stream));
    cuda::moe_route(sv.offsets, sv.row_of, sv.token_of, sv.topk, T, k, E, fs.route, fs.route_bytes, ctx);
    cuda::moe_expert_counts(counts_.get() + int64_t(i) * E, sv.topk, counted, k, E, ctx);
    zero(prob_sum_.get() + int64_t(i) * E, size_t(E) * sizeof(float), ctx);
    cuda::moe_router_stats(prob_sum_.get() + int64_t(i) * E, sv.probs, counted, E, ctx);
  }
  // The expert side: this rank's rows (ep = 1: the permuted rows themselves, carved), or what the group sends.
  const int32_t* eo = sv.offsets;
  int64_t N = Nt;
  bf16* xe = sv.xe, *gate = sv.gate, *up = sv.up, *act = sv.act, *ye = sv.yp;
  if (dispatch_) {
    ProfileScope ps(prof, "moe_dispatch");
    host_offsets_.resize(size_t(E) + 1);
    CUDA_CHECK(cudaMemcpyAsync(host_offsets_.data(), sv.offsets, host_offsets_.size() * sizeof(int32_t),
                               cudaMemcpyDeviceToHost, ctx.stream));
    CUDA_CHECK(cudaStreamSynchronize(ctx.stream));  // the counts cross the group before the rows
    host_counts_.resize(size_t(E));
    for (int e = 0; e < E; ++e) host_counts_[size_t(e)] = host_offsets_[size_t(e) + 1] - host_offsets_[size_t(e)];
    host_expert_counts_.resize(size_t(El));
    N = dispatch_->plan(layer, host_counts_.data(), host_expert_counts_.data());
    std::vector<int32_t> off(size_t(El) + 1, 0);
    for (int e = 0; e < El; ++e) off[size_t(e) + 1] = off[size_t(e)] + int32_t(host_expert_counts_[size_t(e)]);
    DeviceArray<int32_t>& d_off = expert_offsets_[size_t(layer)];
    if (d_off.size() < El + 1) d_off = DeviceArray<int32_t>(El + 1, "expert offsets");
    CUDA_CHECK(cudaMemcpyAsync(d_off.get(), off.data(), off.size() * sizeof(int32_t), cudaMemcpyHostToDevice,
                               ctx.stream));
    eo = d_off.get();
    host_eo_[size_t(layer)].clear();
    if (expert_gemms_by_cublas(N, El, ctx)) host_eo_[size_t(layer)] = off;
    if (pool_[size_t(layer)]) CUDA_CHECK(cudaFreeAsync(pool_[size_t(layer)], ctx.stream));
    // At least a little: a generation idle pass may receive no rows at all.
    CUDA_CHECK(cudaMallocAsync(&pool_[size_t(layer)], std::max<size_t>(Pool::bytes(N, C, Im), 256), ctx.stream));
    expert_rows_[size_t(layer)] = N;
    cuda::Carver c{static_cast<char*>(pool_[size_t(layer)])};
    xe = c.take<bf16>(N * C);
    gate = c.take<bf16>(N * Im);
    up = c.take<bf16>(N * Im);
    act = c.take<bf16>(N * Im);
    ye = c.take<bf16>(N * C);
    cuda::moe_permute_forward(fs.xp, a.h2, sv.token_of, int(Nt), C, ctx);
    dispatch_->dispatch(layer, fs.xp, xe, C);
  } else {
    ProfileScope ps(prof, "moe_permute");
    cuda::moe_permute_forward(xe, a.h2, sv.token_of, int(Nt), C, ctx);
    std::vector<int32_t>& host = host_eo_[size_t(layer)];
    host.clear();
    if (expert_gemms_by_cublas(N, El, ctx)) {  // the routing's offsets to the host: the pass waits for them here
      host.resize(size_t(El) + 1);
      CUDA_CHECK(cudaMemcpyAsync(host.data(), sv.offsets, host.size() * sizeof(int32_t), cudaMemcpyDeviceToHost,
                                 ctx.stream));
      CUDA_CHECK(cudaStreamSynchronize(ctx.stream));
    }
  }
  const std::vector<int32_t>& host_eo = host_eo_[size_t(layer)];
  {
    ProfileScope ps(prof, "moe_grouped_gemm");
    expert_linear_forward(gate, xe, w.expert_gate, eo, host_eo, El, C, Im, N, ctx);
    expert_linear_forward(up, xe, w.expert_up, eo, host_eo, El, C, Im, N, ctx);
  }
  {
    ProfileScope ps(prof, "swiglu");
    cuda::swiglu_forward(act, gate, up, N * Im, ctx);
  }
  {
    ProfileScope ps(prof, "moe_grouped_gemm");
    expert_linear_forward(ye, act, w.expert_down, eo, host_eo, El, Im, C, N, ctx);
  }
  if (dispatch_) {
    ProfileScope ps(prof, "moe_combine");
    dispatch_->combine(layer, ye, sv.yp, C);
  }
  {
    ProfileScope ps(prof, "moe_unpermute");
    cuda::moe_unpermute_forward(y, sv.yp, sv.row_of, sv.topk_w, T, k, C, ctx);
  }
}

void GpuMoeFeedForward::sparse_backward(int layer, const LayerShape& s, const W& w, const LayerGradPtrs& g,
                                        const LayerBatch& b, const Acts& a, const Scratch& scratch, const bf16* dy,
                                        bf16* dh, const cuda::GpuContext& ctx, GpuOpProfiler* prof) {
  const int T = b.T, C = s.hidden, E = E_, k = k_, Im = s.moe_intermediate, El = s.experts;
  const int64_t Nt = int64_t(T) * k;
  HONE_CHECK(a.ffn && scratch.ffn_backward, "the mixture of experts' regions are not carved");
  Saved sv;
  carve_saved(sv, a.ffn, s, T);
  BackwardScratch bs;
  carve_backward(bs, scratch.ffn_backward, s, T);
  const int32_t* eo = sv.offsets;
  int64_t N = Nt;
  bf16* xe = sv.xe, *gate = sv.gate, *up = sv.up, *act = sv.act;
  bf16* dye = bs.dyp, *dact = bs.dact, *dgate = bs.dgate, *dup = bs.dup, *dxe = bs.dxe;
  char* grads = nullptr;
  // The forward's choice of path for the experts' GEMMs (its offsets on the host when cuBLAS ran them).
  const std::vector<int32_t>& host_eo = host_eo_[size_t(layer)];
  if (dispatch_) {
    N = expert_rows_[size_t(layer)];
    eo = expert_offsets_[size_t(layer)].get();
    HONE_CHECK(pool_[size_t(layer)], "backward of layer ", layer, " without its forward's expert rows");
    cuda::Carver c{static_cast<char*>(pool_[size_t(layer)])};
    xe = c.take<bf16>(N * C);
    gate = c.take<bf16>(N * Im);
    up = c.take<bf16>(N * Im);
    act = c.take<bf16>(N * Im);
    CUDA_CHECK(cudaMallocAsync(reinterpret_cast<void**>(&grads), Pool::bytes(N, C, Im), ctx.stream));
    cuda::Carver d{grads};
    dye = d.take<bf16>(N * C);
    dact = d.take<bf16>(N * Im);
    dgate = d.take<bf16>(N * Im);
    dup = d.take<bf16>(N * Im);
    dxe = d.take<bf16>(N * C);
  }
  {
    ProfileScope ps(prof, "moe_unpermute_backward");
    zero(bs.dyp, size_t(Nt) * C * sizeof(bf16), ctx);
    zero(bs.dtopk_w, size_t(Nt) * sizeof(float), ctx);
    cuda::moe_unpermute_backward(bs.dyp, bs.dtopk_w, dy, sv.yp, sv.row_of, sv.topk_w, T, k, C, ctx);
  }
  if (dispatch_) {
    ProfileScope ps(prof, "moe_dispatch");
    dispatch_->dispatch(layer, bs.dyp, dye, C);
  }
  {
    ProfileScope ps(prof, "moe_grouped_gemm_backward");
    zero(dact, size_t(N) * Im * sizeof(bf16), ctx);
    expert_linear_backward(dact, g.expert_down, dye, act, w.expert_down, eo, host_eo, El, Im, C, N, ctx);
  }
  {
    ProfileScope ps(prof, "swiglu_backward");
    cuda::swiglu_backward(dgate, dup, dact, gate, up, N * Im, /*accumulate=*/false, ctx);  // writes: no zeroing
  }
  {
    ProfileScope ps(prof, "moe_grouped_gemm_backward");
    zero(dxe, size_t(N) * C * sizeof(bf16), ctx);
    expert_linear_backward(dxe, g.expert_gate, dgate, xe, w.expert_gate, eo, host_eo, El, C, Im, N, ctx);
    expert_linear_backward(dxe, g.expert_up, dup, xe, w.expert_up, eo, host_eo, El, C, Im, N, ctx);
  }
  bf16* dxp = dxe;
  if (dispatch_) {
    ProfileScope ps(prof, "moe_combine");
    dxp = bs.dyp;  // spent: the token-side input gradients go there
    dispatch_->combine(layer, dxe, dxp, C);
    CUDA_CHECK(cudaFreeAsync(grads, ctx.stream));
    CUDA_CHECK(cudaFreeAsync(pool_[size_t(layer)], ctx.stream));
    pool_[size_t(layer)] = nullptr;
  }
  {
    ProfileScope ps(prof, "moe_permute_backward");
    cuda::moe_permute_backward(dh, dxp, sv.row_of, T, k, C, ctx);
  }
  {
    ProfileScope ps(prof, "moe_router_backward");
    zero(bs.dlogits, size_t(T) * E * sizeof(float), ctx);
    // The load-balancing loss's gradient on tensor-parallel rank 0 alone (the sums over tp then count it once).
    const float* daux = nullptr;
    if (aux_weight_ != 0 && s.tp_rank == 0) {
      double R = 0;
      for (int r : rows_) R += r;
      cuda::moe_aux_loss_backward(daux_.get(), counts_.get(), sparse_layers_, E,
                                  float(aux_weight_ * E / std::max(1.0, R * R)), ctx);
      daux = daux_.get();
    }
    // ... on the counted rows (padding rows are not in the loss).
    const int n = rows_[size_t(layer_sparse_[size_t(layer)])];
    cuda::moe_topk_backward(bs.dlogits, bs.dtopk_w, daux, sv.probs, sv.topk, sv.topk_w, n, E, k, s.norm_topk_prob,
                            ctx);
    if (n < T)
      cuda::moe_topk_backward(bs.dlogits + int64_t(n) * E, bs.dtopk_w + int64_t(n) * k, nullptr,
                              sv.probs + int64_t(n) * E, sv.topk + int64_t(n) * k, sv.topk_w + int64_t(n) * k, T - n,
                              E, k, s.norm_topk_prob, ctx);
    cuda::f32_to_bf16(bs.dlogits16, bs.dlogits, int64_t(T) * E, ctx);
    cuda::gemm(true, false, E, C, T, 1.f, bs.dlogits16, E, a.h2, C, 1.f, g.router, cuda::GemmOut::f32, C, nullptr, ctx);
    cuda::gemm(false, false, T, C, E, 1.f, bs.dlogits16, E, w.router, C, 1.f, dh, cuda::GemmOut::bf16, C, nullptr, ctx);
  }
}

double GpuMoeFeedForward::aux_loss(const cuda::GpuContext& ctx) {
  const std::vector<int32_t> counts = expert_counts(ctx);
  std::vector<float> P(prob_sum_.size());
  CUDA_CHECK(cudaMemcpyAsync(P.data(), prob_sum_.get(), prob_sum_.bytes(), cudaMemcpyDeviceToHost, ctx.stream));
  CUDA_CHECK(cudaStreamSynchronize(ctx.stream));
  double R = 0;
  for (int r : rows_) R += r;
  if (R == 0) return 0;
  double aux = 0;
  for (int e = 0; e < E_; ++e) {
    double f = 0, p = 0;
    for (int i = 0; i < sparse_layers_; ++i) f += counts[size_t(i) * E_ + size_t(e)], p += P[size_t(i) * E_ + size_t(e)];
    aux += (f / R) * (p / R);
  }
  return aux * E_;
}

std::vector<int32_t> GpuMoeFeedForward::expert_counts(const cuda::GpuContext& ctx) {
  std::vector<int32_t> c(size_t(counts_.size()));
  CUDA_CHECK(cudaMemcpyAsync(c.data(), counts_.get(), counts_.bytes(), cudaMemcpyDeviceToHost, ctx.stream));
  CUDA_CHECK(cudaStreamSynchronize(ctx.stream));
  return c;
}

void GpuMoeFeedForward::release(const Exec& x) {
  const cuda::GpuContext& ctx = x.ctx();
  for (void*& p : pool_)
    if (p) {
      CUDA_CHECK(cudaFreeAsync(p, ctx.stream));
      p = nullptr;
    }
}

}  // namespace hone

#endif  // HONE_CUDA
