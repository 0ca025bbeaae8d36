// The CPU engine's tensor-parallel collectives (what crosses ranks and why: tensor_parallel.h).
#include "parallel/tensor_parallel.h"

#include <algorithm>
#include <cstring>

#include "ops/ops.h"
#include "runtime/error.h"

namespace hone {

TensorParallel::TensorParallel(const ModelConfig& c, Comm& tp, bool sequence_parallel, int sequence_chunks,
                               const ShardLayout* stage)
    : c_(c),
      tp_(tp),
      sp_(sequence_parallel && tp.size() > 1),
      chunks_(std::max(1, sequence_chunks)),
      layout_(stage ? *stage : ShardLayout::of(c, tp.size(), tp.rank())),
      whole_rows_(tp, false, 1, c.hidden_size),
      sequence_rows_(tp, true, chunks_, c.hidden_size) {
  HONE_CHECK(!tp.on_device(), "the CPU tensor-parallel group needs a host Comm");
}

// Chunk j of every rank's local rows lands in the gathered block of chunk j (parallel/sequence_chunks.h).
void TensorParallel::Rows::gather_sequence(const float* local, float* full, int64_t n) {
  const int64_t C = hidden_;
  const SequenceChunks ch(int(n / C) * tp_.size(), tp_.size(), chunks_);
  for (int j = 0; j < ch.count(); ++j)
    tp_.all_gather(local + ch.local_begin(j) * C, full + ch.global_begin(j) * C, ch.rows(j) * C);
}

void TensorParallel::Rows::scatter_sum(const float* full, float* local, int64_t n) {
  const int64_t C = hidden_;
  const SequenceChunks ch(int(n / C), tp_.size(), chunks_);
  for (int j = 0; j < ch.count(); ++j)
    tp_.reduce_scatter_sum(full + ch.global_begin(j) * C, local + ch.local_begin(j) * C, ch.rows(j) * C);
}

void TensorParallel::Rows::reduce(float* partial, float* out, int64_t n) {
  if (sequence_) return scatter_sum(partial, out, n);
  tp_.all_reduce_sum(partial, n);
  if (out != partial) std::memcpy(out, partial, size_t(n) * sizeof(float));
}

void TensorParallel::gather_rows(const float* local, float* full, int T) {
  HONE_CHECK(T % size() == 0, "sequence parallelism over ", size(), " ranks needs a multiple of ", size(),
             " tokens, got ", T);
  sequence_rows_.gather_sequence(local, full, int64_t(T / size()) * shape().hidden);
}

void TensorParallel::embedding_forward(float* out, const int32_t* ids, const float* wte, int T, bool local) {
  const LayerShape& s = shape();
  const int64_t n = int64_t(T) * s.hidden;
  if (!local) {
    cpu::embedding_slice_forward(out, ids, wte, T, s.hidden, s.vocab_begin, s.vocab);
    tp_.all_reduce_sum(out, n);
    return;
  }
  HONE_CHECK(T % size() == 0, "sequence parallelism needs a multiple of ", size(), " tokens, got ", T);
  full_.resize(size_t(n));
  cpu::embedding_slice_forward(full_.data(), ids, wte, T, s.hidden, s.vocab_begin, s.vocab);
  sequence_rows_.scatter_sum(full_.data(), out, n);
}

void TensorParallel::embedding_backward(float* dwte, const float* dout, const int32_t* ids, int T, bool local) {
  const LayerShape& s = shape();
  if (local) {
    full_.resize(size_t(T) * size_t(s.hidden));
    gather_rows(dout, full_.data(), T);
    dout = full_.data();
  }
  cpu::embedding_slice_backward(dwte, dout, ids, T, s.hidden, s.vocab_begin, s.vocab);
}

void TensorParallel::lm_head_forward(float* logprob, float* entropy, float* lse, const float* h, const float* w,
                                     const int32_t* targets, int T, float temperature, int chunk_v) {
  const LayerShape& s = shape();
  const int valid = std::clamp(s.vocab_total - s.vocab_begin, 0, s.vocab);
  stats_.resize(size_t(4) * size_t(T));
  max_.resize(size_t(T));
  cpu::lm_head_vocab_slice_forward(stats_.data(), h, w, targets, T, s.hidden, s.vocab, s.vocab_begin, valid,
                                   temperature, chunk_v);
  tp_.all_reduce_max(stats_.data(), max_.data(), T);
  cpu::lm_head_stats_rescale(stats_.data(), max_.data(), T);
  tp_.all_reduce_sum(stats_.data() + T, 3 * int64_t(T));
  cpu::lm_head_stats_finish(logprob, entropy, lse, stats_.data(), targets, T);
}

void TensorParallel::lm_head_backward(float* dh, float* dw, const float* dlogprob, const float* dentropy,
                                      const float* h, const float* w, const int32_t* targets, const float* lse,
                                      const float* entropy, int T, float temperature, int chunk_v, bool local) {
  const LayerShape& s = shape();
  const int valid = std::clamp(s.vocab_total - s.vocab_begin, 0, s.vocab);
  const int64_t n = int64_t(T) * s.hidden;
  dh_.assign(size_t(n), 0.f);
  cpu::lm_head_vocab_slice_backward(dh_.data(), dw, dlogprob, dentropy, h, w, targets, lse, entropy, T, s.hidden,
                                    s.vocab, s.vocab_begin, valid, temperature, chunk_v);
  int64_t m = n;
  const float* sum = dh_.data();
  if (local) {
    m = n / size();
    dh_local_.resize(size_t(m));
    sequence_rows_.scatter_sum(dh_.data(), dh_local_.data(), n);
    sum = dh_local_.data();
  } else {
    tp_.all_reduce_sum(dh_.data(), n);
  }
  for (int64_t i = 0; i < m; ++i) dh[i] += sum[i];
}

void TensorParallel::lm_head_logits(float* logits, const float* h, const float* w, int R) {
  const LayerShape& s = shape();
  if (R == 0) return;
  const int64_t block = int64_t(R) * s.vocab;
  logits_.resize(size_t(block) * size_t(size()));
  float* mine = logits_.data() + int64_t(rank()) * block;
  cpu::lm_head_logits(mine, h, w, R, s.hidden, s.vocab);
  tp_.all_gather_in_place(logits_.data(), block);
  // Block r holds rows x [vocabulary r*vocab, (r+1)*vocab); the whole row is the blocks side by side.
  const int V = s.vocab_total;
  for (int r = 0; r < size(); ++r) {
    const int begin = r * s.vocab, n = std::clamp(V - begin, 0, s.vocab);
    for (int i = 0; i < R; ++i)
      std::memcpy(logits + int64_t(i) * V + begin, logits_.data() + r * block + int64_t(i) * s.vocab,
                  size_t(n) * sizeof(float));
  }
}

void TensorParallel::sum_partial_gradients(ModelWeights& grads) {
  HONE_CHECK(grads.flat.numel() == layout_.num_local_params(), "gradients are not shaped as this rank's shard");
  for (const ParamShard& p : layout_.params()) {
    float* g = grads.flat.f32() + p.offset;
    // Under sequence parallelism every rank normed its own tokens: the norm weights' gradients are partial too.
    const bool token_norm = sp_ && p.spec.split == Split::replicated;
    if (!p.partial_grad && !token_norm) continue;
    if (p.slice.dim < 0) {
      tp_.all_reduce_sum(g, p.local_numel());  // one weight every rank's heads (or tokens) add to
    } else {
      // Ranks sharing a KV head hold partial gradients of it: sum in the whole tensor, take this rank's rows back.
      kv_whole_.assign(size_t(p.spec.numel()), 0.f);
      ShardLayout::insert(p, g, kv_whole_.data());
      tp_.all_reduce_sum(kv_whole_.data(), p.spec.numel());
      ShardLayout::extract(p, kv_whole_.data(), g);
    }
  }
}

double TensorParallel::weighted_sum_squares(const float* g, int64_t begin, int64_t n) const {
  return layout_.weighted_sum_squares(begin, n, [g](int64_t off, int64_t count) {
    return cpu::sum_squares(g + off, count);
  });
}

}  // namespace hone
