// The GPU generation engine: the contract of CpuGenerator (same rollouts, same Philox keying by (seed, step,
// sample index, completion position), same stop rules and finish reasons, same decode callback for stop strings
// and text) over bf16 weights on one GPU, with a paged KV cache, continuous batching with preemption by recompute
// (scheduler.h), a GRPO group's prompt prefilled once and its KV blocks shared by the group's samples, decode
// attention that reads a shared prefix once per group, and decode steps replayed from CUDA graphs.
//
// The weights are the device bf16 buffer given at construction (the ParamLayout layout), the one refit writes in
// place: every generate() sees the current weights, and captured graphs stay valid across refits. The KV cache is
// sized at the first generate() (kv_cache_gib, or a fraction of the free device memory then) and kept until
// release(), which the trainer calls before training so the cache and training activations never coexist. With
// keep_graphs, release() gives back only the memory: the next generate() maps the cache (same size) and the
// buffers again at the same addresses and replays the decode graphs captured before (gpu_generation_forward.h).
// Design: doc/generation-gpu.md.
#pragma once

#if HONE_CUDA

#include <cstdint>
#include <memory>
#include <vector>

#include "cuda/ops_cuda.h"
#include "generation/cpu_generator.h"
#include "model/transformer.h"
#include "model/model_config.h"

namespace hone {

class GpuGenerationForward;
template <typename B>
class TensorParallelGroup;
using GpuTensorParallel = TensorParallelGroup<CudaBackend>;

struct GpuGenerationOptions {
  double kv_cache_gib = 0;                 // KV cache size; 0: kv_cache_memory_fraction of the free memory
  double kv_cache_memory_fraction = 0.3;   // of the device memory free at the start of the first generate()
  int block_size = 16;                     // tokens per KV block
  int max_num_seqs = 512;                  // sequences running at once (decode batch)
  int max_prefill_tokens = 16384;          // tokens per prefill pass (one longer sequence still runs alone)
  bool cuda_graphs = true;                 // replay decode steps from graphs captured per batch-size bucket
  bool keep_graphs = true;                 // release() keeps addresses and graphs for the next generate()
  bool shared_prefix = true;               // share a group's prompt blocks in the KV cache (one copy a group)
  // Decode attention reads a group's shared blocks once for the group (the shared-prefix path) instead of once per
  // row through the plain path, whose rows of a group run side by side and find those blocks in L2: the plain path
  // is the faster one at every shape measured (doc/performance.md), so this is off but for comparisons.
  bool prefix_attention = false;
};

struct GpuGenerationStats : GenerationStats {
  int64_t preemptions = 0;          // sequences sent back to the queue for lack of KV blocks
  int64_t kv_capacity_tokens = 0;   // blocks x block size
  int64_t shared_prefix_rows = 0;   // decode rows (summed over steps) that read their prompt through a shared group
  int64_t prefill_passes = 0;       // model passes of each kind
};

class ExpertLockstep;
struct CudaBackend;
template <typename B>
class ExpertParallelGroup;
using GpuExpertParallel = ExpertParallelGroup<CudaBackend>;

class GpuGenerator {
 public:
  // `weights`: the device bf16 weights (layout's offsets); must outlive the generator, like the context.
  // Under tensor parallelism, tp (outliving the generator too) and the shard's layout and weights: every rank of
  // the group calls generate() with the same requests and gets the same rollouts.
  // With ep and its lockstep (the experts split in generation: parallel/expert_lockstep.h), the layout and weights
  // hold this rank's experts, each rank of the expert-parallel group generates its own requests (none is fine), and
  // generate() returns when every rank of the group is done; decode steps run without CUDA graphs.
  GpuGenerator(const ModelConfig& config, const ParamLayout& layout, const cuda::bf16* weights,
               const cuda::GpuContext& ctx, GpuGenerationOptions options = {}, GpuTensorParallel* tp = nullptr,
               GpuExpertParallel* ep = nullptr, ExpertLockstep* lockstep = nullptr);
  ~GpuGenerator();
  GpuGenerator(const GpuGenerator&) = delete;
  GpuGenerator& operator=(const GpuGenerator&) = delete;

  // As CpuGenerator::generate: one rollout per request, in request order.
  std::vector<Rollout> generate(const std::vector<GenerationRequest>& requests, const SamplingParams& sampling,
                                const StopCriteria& stop, uint64_t seed, uint32_t step,
                                int max_total_sequence_length, const DecodeFunction& decode = {});
  // Gives the device memory of the KV cache and buffers back. With keep_graphs (where possible) their addresses and
  // the decode graphs stay for the next generate(); otherwise everything is freed and allocated again then.
  void release();

  const GpuGenerationStats& stats() const { return stats_; }
  // Called after every pass of later generate() calls (empty: none).
  void set_progress(GenerationProgressFn fn) { progress_ = std::move(fn); }

 private:
  const ModelConfig config_;
  GpuGenerationOptions options_;
  const cuda::GpuContext ctx_;
  std::unique_ptr<GpuGenerationForward> fwd_;
  GpuGenerationStats stats_;
  GenerationProgressFn progress_;
};

template <>
struct GeneratorOf<CudaBackend> {
  using type = GpuGenerator;
};
class ShardLayout;
// The GPU's generator over `weights` (bf16, this rank's shard in `layout`; outliving the generator, as does the
// Exec's context) with the deck's KV cache and CUDA graph settings, at most 1024 sequences at once (settings.max_seqs
// fewer).
std::unique_ptr<GpuGenerator> make_generator(const ModelConfig& config, const ShardLayout& layout, bf16* weights,
                                             const CudaBackend::Exec& x, const GeneratorSettings& settings,
                                             GpuTensorParallel* tp, GpuExpertParallel* ep, ExpertLockstep* lockstep);

}  // namespace hone

#endif  // HONE_CUDA
