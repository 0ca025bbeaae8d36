// The GPU policy engine's checkpoint state (rl/gpu_engine_state.h).
#include "rl/gpu_engine_state.h"

#if HONE_CUDA

#include <vector>

#include "parallel/shard_weights.h"

namespace hone::rl {

namespace {

// The whole model's master weights and moments on the root (tp and pp rank 0) from this rank's flat buffers of
// `layout`. Collective over the tensor- and pipeline-parallel groups.
void gather_whole_state(const ModelConfig& mc, const ParallelState& ps, const ShardLayout& layout, const float* w,
                        const float* sm, const float* sv, ModelWeights& master, Tensor& m, Tensor& v) {
  const bool root = ps.tp_rank() == 0 && ps.pp_rank() == 0;
  const int64_t whole = count_parameters(mc);
  if (root) {
    if (master.flat.numel() != whole) master = allocate_weights(mc);
    m = Tensor::empty({whole});
    v = Tensor::empty({whole});
  }
  Comm& tp = ps.tp();
  gather_model_flat(mc, layout, w, tp, ps.pp(), root ? master.flat.f32() : nullptr);
  gather_model_flat(mc, layout, sm, tp, ps.pp(), root ? m.f32() : nullptr);
  gather_model_flat(mc, layout, sv, tp, ps.pp(), root ? v.f32() : nullptr);
}

}  // namespace

void read_sharded_state(const ModelConfig& mc, const ParallelState& ps, const ShardLayout& stage, bool dp_root,
                        DataParallelOptimizer<CudaBackend>& optimizer, ModelWeights& master, Tensor& m,
                        Tensor& v) {
  const int64_t n = optimizer.num_params();
  ModelWeights shard;
  std::vector<float> shard_m, shard_v;
  if (dp_root) {
    shard = allocate_shard_weights(stage, mc);
    shard_m.resize(size_t(n));
    shard_v.resize(size_t(n));
  }
  optimizer.read_state(dp_root ? &shard : nullptr, shard_m.data(), shard_v.data(), 0);
  if (!dp_root) return;
  gather_whole_state(mc, ps, stage, shard.flat.f32(), shard_m.data(), shard_v.data(), master, m, v);
}

void read_expert_parallel_state(const ModelConfig& mc, const ParallelState& ps, const ShardLayout& stage,
                                GpuExpertParallel& ep, DataParallelOptimizer<CudaBackend>& optimizer,
                                ModelWeights& master, Tensor& m, Tensor& v) {
  const ShardLayout& full = ep.full_layout();
  const int64_t n = stage.num_local_params(), nf = full.num_local_params();
  ModelWeights shard = allocate_shard_weights(stage, mc);
  std::vector<float> shard_m(static_cast<size_t>(n)), shard_v(static_cast<size_t>(n));
  optimizer.read_state(&shard, shard_m.data(), shard_v.data(), ps.dp_rank());  // each rank its own
  std::vector<float> all_w(static_cast<size_t>(nf)), all_m(static_cast<size_t>(nf)), all_v(static_cast<size_t>(nf));
  ep.gather_experts_host(shard.flat.f32(), all_w.data());
  ep.gather_experts_host(shard_m.data(), all_m.data());
  ep.gather_experts_host(shard_v.data(), all_v.data());
  if (ps.dp_rank() != 0) return;
  gather_whole_state(mc, ps, full, all_w.data(), all_m.data(), all_v.data(), master, m, v);  // pp = 1 under ep
}

void write_sharded_state(const ModelConfig& mc, const ShardLayout& stage,
                         DataParallelOptimizer<CudaBackend>& optimizer, const ModelWeights& master, const float* m,
                         const float* v, int step_count) {
  ModelWeights shard = allocate_shard_weights(stage, mc);
  extract_shard(stage, master, shard);
  std::vector<float> shard_m(size_t(shard.flat.numel())), shard_v(size_t(shard.flat.numel()));
  extract_shard_flat(stage, m, shard_m.data());
  extract_shard_flat(stage, v, shard_v.data());
  optimizer.write_state(shard, shard_m.data(), shard_v.data(), step_count);
}

}  // namespace hone::rl

#endif  // HONE_CUDA
