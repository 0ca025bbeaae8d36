// The LM head fused with log-softmax gather and entropy on the GPU, in vocabulary chunks: no [T, V] logits buffer.
// Rows are taken R at a time (a row block) and the vocabulary chunk_v rows of W at a time; each logits chunk
// [R, n] is formed by a cuBLASLt GEMM in fp32 with alpha = 1/temperature, then a kernel folds it into per-row
// online statistics (cuda/lm_head.cu). Backward recomputes every chunk, turns it into dlogits (bf16: the operand
// type of the bf16 tensor-core GEMMs that follow) and accumulates dh (fp32 per row block, rounded into the bf16 dh
// once) and dW (fp32, directly). Same semantics as hone::cpu::lm_head_logprob_forward/backward.
// The vocabulary-parallel slice ops (as hone::cpu::lm_head_vocab_slice_forward/backward) run the same drivers over
// the slice's vocab_valid rows of W with global ids from vocab_begin; the slice forward writes per-row statistics
// in place of the finished values.
//
// Two streams. The GEMMs run on tensor cores and are compute bound; the chunk kernels between them (the statistics of
// the forward, dlogits of the backward) are memory bound: they read back the fp32 chunk the GEMM just wrote, and that
// round trip through memory takes about as long as the GEMM's tensor-core work. In one stream they alternate and each
// leaves the other's resource idle, so the chunk kernels run on a side stream of the context, one chunk behind the
// GEMMs, with the chunk buffers doubled (chunk k uses buffer k % 2, chunks counted across row blocks):
//   forward   main: [wait stats(k-2) done] GEMM z(k) -> z[k%2], record z ready(k)
//             side: [wait z ready(k)] stats(k) reads z[k%2], record stats(k) done
//   backward  main: GEMM z(k+1) (as the forward) BEFORE [wait dlogits(k) done] dh GEMM(k), dW GEMM(k), record dz(k)
//                   read; accumulate into dh after a row block's last chunk
//             side: [wait z ready(k), dz(k-2) read] dlogits(k): z[k%2] -> dz[k%2], record dlogits(k) done
// so the statistics of chunk k run under the GEMM of chunk k+1, and dlogits of chunk k under the recompute GEMM of
// chunk k+1 (and dlogits of chunk k+1 under the two gradient GEMMs of chunk k). Every kernel and GEMM is the
// single-stream one, in the same order per stream: the row state is folded in chunk order by one stream, dh and dW
// accumulate in chunk order on the other; the results are those of one stream with the same row blocks.
// Each op first records an event on ctx.stream that the side stream waits on (the fork: the side stream never runs
// ahead of the caller's earlier work, such as the writes of h or targets, and a capture of ctx.stream extends to
// the side stream), and before returning makes ctx.stream wait on the side stream's last work (the join): callers
// see one stream, as with every other op. Cross-stream waits only name events recorded earlier in the same op.
//
// Work buffers live in the context's GEMM scratch (cuda/gemm.h), at most kScratchBudget bytes (a context may set
// another budget: set_lm_head_work_budget): R is chosen so that the row block's buffers (two chunks of each kind) fit.
// Unlike the CPU twin, rows without a target are not gathered out: they go through the GEMMs (the GPU never learns the
// count without a synchronization) and are masked by the kernels.
#include <algorithm>

#include "cuda/check.h"
#include "cuda/gemm.h"
#include "cuda/gpu_context_impl.h"
#include "cuda/lm_head_kernels.h"
#include "cuda/ops_cuda.h"
#include "runtime/error.h"

