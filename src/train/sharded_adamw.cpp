// ShardedAdamW<B> (ZeRO-1): in-place bucketed reduce-scatter, sharded AdamW, in-place all-gather of the compute
// weights.
#include "train/sharded_adamw.h"

#include <algorithm>
#include <cmath>
#include <utility>

#include "runtime/error.h"

namespace hone {

template <typename B>
ShardedAdamW<B>::ShardedAdamW(const ModelWeights& initial, AdamWConfig config, Comm& dp, DataParallelOptions options,
                              Exec x)
    : DataParallelOptimizer<B>(
          optimizer_zero_layout(initial.flat.numel(), dp.size(), dp.rank(), options),
          // The AdamW state over the shard, its segments cut at the chunks' edges.
          optimizer_zero_layout(initial.flat.numel(), dp.size(), dp.rank(), options)
              .shard_segments(weight_decay_segments(initial, config.decay_1d_params)),
          (initial.flat.numel() + dp.size() - 1) / dp.size(), config, options, x),
      dp_(dp) {
  HONE_CHECK(dp.on_device() == B::kDeviceMemory, "the ", B::kName, " distributed optimizer needs a ",
             B::kDeviceMemory ? "device" : "host", " Comm of its data-parallel group");
  HONE_CHECK(!options.edp, "the distributed optimizer reduces every gradient over dp: no expert group");
  const ZeroLayout& zl = this->zl_;
  const int64_t shard = zl.shard_size();
  master_ = typename B::template Array<float>(shard, "master weight shard");
  B::zero(x, master_.get(), master_.bytes());
  if (zl.padded_size() > zl.num_params())
    tail_ = typename B::template Array<Act>(zl.buckets().front().size, "refit padding bucket");
  scatter_from_host(initial.flat.f32(), master_.get());
  if (reduces() && !options.grad_reduce_in_fp32) this->bf16_staging();  // now, not while backward runs
}

// In place: rank r's reduced chunk of the bucket lands where it lies in the gradient buffer (recv == send + rank *
// chunk). bf16: converted, reduced in place in the staging buffer, converted back, all in `on`'s order (the staging
// serves one bucket at a time).
template <typename B>
typename ShardedAdamW<B>::Work ShardedAdamW<B>::reduce_bucket(int bi, const Exec& on) {
  HONE_CHECK(this->grads(), "gradient reduction with the gradient buffer released");
  const ZeroLayout& zl = this->zl_;
  const ZeroBucket& b = zl.buckets()[size_t(bi)];
  const int64_t chunk = zl.chunk_size(b);
  if (zl.dp() == 1) return {};  // one rank: its chunk is the whole bucket, already in place, in any precision
  float* in = this->grads() + b.offset;
  float* mine = this->grads() + zl.chunk_flat_offset(b);
  if (this->options_.grad_reduce_in_fp32) return reduce_scatter_sum_async(on, dp_, in, mine, chunk, CommType::f32);
  Bf16<B>* staged = this->bf16_staging();
  Bf16<B>* staged_mine = staged + int64_t(zl.rank()) * chunk;
  f32_to_bf16(on, staged, in, b.size);
  Work w = reduce_scatter_sum_async(on, dp_, staged, staged_mine, chunk, CommType::bf16);
  bf16_to_f32(on, mine, staged_mine, chunk);
  completes_here(on, w);
  return w;
}

template <typename B>
OptimizerStepResult ShardedAdamW<B>::update(float lr, double max_norm) {
  HONE_CHECK(!this->state_offloaded(), "AdamW step while the optimizer state is offloaded");
  if (!this->reduced_) this->reduce_all();
  this->reduced_ = false;
  const ZeroLayout& zl = this->zl_;
  const int64_t n = zl.num_params();

  // Global norm: the sums of squares of this rank's reduced chunks (their real part: the padding is zero and
  // belongs to no parameter), summed over dp. Under tensor or pipeline parallelism each chunk's values are
  // weighted by the ranks that hold them (the weighting reads the chunk where it lies in the flat buffer), and the
  // sum spans that group too.
  double local = 0;
  for (const ZeroBucket& b : zl.buckets()) {
    const int64_t c0 = zl.chunk_flat_offset(b);
    local += this->sum_squares_at(c0, std::min(zl.chunk_size(b), n - c0));
  }
  const double total = sum_over(this->x_, dp_, local, this->scalar_.get());
  OptimizerStepResult r;
  r.grad_norm = std::sqrt(this->options_.norm.sum_over_group(total));
  r.skipped = !std::isfinite(r.grad_norm);
  if (r.skipped) return r;  // the master weights and moments stay; refit gathers the same weights
  r.clip_coef = clip_coefficient(r.grad_norm, max_norm);
  if (r.clip_coef < 1.f)
    for (const ZeroBucket& b : zl.buckets())
      scale_inplace(this->x_, this->grads() + zl.chunk_flat_offset(b), r.clip_coef, zl.chunk_size(b));
  this->adamw_.step(master_.get(), this->grads(), lr);
  return r;
}

// Each rank casts its chunk of every bucket into its own place in the compute weights, then the bucket is
// all-gathered in place (send == recv + rank * chunk). The bucket that holds the padding goes through tail_.
template <typename B>
void ShardedAdamW<B>::refit(Act* compute_weights) {
  const ZeroLayout& zl = this->zl_;
  const int64_t n = zl.num_params();
  std::vector<Work> works;
  for (const ZeroBucket& b : zl.buckets()) {
    const int64_t chunk = zl.chunk_size(b);
    const bool padded = b.offset + b.size > n;
    Act* base = padded ? tail_.get() : compute_weights + b.offset;
    Act* mine = base + int64_t(zl.rank()) * chunk;
    refit_cast(this->x_, mine, master_.get() + b.shard_offset, chunk);
    works.push_back(all_gather_async(this->x_, dp_, mine, base, chunk, act_comm_type<B>()));
    if (padded) B::copy(this->x_, compute_weights + b.offset, tail_.get(), size_t(n - b.offset) * sizeof(Act));
  }
  wait_works(works);
  B::sync(this->x_);
}

// Piece by piece (at most 16 M elements of each rank's chunk at a time), so the staging stays small whatever the
// bucket size: piece p of every rank's chunk is gathered, then each rank's piece copied to its flat place.
template <typename B>
void ShardedAdamW<B>::gather_to_host(const float* shard, float* full, int root) {
  const ZeroLayout& zl = this->zl_;
  const int P = zl.dp();
  const bool copy = root < 0 || zl.rank() == root;
  HONE_CHECK(!copy || full, "no host buffer for the gathered state");
  const int64_t n = zl.num_params(), piece_max = int64_t(16) << 20;
  int64_t largest = 0;
  for (const ZeroBucket& b : zl.buckets()) largest = std::max(largest, zl.chunk_size(b));
  typename B::template Array<float> staging(std::max<int64_t>(1, std::min(piece_max, largest) * P),
                                            "optimizer state gather staging");
  for (const ZeroBucket& b : zl.buckets()) {
    const int64_t chunk = zl.chunk_size(b);
    for (int64_t p0 = 0; p0 < chunk; p0 += piece_max) {
      const int64_t len = std::min(piece_max, chunk - p0);
      all_gather_async(this->x_, dp_, shard + b.shard_offset + p0, staging.get(), len, CommType::f32).wait();
      if (!copy) continue;
      for (int r = 0; r < P; ++r) {
        const int64_t flat = b.offset + int64_t(r) * chunk + p0;
        const int64_t real = std::min(len, n - flat);  // the padding is not copied
        if (real > 0)
          B::download(this->x_, full + flat, staging.get() + int64_t(r) * len, size_t(real) * sizeof(float));
      }
      B::sync(this->x_);
    }
  }
}

template <typename B>
void ShardedAdamW<B>::scatter_from_host(const float* full, float* shard) {
  for (const ShardSegment& s : segments())
    B::upload(this->x_, shard + s.shard_offset, full + s.flat_offset, size_t(s.size) * sizeof(float));
  B::sync(this->x_);
}

template <typename B>
void ShardedAdamW<B>::download_master(ModelWeights& w) {
  HONE_CHECK(w.flat.numel() == this->num_params(), "weights of ", w.flat.numel(), " parameters, optimizer ",
             this->num_params());
  gather_to_host(master_.get(), w.flat.f32(), -1);
}

template <typename B>
void ShardedAdamW<B>::read_state(ModelWeights* master, float* exp_avg, float* exp_avg_sq, int root) {
  const bool here = root < 0 || this->zl_.rank() == root;
  HONE_CHECK(!here || ((!master || master->flat.numel() == this->num_params()) && exp_avg && exp_avg_sq),
             "read_state needs host buffers of ", this->num_params(), " values");
  const bool off = this->state_offloaded();
  if (off) this->reload_state();
  if (master || root >= 0) gather_to_host(master_.get(), here && master ? master->flat.f32() : nullptr, root);
  gather_to_host(this->adamw_.exp_avg(), exp_avg, root);
  gather_to_host(this->adamw_.exp_avg_sq(), exp_avg_sq, root);
  if (off) this->offload_state();
}

template <typename B>
void ShardedAdamW<B>::write_state(const ModelWeights& master, const float* exp_avg, const float* exp_avg_sq,
                                  int step_count) {
  HONE_CHECK(master.flat.numel() == this->num_params(), "the optimizer state must cover ", this->num_params(),
             " parameters");
  this->reload_state();
  B::zero(this->x_, master_.get(), master_.bytes());
  B::zero(this->x_, this->adamw_.exp_avg(), size_t(this->zl_.shard_size()) * sizeof(float));
  B::zero(this->x_, this->adamw_.exp_avg_sq(), size_t(this->zl_.shard_size()) * sizeof(float));
  scatter_from_host(master.flat.f32(), master_.get());
  scatter_from_host(exp_avg, this->adamw_.exp_avg());
  scatter_from_host(exp_avg_sq, this->adamw_.exp_avg_sq());
  this->set_step_count(step_count);
}

template <typename B>
ShardOptimizerState ShardedAdamW<B>::shard_state() const {
  HONE_CHECK(!this->state_offloaded(), "shard_state while the optimizer state is offloaded");
  const ZeroLayout& zl = this->zl_;
  ShardOptimizerState s{zl.dp(), zl.rank(), this->step_count(), zl.num_params(), {}, {}, {}};
  const size_t shard = size_t(zl.shard_size());
  for (auto [dst, src] : {std::pair{&s.master, static_cast<const float*>(master_.get())},
                          {&s.exp_avg, this->adamw_.exp_avg()}, {&s.exp_avg_sq, this->adamw_.exp_avg_sq()}}) {
    dst->resize(shard);
    B::download(this->x_, dst->data(), src, shard * sizeof(float));
  }
  B::sync(this->x_);
  return s;
}

template <typename B>
void ShardedAdamW<B>::load_shard_state(const ShardOptimizerState& s) {
  const ZeroLayout& zl = this->zl_;
  HONE_CHECK(s.dp_size == zl.dp() && s.dp_rank == zl.rank() && s.num_params == zl.num_params(), "a shard of rank ",
             s.dp_rank, " of ", s.dp_size, " over ", s.num_params, " parameters does not fit rank ", zl.rank(),
             " of ", zl.dp(), " over ", zl.num_params());
  const size_t shard = size_t(zl.shard_size());
  HONE_CHECK(s.master.size() == shard && s.exp_avg.size() == shard && s.exp_avg_sq.size() == shard,
             "shard buffers must hold ", shard, " values");
  this->reload_state();
  for (auto [src, dst] : {std::pair{&s.master, master_.get()}, {&s.exp_avg, this->adamw_.exp_avg()},
                          {&s.exp_avg_sq, this->adamw_.exp_avg_sq()}})
    B::upload(this->x_, dst, src->data(), shard * sizeof(float));
  B::sync(this->x_);
  this->set_step_count(s.step);
}

#define HONE_INSTANTIATE_SHARDED_ADAMW(B) template class ShardedAdamW<B>;
HONE_FOR_EACH_BACKEND(HONE_INSTANTIATE_SHARDED_ADAMW)
#undef HONE_INSTANTIATE_SHARDED_ADAMW

}  // namespace hone
