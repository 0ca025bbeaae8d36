// Tensor parallelism over the backend (what crosses ranks and why: tensor_parallel.h). Instantiated for every
// backend (backend/backend.h).
#include "parallel/tensor_parallel.h"

#include <algorithm>

#include "backend/strided_copy.h"
#include "runtime/error.h"

namespace hone {

template <typename B>
TensorParallelGroup<B>::TensorParallelGroup(const ModelConfig& c, Comm& tp, Exec exec, SequenceParallelism sp,
                                            const ShardLayout* stage)
    : c_(c),
      tp_(tp),
      exec_(exec),
      sp_(sp.on && tp.size() > 1),
      chunks_(sp.overlap ? std::max(1, sp.chunks) : 1),
      layout_(stage ? *stage : ShardLayout::of(c, tp.size(), tp.rank())),
      whole_rows_(*this),
      sequence_rows_(*this, sp_ && sp.overlap) {
  HONE_CHECK(tp.on_device() == B::kDeviceMemory, "the ", B::kName, " tensor-parallel group needs a ",
             B::kDeviceMemory ? "device Comm (NCCL)" : "host Comm");
}

// ---- whole rows ----

template <typename B>
void TensorParallelGroup<B>::WholeRows::gather_sequence(const A*, A*, int64_t) {
  HONE_CHECK(false, "whole token rows are never gathered");
}

template <typename B>
void TensorParallelGroup<B>::WholeRows::reduce_row_parallel_output(A* y, A* out, int64_t n) {
  g_.tp_.all_reduce_sum_raw(y, y, n, kActType);
  if (out != y) B::copy(g_.exec_, out, y, size_t(n) * sizeof(A));
}

// ---- this rank's rows ----

template <typename B>
TensorParallelGroup<B>::SequenceRows::SequenceRows(TensorParallelGroup& g, bool overlap)
    : g_(g),
      overlap_(B::sequence_overlap(g.tp_, g.exec_, overlap, g.chunks_ + 3)),
      ready_(g.chunks_),
      gathered_(g.chunks_ + 1),
      done_(g.chunks_ + 2) {}

template <typename B>
void TensorParallelGroup<B>::SequenceRows::post_gather(const SequenceChunks& ch, int j, const A* local, A* full,
                                                       int C) {
  overlap_.post_all_gather(local + int64_t(ch.local_begin(j)) * C, full + int64_t(ch.global_begin(j)) * C,
                           int64_t(ch.rows(j)) * C, kActType);
}

template <typename B>
void TensorParallelGroup<B>::SequenceRows::post_scatter(const SequenceChunks& ch, int j, const A* full, A* local,
                                                        int C) {
  overlap_.post_reduce_scatter_sum(full + int64_t(ch.global_begin(j)) * C, local + int64_t(ch.local_begin(j)) * C,
                                   int64_t(ch.rows(j)) * C, kActType);
}

// Chunk j of every rank's local rows lands in the gathered block of chunk j (parallel/sequence_chunks.h).
template <typename B>
void TensorParallelGroup<B>::SequenceRows::gather_sequence(const A* local, A* full, int64_t n) {
  const int64_t C = g_.shape().hidden;
  const SequenceChunks ch = g_.sequence_chunks(int(n / C) * g_.size());
  for (int j = 0; j < ch.count(); ++j)
    overlap_.all_gather(local + ch.local_begin(j) * C, full + ch.global_begin(j) * C, ch.rows(j) * C, kActType);
}

template <typename B>
void TensorParallelGroup<B>::SequenceRows::scatter_sum(const A* full, A* local, int64_t n) {
  const int64_t C = g_.shape().hidden;
  const SequenceChunks ch = g_.sequence_chunks(int(n / C));
  for (int j = 0; j < ch.count(); ++j)
    overlap_.reduce_scatter_sum(full + ch.global_begin(j) * C, local + ch.local_begin(j) * C, ch.rows(j) * C,
                                kActType);
}

template <typename B>
void TensorParallelGroup<B>::SequenceRows::gather_then(const A* local, A* full, int T, int C, const RowGemm& each) {
  const SequenceChunks ch = g_.sequence_chunks(T);
  overlap_.side_after_compute(ready_);  // local is written; the last readers of full are done
  for (int j = 0; j < ch.count(); ++j) {
    post_gather(ch, j, local, full, C);
    overlap_.mark_side(j);
  }
  if (!overlap_.split()) return each(0, T);
  for (int j = 0; j < ch.count(); ++j) {
    overlap_.compute_after(j);
    each(ch.global_begin(j), ch.global_rows(j));
  }
}

template <typename B>
void TensorParallelGroup<B>::SequenceRows::column_parallel_forward(const A* local, A* full, int T, int C,
                                                                   const RowGemm& gemm) {
  gather_then(local, full, T, C, gemm);
}

template <typename B>
void TensorParallelGroup<B>::SequenceRows::row_parallel_forward(A* y, A* out, int T, int C, const RowGemm& gemm) {
  const SequenceChunks ch = g_.sequence_chunks(T);
  const bool split = overlap_.split();
  if (!split) gemm(0, T);
  for (int j = 0; j < ch.count(); ++j) {
    if (split) gemm(ch.global_begin(j), ch.global_rows(j));
    overlap_.side_after_compute(j);  // chunk j's partial sums are written
    post_scatter(ch, j, y, out, C);
  }
  overlap_.mark_side(done_);
  overlap_.compute_after(done_);
}

template <typename B>
void TensorParallelGroup<B>::SequenceRows::row_parallel_backward(const A* dres, A* dy, int T, int C,
                                                                 const RowGemm& dgrad, const Gemm& wgrad) {
  gather_then(dres, dy, T, C, dgrad);
  wgrad();
}

template <typename B>
void TensorParallelGroup<B>::SequenceRows::column_parallel_backward(const A* local, A* full, A* dx, A* out, int T,
                                                                    int C, const RowGemm& dgrad, const Gemm& wgrad) {
  const SequenceChunks ch = g_.sequence_chunks(T);
  if (!overlap_.split()) {  // in one piece: the input gradient, the gathered rows, the weight gradient, the sum
    dgrad(0, T);
    for (int j = 0; j < ch.count(); ++j) post_gather(ch, j, local, full, C);
    wgrad();
    for (int j = 0; j < ch.count(); ++j) post_scatter(ch, j, dx, out, C);
    return;
  }
  overlap_.side_after_compute(ready_);
  for (int j = 0; j < ch.count(); ++j) post_gather(ch, j, local, full, C);
  overlap_.mark_side(gathered_);
  for (int j = 0; j < ch.count(); ++j) {
    dgrad(ch.global_begin(j), ch.global_rows(j));
    overlap_.side_after_compute(j);  // chunk j of the input gradient is complete
    post_scatter(ch, j, dx, out, C);
  }
  overlap_.mark_side(done_);
  overlap_.compute_after(gathered_);
  wgrad();
  overlap_.compute_after(done_);
}

// ---- the embedding and the LM head ----

template <typename B>
int TensorParallelGroup<B>::vocab_valid() const {
  const LayerShape& s = shape();
  return std::clamp(s.vocab_total - s.vocab_begin, 0, s.vocab);
}

template <typename B>
typename B::Act* TensorParallelGroup<B>::rows_scratch(int64_t n) {
  if (rows_.size() < n) {
    rows_ = Array<A>();  // the old buffer goes first
    rows_ = Array<A>(n, "tensor-parallel rows");
  }
  return rows_.get();
}

template <typename B>
void TensorParallelGroup<B>::gather_rows(const A* local, A* full, int T) {
  HONE_CHECK(sp_ && T % size() == 0, "gathering rows needs sequence parallelism and a multiple of ", size(),
             " tokens, got ", T);
  sequence_rows_.gather_sequence(local, full, int64_t(T / size()) * shape().hidden);
}

template <typename B>
void TensorParallelGroup<B>::embedding_forward(A* out, const int32_t* ids, const A* wte, int T, bool local) {
  const LayerShape& s = shape();
  const int64_t n = int64_t(T) * s.hidden;
  if (!local) {
    B::embedding_slice_forward(exec_, out, ids, wte, T, s.hidden, s.vocab_begin, s.vocab);
    tp_.all_reduce_sum_raw(out, out, n, kActType);
    return;
  }
  HONE_CHECK(sp_ && T % size() == 0, "sequence parallelism needs a multiple of ", size(), " tokens, got ", T);
  A* full = rows_scratch(n);
  B::embedding_slice_forward(exec_, full, ids, wte, T, s.hidden, s.vocab_begin, s.vocab);
  sequence_rows_.scatter_sum(full, out, n);
}

template <typename B>
void TensorParallelGroup<B>::embedding_backward(float* dwte, const A* dout, const int32_t* ids, int T, bool local) {
  const LayerShape& s = shape();
  if (local) {
    A* full = rows_scratch(int64_t(T) * s.hidden);
    gather_rows(dout, full, T);
    dout = full;
  }
  B::embedding_slice_backward(exec_, dwte, dout, ids, T, s.hidden, s.vocab_begin, s.vocab);
}

template <typename B>
void TensorParallelGroup<B>::lm_head_forward(float* logprob, float* entropy, float* lse, const A* h, const A* w,
                                             const int32_t* targets, int T, float temperature, int chunk_v) {
  const LayerShape& s = shape();
  if (stats_.size() < 4 * int64_t(T)) stats_ = Array<float>(4 * int64_t(T), "LM head statistics");
  if (max_.size() < int64_t(T)) max_ = Array<float>(int64_t(T), "LM head row maxima");
  B::lm_head_vocab_slice_forward(exec_, stats_.get(), h, w, targets, T, s.hidden, s.vocab, s.vocab_begin,
                                 vocab_valid(), temperature, chunk_v);
  tp_.all_reduce_max(stats_.get(), max_.get(), T);
  B::lm_head_stats_rescale(exec_, stats_.get(), max_.get(), T);
  tp_.all_reduce_sum(stats_.get() + T, 3 * int64_t(T));
  B::lm_head_stats_finish(exec_, logprob, entropy, lse, stats_.get(), targets, T);
}

template <typename B>
void TensorParallelGroup<B>::lm_head_backward(A* dh, float* dw, const float* dlogprob, const float* dentropy,
                                              const A* h, const A* w, const int32_t* targets, const float* lse,
                                              const float* entropy, int T, float temperature, int chunk_v,
                                              bool local) {
  const LayerShape& s = shape();
  // The slice's partial input gradient is summed over the group: dh must start without other ranks' partials, so
  // it is formed here from zero and added in.
  const int64_t n = int64_t(T) * s.hidden;
  A* partial = rows_scratch(n);
  B::zero(exec_, partial, size_t(n) * sizeof(A));
  B::lm_head_vocab_slice_backward(exec_, partial, dw, dlogprob, dentropy, h, w, targets, lse, entropy, T, s.hidden,
                                  s.vocab, s.vocab_begin, vocab_valid(), temperature, chunk_v);
  if (!local) {
    tp_.all_reduce_sum_raw(partial, partial, n, kActType);
    B::add_forward(exec_, dh, dh, partial, n);
    return;
  }
  HONE_CHECK(sp_ && T % size() == 0, "sequence parallelism needs a multiple of ", size(), " tokens, got ", T);
  const int64_t m = n / size();
  if (dh_local_.size() < m) {
    dh_local_ = Array<A>();
    dh_local_ = Array<A>(m, "LM head input gradient rows");
  }
  sequence_rows_.scatter_sum(partial, dh_local_.get(), n);
  B::add_forward(exec_, dh, dh, dh_local_.get(), m);
}

// ---- generation ----

template <typename B>
void TensorParallelGroup<B>::reserve_logits(int max_rows) {
  const int64_t n = int64_t(max_rows) * shape().vocab * size();
  if (logits_stage_.size() < n) {
    logits_stage_ = Array<float>();
    logits_stage_ = Array<float>(n, "vocabulary-parallel logits");
  }
}

template <typename B>
void TensorParallelGroup<B>::lm_head_logits(float* logits, const A* h, const A* w, int R) {
  const LayerShape& s = shape();
  if (R == 0) return;
  const int64_t block = int64_t(R) * s.vocab;
  if (!B::kDeviceMemory) reserve_logits(R);
  HONE_CHECK(logits_stage_.size() >= block * size(), "lm_head_logits of ", R, " rows: reserve_logits() first");
  float* stage = logits_stage_.get();
  B::lm_head_logits(exec_, stage + int64_t(rank()) * block, h, w, R, s.hidden, s.vocab);
  tp_.all_gather_in_place(stage, block);
  // Block r holds rows x [vocabulary r*vocab, (r+1)*vocab): the whole row is the blocks side by side, less padding.
  for (int r = 0; r < size(); ++r) {
    const int valid = std::clamp(s.vocab_total - r * s.vocab, 0, s.vocab);
    if (valid == 0) continue;
    copy_2d(exec_, logits + int64_t(r) * s.vocab, size_t(s.vocab_total) * sizeof(float), stage + int64_t(r) * block,
            size_t(s.vocab) * sizeof(float), size_t(valid) * sizeof(float), size_t(R));
  }
}

template <typename B>
template <typename T>
T TensorParallelGroup<B>::scalar_all_reduce(T x, bool min) {
  static_assert(sizeof(T) == sizeof(double), "the scalar buffer holds 8 bytes");
  if (size() == 1) return x;
  if (scalar_.size() < 1) scalar_ = Array<double>(1, "tensor-parallel scalar");
  T* d = reinterpret_cast<T*>(scalar_.get());
  B::upload(exec_, d, &x, sizeof(T));
  if (min) tp_.all_reduce_min(d, d, 1);
  else tp_.all_reduce_sum(d, 1);
  B::download(exec_, &x, d, sizeof(T));
  B::sync(exec_);
  return x;
}

template <typename B>
int64_t TensorParallelGroup<B>::min_over_group(int64_t v) {
  return scalar_all_reduce(v, /*min=*/true);
}

template <typename B>
double TensorParallelGroup<B>::sum_over_group(double x) {
  return scalar_all_reduce(x, /*min=*/false);
}

template <typename B>
void TensorParallelGroup<B>::synchronize(const std::string& what) {
  // Under the group's watchdog first (a hung rank is then an error naming `what`), then the rest of the stream.
  tp_.watch_stream(what);
  B::sync(exec_);
}

// ---- gradients and their norm ----

template <typename B>
void TensorParallelGroup<B>::sum_partial_gradients(ModelWeights& grads) {
  HONE_CHECK(grads.flat.numel() == layout_.num_local_params(), "gradients are not shaped as this rank's shard");
  sum_partial_gradients(grads.flat.f32());
}

template <typename B>
void TensorParallelGroup<B>::sum_partial_gradients(float* grads) {
  for (const ParamShard& p : layout_.params()) {
    float* g = grads + p.offset;
    // Under sequence parallelism every rank normed its own tokens: the norm weights' gradients are partial too.
    const bool token_norm = sp_ && p.spec.split == Split::replicated;
    if (!p.partial_grad && !token_norm) continue;
    if (p.slice.dim < 0) {
      tp_.all_reduce_sum(g, p.local_numel());  // one weight every rank's heads (or tokens) add to
      continue;
    }
    // Ranks sharing a KV head hold partial gradients of it: summed in the whole tensor, own rows taken back.
    const int64_t whole_n = p.spec.numel();
    if (kv_whole_.size() < whole_n) kv_whole_ = Array<float>(whole_n, "replicated KV gradient");
    float* whole = kv_whole_.get();
    B::zero(exec_, whole, size_t(whole_n) * sizeof(float));
    const std::vector<ShardRun> runs = ShardLayout::runs(p);
    for (const ShardRun& r : runs)
      if (r.valid) B::copy(exec_, whole + r.whole, g + r.local, size_t(r.n) * sizeof(float));
    tp_.all_reduce_sum(whole, whole_n);
    for (const ShardRun& r : runs) {
      if (r.valid) B::copy(exec_, g + r.local, whole + r.whole, size_t(r.n) * sizeof(float));
      else B::zero(exec_, g + r.local, size_t(r.n) * sizeof(float));
    }
  }
}

template <typename B>
double TensorParallelGroup<B>::weighted_sum_squares(const float* g, int64_t begin, int64_t n) const {
  return layout_.weighted_sum_squares(begin, n, [&](int64_t off, int64_t count) {
    return B::sum_squares(exec_, g + off, count);
  });
}

template <typename B>
ShardedNorm TensorParallelGroup<B>::sharded_norm() {
  ShardedNorm n;
  n.weighted_sum_squares = [this](const float* g, int64_t begin, int64_t count) {
    return weighted_sum_squares(g, begin, count);
  };
  n.sum = [this](double x) { return sum_over_group(x); };
  return n;
}

#define HONE_INSTANTIATE_TENSOR_PARALLEL(B) template class TensorParallelGroup<B>;
HONE_FOR_EACH_BACKEND(HONE_INSTANTIATE_TENSOR_PARALLEL)
#undef HONE_INSTANTIATE_TENSOR_PARALLEL

}  // namespace hone