namespace hone::cuda {

namespace {

// Two chunks of each buffer: at chunk_v = 8192 the row blocks are as long as with one chunk in 128 MiB (about
// 4090 rows forward), so W is streamed as often as before and the backward's dW, read and written once per row
// block, costs no more traffic.
constexpr size_t kScratchBudget = size_t(256) << 20;
constexpr int kMaxRowBlock = 32768;

size_t round_up(size_t x) { return (x + 255) / 256 * 256; }

// The side stream of a context and the events between it and ctx.stream, created on the context's first LM head
// op. Events are reused from chunk to chunk: a wait is on the event's latest record at the time the wait is issued,
// and every wait is issued after the record it means (see the drivers).
struct LmHeadStreams {
  cudaStream_t side = nullptr;
  cudaEvent_t fork = nullptr, join = nullptr;
  cudaEvent_t z_ready[2] = {};    // main: the GEMM wrote z[b]
  cudaEvent_t side_done[2] = {};  // side: the chunk kernel has read z[b] (backward: and written dz[b])
  cudaEvent_t dz_read[2] = {};    // main: the backward's two GEMMs have read dz[b]
  size_t budget = kScratchBudget;
  LmHeadStreams() = default;
  LmHeadStreams(const LmHeadStreams&) = delete;
  LmHeadStreams& operator=(const LmHeadStreams&) = delete;
  ~LmHeadStreams() {  // destroy_gpu_context synchronizes ctx.stream, which every op joined the side stream into
    for (cudaEvent_t e : {fork, join, z_ready[0], z_ready[1], side_done[0], side_done[1], dz_read[0], dz_read[1]})
      if (e) cudaEventDestroy(e);
    if (side) cudaStreamDestroy(side);
  }
};

LmHeadStreams& streams_of(const GpuContext& ctx) {
  HONE_CHECK(ctx.impl != nullptr, "LM head on a GpuContext that was not created");
  auto& slot = ctx.impl->lm_head_state;
  if (!slot) {
    auto st = std::make_shared<LmHeadStreams>();
    int device = 0;
    CUDA_CHECK(cudaGetDevice(&device));
    if (device != ctx.impl->device) CUDA_CHECK(cudaSetDevice(ctx.impl->device));  // the stream's device
    // The highest priority: the chunk kernels are short and the GEMM two chunks later waits for them, so their
    // blocks should take SMs as soon as the GEMM's blocks leave them.
    int least = 0, greatest = 0;
    CUDA_CHECK(cudaDeviceGetStreamPriorityRange(&least, &greatest));
    CUDA_CHECK(cudaStreamCreateWithPriority(&st->side, cudaStreamNonBlocking, greatest));
    for (cudaEvent_t* e : {&st->fork, &st->join, &st->z_ready[0], &st->z_ready[1], &st->side_done[0],
                           &st->side_done[1], &st->dz_read[0], &st->dz_read[1]})
      CUDA_CHECK(cudaEventCreateWithFlags(e, cudaEventDisableTiming));
    if (device != ctx.impl->device) CUDA_CHECK(cudaSetDevice(device));
    slot = std::move(st);
  }
  return *static_cast<LmHeadStreams*>(slot.get());
}

void record(cudaEvent_t e, cudaStream_t s) { CUDA_CHECK(cudaEventRecord(e, s)); }
void wait(cudaStream_t s, cudaEvent_t e) { CUDA_CHECK(cudaStreamWaitEvent(s, e, 0)); }

// The side stream for the length of one op: forked from ctx.stream on construction, joined back by join() (or by
// the destructor when the op throws, so ctx.stream never runs ahead of side work that was queued).
class SideStream {
 public:
  explicit SideStream(const GpuContext& ctx) : main_(ctx), st_(streams_of(ctx)), side_(ctx) {
    side_.stream = st_.side;
    record(st_.fork, main_.stream);
    wait(st_.side, st_.fork);
  }
  SideStream(const SideStream&) = delete;
  SideStream& operator=(const SideStream&) = delete;
  ~SideStream() {
    if (joined_) return;
    cudaEventRecord(st_.join, st_.side);  // no throwing here: an exception is already on its way
    cudaStreamWaitEvent(main_.stream, st_.join, 0);
  }
  void join() {
    joined_ = true;
    record(st_.join, st_.side);
    wait(main_.stream, st_.join);
  }
  LmHeadStreams& events() { return st_; }
  const GpuContext& side_ctx() const { return side_; }  // ctx with the side stream: the kernels launch on it

