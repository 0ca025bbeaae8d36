// `hone bench-generation <deck> [key=value ...]`: the GPU generation engine's speed at the deck's model shape with
// random bf16 weights: P prompts (grpo.num_prompts_per_step) x G samples (grpo.num_generations_per_prompt) of
// exactly bench.prompt_tokens random ids, exactly generation.max_new_tokens new tokens each (no stop token), one
// warm-up round then bench.rounds timed rounds. Prints generated tokens/s, prefill and decode seconds, decode
// steps, preemptions, and the achieved bandwidth against the floor: (weight bytes + KV bytes read per decode step,
// summed over the steps) / the device copy bandwidth measured at start, stated both for the plain read (every
// sample reads its prompt's KV) and for the shared-prefix read (a group's prompt KV read once). Writes the numbers
// to <output.dir>/<run.name>.h5. See doc/generation-gpu.md.
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <filesystem>
#include <random>
#include <string>
#include <vector>

#include "config/config.h"
#include "generation/generator.h"
#include "io/hdf5_file.h"
#include "model/deck_model.h"
#include "model/model_config.h"
#include "model/param_table.h"
#include "model/weights.h"
#include "runtime/command.h"
#include "runtime/error.h"

#if HONE_CUDA
#include <cuda_profiler_api.h>

#include "cuda/check.h"
#include "model/transformer.h"
#include "backend/gpu_device_select.h"
#endif

