// Micro-benchmark of the generation kernels at the Qwen3-0.6B (Hq 16, Hkv 8, D 128), Llama-3.2-1B (Hq 32, Hkv 8,
// D 64) and Qwen3-30B-A3B (Hq 32, Hkv 4, D 128) decode shapes, KV block 16: B = 512 rows in 64 groups of 8 sharing a 128-token prompt, contexts of 129 ..
// 640 tokens, random data. Decode attention is timed with CUDA events after warm-up, plain path (the op's own plan
// and each count of query vectors a CTA) vs shared-prefix path (the op's own plan and each plan it accepts), over the same block tables (a group's prompt blocks are
// physically shared, as in the engine). Achieved GB/s counts the bytes each path must read:
//   plain : sum_b L_b * Hkv * D * 2 (K and V) * 2 bytes + q and out (B * Hq * D * 2 bytes each)
//   shared: (sum_g P_g + sum_b (L_b - P_g(b))) * Hkv * D * 2 * 2 bytes + q and out
// (the split/partial traffic of the combine is overhead, not counted). The sampler has its own benchmark,
// tests/programs/bench_sampler.cpp.
// Prints its numbers and exits 0; a CPU-only build prints that there is nothing to measure.
#include <cstdio>

#if HONE_CUDA
#include <cuda_runtime.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "cuda/check.h"
#include "gpu_bench_main.h"
#include "cuda/generation_ops.h"