 private:
  const GpuContext& main_;
  LmHeadStreams& st_;
  GpuContext side_;
  bool joined_ = false;
};

void check_args(int T, int C, int V, float temperature, int chunk_v) {
  HONE_CHECK(T >= 0 && C > 0 && V > 0, "bad LM head shape T=", T, " C=", C, " V=", V);
  HONE_CHECK(temperature > 0.f, "temperature must be positive, got ", temperature);
  HONE_CHECK(chunk_v > 0, "chunk_v must be positive, got ", chunk_v);
}

// Rows per block so that R * bytes_per_row fits the budget (at least 1, at most T).
int row_block(int T, size_t bytes_per_row, const GpuContext& ctx) {
  const size_t r = streams_of(ctx).budget / bytes_per_row;
  return int(std::max<size_t>(1, std::min<size_t>(r, size_t(std::min(T, kMaxRowBlock)))));
}

// z[R, n] = h[R, C] W[v0 : v0 + n, C]^T / temperature, fp32, row stride n.
void logits_chunk(float* z, const bf16* h, const bf16* w, int R, int C, int v0, int n, float temperature,
                  const GpuContext& ctx) {
  gemm(false, /*trans_b=*/true, R, n, C, 1.f / temperature, h, C, w + int64_t(v0) * C, C, 0.f, z, GemmOut::f32, n,
       nullptr, ctx);
}

// The outputs of the row block starting at row r0 (null pointers stay null).
LmHeadRowOutputs at_row(LmHeadRowOutputs o, int r0) {
  if (o.stats) {
    o.stats += r0;  // the stride stays T
  } else {
    o.logprob += r0;
    o.lse += r0;
    if (o.entropy) o.entropy += r0;
  }
  return o;
}

// The forward over the vocabulary rows W[0, V) whose global ids start at vocab_begin: per row block, every chunk's
// logits folded into the row state; the last chunk writes `out` (offset to the block by at_row).
void forward_rows(const bf16* h, const bf16* w, const int32_t* targets, int T, int C, int V, int vocab_begin,
                  float temperature, int chunk_v, LmHeadRowOutputs out, const GpuContext& ctx) {
  const int cv = std::min(chunk_v, V);
  // Per row: two logits chunks (fp32) and the state m, zt (fp32), s, u (fp64).
  const int RB =
      row_block(T, 2 * size_t(cv) * sizeof(float) + 2 * sizeof(float) + 2 * sizeof(double) + 64, ctx);
  const size_t z_bytes = round_up(size_t(RB) * cv * sizeof(float));
  const size_t d_bytes = round_up(size_t(RB) * sizeof(double));
  const size_t f_bytes = round_up(size_t(RB) * sizeof(float));
  char* base = static_cast<char*>(gemm_scratch(2 * z_bytes + 2 * d_bytes + 2 * f_bytes, ctx));
  float* z[2] = {reinterpret_cast<float*>(base), reinterpret_cast<float*>(base + z_bytes)};
  base += 2 * z_bytes;
  LmHeadRowState st{reinterpret_cast<float*>(base + 2 * d_bytes), reinterpret_cast<double*>(base),
                    reinterpret_cast<double*>(base + d_bytes), reinterpret_cast<float*>(base + 2 * d_bytes + f_bytes)};

  SideStream side(ctx);
  LmHeadStreams& ev = side.events();
  int64_t k = 0;  // the chunk's number over all row blocks: its buffer is z[k % 2]
  for (int r0 = 0; r0 < T; r0 += RB) {
    const int R = std::min(RB, T - r0);
    const LmHeadRowOutputs ob = at_row(out, r0);
    for (int v0 = 0; v0 < V; v0 += cv, ++k) {
      const int n = std::min(cv, V - v0);
      const int b = int(k % 2);
      if (k >= 2) wait(ctx.stream, ev.side_done[b]);  // the statistics of chunk k - 2 have read z[b]
      logits_chunk(z[b], h + int64_t(r0) * C, w, R, C, v0, n, temperature, ctx);
      record(ev.z_ready[b], ctx.stream);
      // The row state (and, on a row block's last chunk, `out`) is written by the side stream only, in chunk order;
      // the next row block's first chunk re-initializes it after the previous block's last chunk wrote `out`.
      wait(ev.side, ev.z_ready[b]);
      lm_head_chunk_stats(z[b], R, n, vocab_begin + v0, v0 == 0, v0 + n >= V, targets + r0, st, ob,
                          side.side_ctx());
      record(ev.side_done[b], ev.side);
    }
  }
  side.join();  // `out` is written on the side stream
}

// The backward over the vocabulary rows W[0, V) whose global ids start at vocab_begin: dh += dlogits W (through an
// fp32 block buffer, one bf16 rounding per row block), dW[0, V) += dlogits^T h.
void backward_rows(bf16* dh, float* dw, const float* dlogprob, const float* dentropy, const bf16* h, const bf16* w,
                   const int32_t* targets, const float* lse, const float* entropy, int T, int C, int V,
                   int vocab_begin, float temperature, int chunk_v, const GpuContext& ctx) {
  const int cv = std::min(chunk_v, V);
  // Per row: two logits chunks (fp32), two dlogits chunks (bf16) and dh of the block (fp32).
  const int RB =
      row_block(T, 2 * size_t(cv) * (sizeof(float) + sizeof(bf16)) + size_t(C) * sizeof(float) + 64, ctx);
  const size_t z_bytes = round_up(size_t(RB) * cv * sizeof(float));
  const size_t dz_bytes = round_up(size_t(RB) * cv * sizeof(bf16));
  const size_t dh_bytes = round_up(size_t(RB) * C * sizeof(float));
  char* base = static_cast<char*>(gemm_scratch(2 * z_bytes + 2 * dz_bytes + dh_bytes, ctx));
  float* z[2] = {reinterpret_cast<float*>(base), reinterpret_cast<float*>(base + z_bytes)};
  bf16* dz[2] = {reinterpret_cast<bf16*>(base + 2 * z_bytes), reinterpret_cast<bf16*>(base + 2 * z_bytes + dz_bytes)};
  float* dhb = reinterpret_cast<float*>(base + 2 * z_bytes + 2 * dz_bytes);

  // Chunk k (counted over all row blocks) is row block k / nv, vocabulary chunk k % nv; its buffers z[k % 2] and
  // dz[k % 2].
  const int nv = (V + cv - 1) / cv;
  const int64_t chunks = int64_t((T + RB - 1) / RB) * nv;
  struct Chunk {
    int r0, R, v0, n;
  };
  auto chunk = [&](int64_t k) {
    const int r0 = int(k / nv) * RB, v0 = int(k % nv) * cv;
    return Chunk{r0, std::min(RB, T - r0), v0, std::min(cv, V - v0)};
  };
  SideStream side(ctx);
  LmHeadStreams& ev = side.events();
  // The recompute GEMM of chunk k on main, then its dlogits kernel on the side stream.
  auto logits_and_dlogits = [&](int64_t k) {
    const Chunk c = chunk(k);
    const int b = int(k % 2);
    // dlogits of chunk k - 2 has read z[b] (main already waited for it before that chunk's GEMMs: kept explicit).
    if (k >= 2) wait(ctx.stream, ev.side_done[b]);
    logits_chunk(z[b], h + int64_t(c.r0) * C, w, c.R, C, c.v0, c.n, temperature, ctx);
    record(ev.z_ready[b], ctx.stream);
    wait(ev.side, ev.z_ready[b]);
    if (k >= 2) wait(ev.side, ev.dz_read[b]);  // the two GEMMs of chunk k - 2 have read dz[b]
    lm_head_chunk_dlogits(dz[b], z[b], c.R, c.n, vocab_begin + c.v0, targets + c.r0, dlogprob + c.r0,
                          dentropy ? dentropy + c.r0 : nullptr, lse + c.r0, entropy ? entropy + c.r0 : nullptr,
                          temperature, side.side_ctx());
    record(ev.side_done[b], ev.side);  // dz[b] written, z[b] free
  };

  if (chunks > 0) logits_and_dlogits(0);
  for (int64_t k = 0; k < chunks; ++k) {
    // The next chunk's recompute GEMM is queued on main before main waits for this chunk's dlogits: the kernel
    // runs under that GEMM instead of after it.
    if (k + 1 < chunks) logits_and_dlogits(k + 1);
    const Chunk c = chunk(k);
    const int b = int(k % 2);
    const bf16* hb = h + int64_t(c.r0) * C;
    wait(ctx.stream, ev.side_done[b]);
    // dhb[R, C] (=, then +=) dz[R, n] W[v0 : v0 + n, C]: after the previous row block's accumulate (main's order).
    gemm(false, false, c.R, C, c.n, 1.f, dz[b], c.n, w + int64_t(c.v0) * C, C, c.v0 == 0 ? 0.f : 1.f, dhb,
         GemmOut::f32, C, nullptr, ctx);
    // dW[v0 : v0 + n, C] += dz^T[n, R] h[R, C]
    gemm(/*trans_a=*/true, false, c.n, C, c.R, 1.f, dz[b], c.n, hb, C, 1.f, dw + int64_t(c.v0) * C, GemmOut::f32, C,
         nullptr, ctx);
    record(ev.dz_read[b], ctx.stream);
    if (c.v0 + c.n >= V) accumulate_f32_into_bf16(dh + int64_t(c.r0) * C, dhb, int64_t(c.R) * C, ctx);
  }
  side.join();
}

void check_slice(int V, int vocab_begin, int vocab_valid) {
  HONE_CHECK(vocab_begin >= 0, "vocab_begin must not be negative, got ", vocab_begin);
  HONE_CHECK(vocab_valid >= 0 && vocab_valid <= V, "vocab_valid ", vocab_valid, " outside [0, ", V, "]");
}

}  // namespace

void set_lm_head_work_budget(const GpuContext& ctx, size_t bytes) {
  streams_of(ctx).budget = bytes > 0 ? bytes : kScratchBudget;
}

void lm_head_logprob_forward(float* logprob, float* entropy, float* lse, const bf16* h, const bf16* w,
                             const int32_t* targets, int T, int C, int V, float temperature, int chunk_v,
                             const GpuContext& ctx) {
  check_args(T, C, V, temperature, chunk_v);
  if (T == 0) return;
  forward_rows(h, w, targets, T, C, V, 0, temperature, chunk_v, LmHeadRowOutputs{logprob, entropy, lse, nullptr, 0},
               ctx);
}

void lm_head_logprob_backward(bf16* dh, float* dw, const float* dlogprob, const float* dentropy, const bf16* h,
                              const bf16* w, const int32_t* targets, const float* lse, const float* entropy, int T,
                              int C, int V, float temperature, int chunk_v, const GpuContext& ctx) {
  check_args(T, C, V, temperature, chunk_v);
  HONE_CHECK(dentropy == nullptr || entropy != nullptr, "the entropy gradient needs the saved entropy");
  if (T == 0) return;
  backward_rows(dh, dw, dlogprob, dentropy, h, w, targets, lse, entropy, T, C, V, 0, temperature, chunk_v, ctx);
}

// The slice's chunks are its first vocab_valid rows of W: padding rows are never multiplied.
void lm_head_vocab_slice_forward(float* stats, const bf16* h, const bf16* w, const int32_t* targets, int T, int C,
                                 int V, int vocab_begin, int vocab_valid, float temperature, int chunk_v,
                                 const GpuContext& ctx) {
  check_args(T, C, V, temperature, chunk_v);
  check_slice(V, vocab_begin, vocab_valid);
  if (T == 0) return;
  if (vocab_valid == 0) return lm_head_stats_empty(stats, T, ctx);
  forward_rows(h, w, targets, T, C, vocab_valid, vocab_begin, temperature, chunk_v,
               LmHeadRowOutputs{nullptr, nullptr, nullptr, stats, T}, ctx);
}

void lm_head_vocab_slice_backward(bf16* dh, float* dw, const float* dlogprob, const float* dentropy, const bf16* h,
                                  const bf16* w, const int32_t* targets, const float* lse, const float* entropy,
                                  int T, int C, int V, int vocab_begin, int vocab_valid, float temperature,
                                  int chunk_v, const GpuContext& ctx) {
  check_args(T, C, V, temperature, chunk_v);
  check_slice(V, vocab_begin, vocab_valid);
  HONE_CHECK(dentropy == nullptr || entropy != nullptr, "the entropy gradient needs the saved entropy");
  if (T == 0 || vocab_valid == 0) return;
  backward_rows(dh, dw, dlogprob, dentropy, h, w, targets, lse, entropy, T, C, vocab_valid, vocab_begin, temperature,
                chunk_v, ctx);
}

void lm_head_logits(float* logits, const bf16* h, const bf16* w, int T, int C, int V, const GpuContext& ctx) {
  HONE_CHECK(T >= 0 && C > 0 && V > 0, "bad LM head shape T=", T, " C=", C, " V=", V);
  if (T == 0) return;
  gemm(false, /*trans_b=*/true, T, V, C, 1.f, h, C, w, C, 0.f, logits, GemmOut::f32, V, nullptr, ctx);
}

}  // namespace hone::cuda