namespace hone {
namespace {

const char* kUsage =
    "usage: hone bench-generation deck.toml [key=value ...]\n"
    "  GPU generation speed at the deck's model shape (random weights, random prompts; the [bench] keys): tokens/s\n"
    "  and memory bandwidth against the floor, written to <output.dir>/<run.name>.h5. Needs a CUDA build and a GPU.\n";

// The deck's random-init shape (the bench has no tokenizer: model.vocab_size must be set).
ModelConfig deck_model(const Config& c) {
  HONE_USER_CHECK(c.get_string("model.path").empty(),
                  "bench-generation uses random weights of the deck's shape: leave model.path empty");
  ModelConfig m = random_init_model_config(c);
  HONE_USER_CHECK(m.vocab_size > 0, "bench-generation needs model.vocab_size (there is no tokenizer)");
  m.validate();
  return m;
}

#if HONE_CUDA

using Clock = std::chrono::steady_clock;

// Normal(0, std) values (a random host block tiled over the buffer) converted to bf16; norm weights 1. The layout
// comes from the parameter table alone: no host copy of the model (a mixture of experts is large).
void random_weights(bf16* w, const ModelConfig& mc, float std, const cuda::GpuContext& ctx) {
  const int64_t n = count_parameters(mc);
  const int64_t block = std::min<int64_t>(n, (int64_t(1) << 20) + 7);
  std::mt19937_64 rng(7);
  std::normal_distribution<float> nd(0.f, std);
  std::vector<float> host(static_cast<size_t>(block));
  for (float& x : host) x = nd(rng);
  DeviceArray<float> staging(block);
  CUDA_CHECK(cudaMemcpy(staging.get(), host.data(), size_t(block) * 4, cudaMemcpyHostToDevice));
  for (int64_t off = 0; off < n; off += block) cuda::f32_to_bf16(w + off, staging.get(), std::min(block, n - off), ctx);
  CUDA_CHECK(cudaStreamSynchronize(ctx.stream));
  int64_t offset = 0;
  for (const ParamSpec& spec : param_table(mc)) {
    const int64_t at = offset;
    offset += spec.numel();
    if (spec.name.find("norm") == std::string::npos) continue;
    const std::vector<float> ones(size_t(spec.numel()), 1.f);
    DeviceArray<float> d(spec.numel());
    CUDA_CHECK(cudaMemcpy(d.get(), ones.data(), ones.size() * 4, cudaMemcpyHostToDevice));
    cuda::f32_to_bf16(w + at, d.get(), spec.numel(), ctx);
    CUDA_CHECK(cudaStreamSynchronize(ctx.stream));
  }
}

// Device copy bandwidth (read + write bytes over time) of a 1 GiB cudaMemcpy, median of 5, by CUDA events.
double copy_bandwidth_gbps(const cuda::GpuContext& ctx) {
  const size_t bytes = size_t(1) << 30;
  DeviceArray<char> src{int64_t(bytes)}, dst{int64_t(bytes)};
  CUDA_CHECK(cudaMemsetAsync(src.get(), 1, bytes, ctx.stream));
  cudaEvent_t a, b;
  CUDA_CHECK(cudaEventCreate(&a));
  CUDA_CHECK(cudaEventCreate(&b));
  std::vector<double> gbps;
  for (int i = 0; i < 7; ++i) {
    CUDA_CHECK(cudaEventRecord(a, ctx.stream));
    CUDA_CHECK(cudaMemcpyAsync(dst.get(), src.get(), bytes, cudaMemcpyDeviceToDevice, ctx.stream));
    CUDA_CHECK(cudaEventRecord(b, ctx.stream));
    CUDA_CHECK(cudaEventSynchronize(b));
    float ms = 0;
    CUDA_CHECK(cudaEventElapsedTime(&ms, a, b));
    if (i >= 2) gbps.push_back(2.0 * double(bytes) / (double(ms) * 1e-3) / 1e9);
  }
  cudaEventDestroy(a);
  cudaEventDestroy(b);
  std::sort(gbps.begin(), gbps.end());
  return gbps[gbps.size() / 2];
}

int run_cuda(const Config& cfg) {
  const ModelConfig mc = deck_model(cfg);
  const int P = int(cfg.get_int("grpo.num_prompts_per_step"));
  const int G = int(cfg.get_int("grpo.num_generations_per_prompt"));
  const int prompt_len = int(cfg.get_int("bench.prompt_tokens"));
  const int new_tokens = int(cfg.get_int("generation.max_new_tokens"));
  const int rounds = int(cfg.get_int("bench.rounds"));
  HONE_USER_CHECK(prompt_len + new_tokens <= mc.max_position_embeddings, "bench.prompt_tokens + ",
                  "generation.max_new_tokens = ", prompt_len + new_tokens, " exceeds model.max_position_embeddings = ",
                  mc.max_position_embeddings);
  GenerationOptions opt;
  opt.kv_cache_gib = cfg.get_float("generation.kv_cache_gib");
  opt.kv_cache_memory_fraction = cfg.get_float("generation.kv_cache_memory_fraction");
  opt.block_size = int(cfg.get_int("generation.kv_block_size"));
  opt.cuda_graphs = cfg.get_bool("generation.cuda_graphs");
  opt.keep_graphs = cfg.get_bool("generation.keep_graphs");
  opt.max_num_seqs = int(cfg.get_int("bench.max_num_seqs"));
  opt.max_prefill_tokens = int(cfg.get_int("bench.max_prefill_tokens"));
  opt.shared_prefix = cfg.get_bool("bench.shared_prefix");
  opt.prefix_attention = cfg.get_bool("bench.prefix_attention");
  SamplingParams sp;
  sp.temperature = float(cfg.get_float("generation.temperature"));
  sp.top_k = cfg.get_int("generation.top_k");
  sp.top_p = float(cfg.get_float("generation.top_p"));
  sp.min_p = float(cfg.get_float("generation.min_p"));
  sp.greedy = cfg.get_bool("generation.greedy");
  StopCriteria stop;  // no stop token, no stop string: exactly max_new_tokens each
  stop.max_new_tokens = new_tokens;
  const uint64_t seed = uint64_t(cfg.get_int("run.seed"));

  std::setvbuf(stdout, nullptr, _IOLBF, 0);  // progress lines reach a log file as they are printed
  cuda::GpuContext ctx = cuda::create_gpu_context(0);
  // Destroyed last: the generator and the weights below free their device memory through it first.
  struct ContextGuard {
    cuda::GpuContext& c;
    ~ContextGuard() { cuda::destroy_gpu_context(c); }
  } guard{ctx};
  cudaDeviceProp prop{};
  CUDA_CHECK(cudaGetDeviceProperties(&prop, 0));
  std::printf("hone bench-generation: %lld parameters on %s; %d prompts x %d samples, %d prompt tokens, %d new "
              "tokens\n",
              (long long)mc.num_parameters(), prop.name, P, G, prompt_len, new_tokens);
  const double copy_gbps = copy_bandwidth_gbps(ctx);
  std::printf("  device copy bandwidth %.0f GB/s (read + write)\n", copy_gbps);

  const ParamLayout layout = ParamLayout::of(mc);
  DeviceArray<bf16> weights(layout.num_params);
  random_weights(weights.get(), mc, float(cfg.get_float("model.init_std")), ctx);

  std::mt19937 rng{uint32_t(seed)};
  std::uniform_int_distribution<int> ud(0, mc.vocab_size - 1);
  std::vector<std::vector<int32_t>> prompts(static_cast<size_t>(P), std::vector<int32_t>(static_cast<size_t>(prompt_len)));
  for (auto& p : prompts)
    for (auto& t : p) t = ud(rng);
  const std::vector<GenerationRequest> requests = group_requests(prompts, G);

  Generator<CudaBackend> gen(mc, layout, weights.get(), CudaBackend::Exec(ctx), opt);
  std::vector<double> wall, prefill_s, decode_s, tokens_per_s;
  GenerationStats last;
  const int profile_pass = int(cfg.get_int("bench.profile_pass"));
  for (int r = 0; r <= rounds; ++r) {
    if (profile_pass > 0 && r == rounds) {  // a window of two passes for a profiler that starts with its range off
      gen.set_progress([profile_pass, pass = 0](const GenerationProgress&) mutable {
        ++pass;
        if (pass == profile_pass) CUDA_CHECK(cudaProfilerStart());
        if (pass == profile_pass + 2) CUDA_CHECK(cudaProfilerStop());
      });
    }
    const auto t0 = Clock::now();
    const std::vector<Rollout> out = gen.generate(requests, sp, stop, seed, uint32_t(r), prompt_len + new_tokens);
    const double s = std::chrono::duration<double>(Clock::now() - t0).count();
    const GenerationStats& st = gen.stats();
    for (const Rollout& ro : out)
      HONE_CHECK(int(ro.completion.size()) == new_tokens, "a rollout of ", ro.completion.size(), " tokens");
    std::printf("  round %d%s: %.3f s, %.0f tokens/s (prefill %.3f s, decode %.3f s, %lld decode steps, %lld "
                "preemptions, %lld graph replays, %lld graph captures)\n",
                r, r == 0 ? " (warm-up)" : "", s, double(st.generated_tokens) / s, st.prefill_seconds,
                st.decode_seconds, (long long)st.decode_steps, (long long)st.preemptions,
                (long long)st.cuda_graph_replays, (long long)st.cuda_graph_captures);
    gen.release();  // as the GRPO loop does after every generation phase
    if (r == 0) continue;
    wall.push_back(s);
    prefill_s.push_back(st.prefill_seconds);
    decode_s.push_back(st.decode_seconds);
    tokens_per_s.push_back(double(st.generated_tokens) / s);
    last = st;
  }
  auto mean = [](const std::vector<double>& v) {
    double s = 0;
    for (double x : v) s += x;
    return v.empty() ? 0.0 : s / double(v.size());
  };

  // The floor: every decode step reads the weights once and every row's KV (plain), or each group's prompt KV
  // once plus every row's own tokens (shared prefix). Sequences run in lockstep here (all reach max_new_tokens), so
  // decode step s (1 .. new_tokens - 1) has P*G rows of prompt_len + s cached tokens.
  const double weight_bytes = double(layout.num_params) * 2.0;
  const double kv_token_bytes = 2.0 * mc.num_hidden_layers * mc.num_key_value_heads * mc.head_dim * 2.0;
  double plain_bytes = 0, shared_bytes = 0;
  for (int s = 1; s < new_tokens; ++s) {
    plain_bytes += weight_bytes + double(P) * G * (prompt_len + s) * kv_token_bytes;
    shared_bytes += weight_bytes + (double(P) * prompt_len + double(P) * G * s) * kv_token_bytes;
  }
  const double bw = copy_gbps * 1e9;
  const double floor_plain = plain_bytes / bw, floor_shared = shared_bytes / bw;
  const double dec = mean(decode_s);
  std::printf("\n  mean of %d rounds: %.3f s, %.0f generated tokens/s; prefill %.3f s, decode %.3f s\n", rounds,
              mean(wall), mean(tokens_per_s), mean(prefill_s), dec);
  std::printf("  decode floor at %.0f GB/s: plain %.3f s (%.1f GB read), shared prefix %.3f s (%.1f GB read)\n",
              copy_gbps, floor_plain, plain_bytes / 1e9, floor_shared, shared_bytes / 1e9);
  std::printf("  achieved: %.0f GB/s of plain reads (%.0f%% of copy), %.0f GB/s of shared-prefix reads; KV cache %lld "
              "tokens, peak %.2f GiB\n",
              plain_bytes / dec / 1e9, 100.0 * plain_bytes / dec / bw, shared_bytes / dec / 1e9,
              (long long)last.kv_capacity_tokens, double(last.peak_kv_bytes) / double(int64_t(1) << 30));

  const std::string dir = cfg.get_string("output.dir");
  std::filesystem::create_directories(dir);
  const std::string path = dir + "/" + cfg.get_string("run.name") + ".h5";
  Hdf5File h5(path, Hdf5File::Mode::create);
  auto put = [&](const std::string& name, double v) {
    const float f = float(v);
    h5.write_f32("/" + name, &f, 1);
  };
  auto put_v = [&](const std::string& name, const std::vector<double>& v) {
    std::vector<float> f(v.begin(), v.end());
    h5.write_f32("/rounds/" + name, f);
  };
  put("generation_s", mean(wall));
  put("tokens_per_s", mean(tokens_per_s));
  put("prefill_s", mean(prefill_s));
  put("decode_s", dec);
  put("decode_steps", double(last.decode_steps));
  put("prefill_passes", double(last.prefill_passes));
  put("preemptions", double(last.preemptions));
  put("cuda_graph_replays", double(last.cuda_graph_replays));
  put("cuda_graph_captures", double(last.cuda_graph_captures));
  put("shared_prefix_rows", double(last.shared_prefix_rows));
  put("generated_tokens", double(last.generated_tokens));
  put("copy_gbps", copy_gbps);
  put("floor_plain_s", floor_plain);
  put("floor_shared_prefix_s", floor_shared);
  put("achieved_plain_gbps", plain_bytes / dec / 1e9);
  put("achieved_shared_prefix_gbps", shared_bytes / dec / 1e9);
  put("weight_bytes", weight_bytes);
  put("kv_capacity_tokens", double(last.kv_capacity_tokens));
  put("peak_kv_bytes", double(last.peak_kv_bytes));
  put_v("generation_s", wall);
  put_v("prefill_s", prefill_s);
  put_v("decode_s", decode_s);
  put_v("tokens_per_s", tokens_per_s);
  h5.set_attribute("/", "deck", cfg.to_toml());
  h5.set_attribute("/", "gpu", prop.name);
  h5.close();
  std::printf("  wrote %s\n", path.c_str());
  gen.release();
  weights = DeviceArray<bf16>();
  return 0;
}

#endif  // HONE_CUDA

int run_bench_generation(const std::vector<std::string>& args) {
  HONE_USER_CHECK(!args.empty() && args[0].find('=') == std::string::npos, "bench-generation needs a deck (see hone bench-generation --help)");
  const Config cfg = load_config(args[0], std::vector<std::string>(args.begin() + 1, args.end()));
  deck_model(cfg);  // shape errors before anything else
#if HONE_CUDA
  usable_cuda_devices("hone bench-generation");
  return run_cuda(cfg);
#else
  throw UserError("bench-generation: this hone was built without CUDA (make CUDA=1); the benchmark needs a GPU");
#endif
}

const CommandRegistration reg{{"bench-generation",
                               "GPU generation speed at a deck's model shape (tokens/s, bandwidth against the floor)",
                               false, &run_bench_generation, kUsage}};

}  // namespace
}  // namespace hone