namespace {

using hone::cuda::bf16;

// Mean microseconds per call over `iters` calls after `warmup` calls.
double time_us(const std::function<void()>& fn, cudaStream_t stream, int warmup, int iters) {
  for (int i = 0; i < warmup; ++i) fn();
  cudaEvent_t a, b;
  CUDA_CHECK(cudaEventCreate(&a));
  CUDA_CHECK(cudaEventCreate(&b));
  CUDA_CHECK(cudaEventRecord(a, stream));
  for (int i = 0; i < iters; ++i) fn();
  CUDA_CHECK(cudaEventRecord(b, stream));
  CUDA_CHECK(cudaEventSynchronize(b));
  float ms = 0;
  CUDA_CHECK(cudaEventElapsedTime(&ms, a, b));
  CUDA_CHECK(cudaEventDestroy(a));
  CUDA_CHECK(cudaEventDestroy(b));
  return 1000.0 * ms / iters;
}

template <typename T>
T* device_copy(const std::vector<T>& h) {
  T* d = nullptr;
  CUDA_CHECK(cudaMalloc(&d, h.size() * sizeof(T)));
  CUDA_CHECK(cudaMemcpy(d, h.data(), h.size() * sizeof(T), cudaMemcpyHostToDevice));
  return d;
}

// Random bf16 of about unit scale (never time on constant data), written in pieces from one host buffer.
void fill_random(bf16* d, size_t n, uint64_t seed) {
  std::vector<uint16_t> h(std::min<size_t>(n, size_t(1) << 24));
  uint64_t s = seed * 0x9E3779B97F4A7C15ull + 1;
  for (auto& x : h) {
    s = s * 6364136223846793005ull + 1442695040888963407ull;
    const uint32_t r = uint32_t(s >> 40);
    x = uint16_t(0x3E00u + (r & 0x1FFu) + ((r & 0x200u) << 6));  // |x| in [0.125, 2), either sign
  }
  for (size_t at = 0; at < n; at += h.size()) {
    const size_t m = std::min(h.size(), n - at);
    CUDA_CHECK(cudaMemcpy(d + at, h.data(), m * sizeof(uint16_t), cudaMemcpyHostToDevice));
  }
}

struct AttentionShape {
  const char* name;
  int Hq, Hkv, D;
};

// One decode step's attention of one layer for B = 512 rows in 64 groups of 8 sharing a 128-token prompt, at the
// contexts of the benchmark decks: the plain path, then the shared-prefix path with the op's own plan and with each
// prefix plan (query vectors per CTA x shortest prefix split) the op accepts.
void bench_attention(const hone::cuda::GpuContext& ctx, const AttentionShape& sh) {
  const int Hq = sh.Hq, Hkv = sh.Hkv, D = sh.D, bs = 16, groups = 64, G = 8, B = groups * G, prompt = 128;
  const int max_ctx = 640;
  const int max_blocks = max_ctx / bs;
  const int prefix_blocks = prompt / bs, suffix_blocks = max_blocks - prefix_blocks;
  const int64_t num_blocks = int64_t(groups) * prefix_blocks + int64_t(B) * suffix_blocks;
  const size_t pool_n = size_t(num_blocks) * Hkv * bs * D;
  bf16 *k_pool = nullptr, *v_pool = nullptr, *q = nullptr, *out = nullptr;
  CUDA_CHECK(cudaMalloc(&k_pool, pool_n * sizeof(bf16)));
  CUDA_CHECK(cudaMalloc(&v_pool, pool_n * sizeof(bf16)));
  CUDA_CHECK(cudaMalloc(&q, size_t(B) * Hq * D * sizeof(bf16)));
  CUDA_CHECK(cudaMalloc(&out, size_t(B) * Hq * D * sizeof(bf16)));
  fill_random(k_pool, pool_n, 1);
  fill_random(v_pool, pool_n, 2);
  fill_random(q, size_t(B) * Hq * D, 3);

  // A group's prompt blocks once, then every row's own blocks, handed out row by row per block position as the
  // engine's decode steps allocate them (rows interleaved), so a row's blocks are not contiguous.
  // The offsets and prefix lengths are followed by those of a captured decode graph's padding groups (B / 2 groups
  // in all; the padding ones empty, at the end of the rows), which the graph plan below passes.
  std::vector<int32_t> table(static_cast<size_t>(B) * max_blocks), offsets, prefix_lens;
  int32_t next = 0;
  for (int g = 0; g < groups; ++g) {
    offsets.push_back(g * G);
    prefix_lens.push_back(prompt);
    const int32_t first = next;
    next += prefix_blocks;
    for (int m = 0; m < G; ++m) {
      const int r = g * G + m;
      for (int i = 0; i < prefix_blocks; ++i) table[size_t(r) * max_blocks + i] = first + i;
    }
  }
  for (int g = groups; g <= B / 2; ++g) offsets.push_back(B);
  prefix_lens.resize(size_t(B / 2), 0);
  for (int i = prefix_blocks; i < max_blocks; ++i)
    for (int r = 0; r < B; ++r) table[size_t(r) * max_blocks + i] = next++;
  int32_t* d_table = device_copy(table);
  int32_t* d_offsets = device_copy(offsets);
  int32_t* d_prefix = device_copy(prefix_lens);
  int32_t* d_lens = nullptr;
  CUDA_CHECK(cudaMalloc(&d_lens, size_t(B) * sizeof(int32_t)));

  std::printf("decode attention, %s shape: B=%d (%d groups x %d), Hq=%d Hkv=%d D=%d block=%d, prompt %d\n", sh.name,
              B, groups, G, Hq, Hkv, D, bs, prompt);
  std::printf("  %-8s %-7s %-6s %5s %8s %6s %12s %12s %10s\n", "context", "path", "args", "rows", "vectors", "split",
              "time [us]", "bytes [MB]", "GB/s");
  const float scale = 1.f / std::sqrt(float(D));
  // "exact": the arguments of an eager decode step (this batch's lengths and groups); "graph": those of a captured
  // decode graph (lengths and prefix bounded by the block table, B / 2 groups), with the largest group's rows as a
  // hint (rows 8) or without it (rows auto: the average over the padded groups).
  struct Plan {
    bool shared, graph;
    int rows, vectors, split;
  };
  // The plain path with the op's own plan and with each count of query vectors a CTA (plain_vectors), then the
  // shared-prefix path.
  std::vector<Plan> plans;
  for (int v : {0, 1, 2, 4, 8}) plans.push_back({false, false, 0, v, 0});
  plans.push_back({true, false, 0, 0, 0});
  plans.push_back({true, true, 0, 0, 0});
  for (int v : {0, 1, 2, 4, 8})
    for (int split : {0, 64, 32}) plans.push_back({true, true, G, v, split});
  for (int len : {129, 384, 640}) {
    const std::vector<int32_t> lens(static_cast<size_t>(B), len);
    CUDA_CHECK(cudaMemcpy(d_lens, lens.data(), lens.size() * sizeof(int32_t), cudaMemcpyHostToDevice));
    const double kv_token = double(Hkv) * D * 2 * sizeof(bf16), qo = 2.0 * B * Hq * D * sizeof(bf16);
    for (const Plan& pl : plans) {
      hone::cuda::PagedDecodeArgs a;
      a.block_tables = d_table;
      a.seq_lens = d_lens;
      a.B = B;
      a.max_blocks = max_blocks;
      a.max_seq_len = pl.graph ? max_ctx : len;
      a.block_size = bs;
      if (!pl.shared) a.plain_vectors = pl.vectors;
      if (pl.shared) {
        a.num_groups = pl.graph ? B / 2 : groups;
        a.group_offsets = d_offsets;
        a.prefix_lens = d_prefix;
        a.max_prefix_len = pl.graph ? max_ctx : prompt;
        a.max_group_rows = pl.rows;
        a.prefix_vectors = pl.vectors;
        a.prefix_split_tokens = pl.split;
      }
      const double us = time_us([&] { hone::cuda::paged_attention_decode_forward(out, q, k_pool, v_pool, a, Hq, Hkv, D,
                                                                                 scale, ctx); },
                                ctx.stream, 5, 50);
      const double tokens = pl.shared ? double(groups) * prompt + double(B) * (len - prompt) : double(B) * len;
      const double bytes = tokens * kv_token + qo;
      auto num = [](int v) { return v ? std::to_string(v) : std::string("auto"); };
      std::printf("  %-8d %-7s %-6s %5s %8s %6s %12.1f %12.1f %10.0f\n", len, pl.shared ? "shared" : "plain",
                  pl.graph ? "graph" : "exact", pl.shared ? num(pl.rows).c_str() : "-", num(pl.vectors).c_str(),
                  pl.shared ? num(pl.split).c_str() : "-", us, bytes / 1e6,
                  bytes / (us * 1e3));
    }
  }
  for (void* p : {static_cast<void*>(k_pool), static_cast<void*>(v_pool), static_cast<void*>(q),
                  static_cast<void*>(out), static_cast<void*>(d_table), static_cast<void*>(d_offsets),
                  static_cast<void*>(d_prefix), static_cast<void*>(d_lens)})
    CUDA_CHECK(cudaFree(p));
}

}  // namespace

int main() {
  return test::run_gpu_bench("bench_decode_attention", [](const hone::cuda::GpuContext& ctx) {
    bench_attention(ctx, {"Qwen3-0.6B", 16, 8, 128});
    bench_attention(ctx, {"Llama-3.2-1B", 32, 8, 64});
    bench_attention(ctx, {"Qwen3-30B-A3B", 32, 4, 128});
  });
}

#else
int main() {
  std::printf("bench_decode_attention: CPU-only build (CUDA=0), nothing to measure\n");
  return 0;
}
#endif
