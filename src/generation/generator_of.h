// The generation engine of each backend behind one construction, for code written once over B (the colocated
// engine, rl/colocated_engine.cpp): GeneratorOf<B>::type is CpuGenerator (generation/cpu_generator.h) or GpuGenerator
// (generation/gpu_generator.h), which keep one contract (the same rollouts for the same seed, stop rules and finish
// reasons, generate / release / stats / set_progress), and make_generator (declared beside each) builds it from the
// deck's settings over a flat weight buffer in a shard layout.
#pragma once

namespace hone {

template <typename B>
struct GeneratorOf;

// The deck's generation settings a generator reads (each backend the ones it has a use for).
struct GeneratorSettings {
  int max_seqs = 256;                     // sequences decoded together at most (each backend caps it further)
  double kv_cache_gib = 0;                // GPU: KV cache size; 0: kv_cache_memory_fraction of the free memory
  double kv_cache_memory_fraction = 0.3;  // GPU
  int block_size = 16;                    // GPU: tokens per KV block
  bool cuda_graphs = true;                // GPU: decode steps replayed from CUDA graphs
  bool keep_graphs = true;                // GPU: release() keeps addresses and graphs
};

}  // namespace hone
