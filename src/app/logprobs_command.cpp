// `hone logprobs`: per-token logprobs and entropies of given token sequences under a model, written to HDF5.
//
//   hone logprobs --model DIR --input seqs.jsonl --output out.h5 [--temperature 1] [--batch-tokens 4096]
//                 [--device cpu|cuda] [--grad-output grads.safetensors]
//
// Input: one JSON object per line, {"tokens": [ids...]} (blank lines are skipped). Output datasets:
//   /logprobs f32  n-1 values per sequence (log p(token[i+1] | tokens[0..i])), sequences concatenated in input order
//   /entropy  f32  the entropy of the same next-token distributions
//   /offsets  i64  S+1 values: where each sequence's values start, then the end
// With --grad-output, also the gradient of L = sum_i c_i * logprobs[i], c_i = 1 + 0.1 * (i mod 5) (i indexes the
// concatenated /logprobs), accumulated over all batches and written as fp32 safetensors under the Hugging Face
// parameter names: a fixed, non-uniform weighting that tools/hf_reference.py reproduces in transformers, so the
// backward pass can be compared with theirs (tests/data/hf/*/reference.safetensors holds "grad.<name>" for it).
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <memory>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "io/atomic_file.h"
#include "io/hdf5_file.h"
#include "model/model_config.h"
#include "model/model_source.h"
#include "model/packed_batch.h"
#include "model/safetensors.h"
#include "model/transformer.h"
#include "model/weights.h"
#include "rl/host_memory_plan.h"
#include "runtime/command.h"
#include "runtime/error.h"

#if HONE_CUDA
#include "cuda/check.h"
#include "cuda/ops_cuda.h"
#include "model/transformer.h"
#include "backend/gpu_device_select.h"
#endif

namespace hone {
namespace {

const char* kUsage =
    "usage: hone logprobs --model DIR|FILE.gguf --input seqs.jsonl --output out.h5 [--temperature 1] [--batch-tokens 4096]\n"
    "                     [--device cpu|cuda] [--grad-output grads.safetensors]\n"
    "  Per-token logprobs and entropies of token sequences under a model, written to HDF5.\n"
    "  --model DIR          a Hugging Face checkpoint folder (config.json, *.safetensors), or a GGUF file\n"
    "  --input FILE         JSONL, one {\"tokens\": [ids...]} per line\n"
    "  --output FILE        the HDF5 file written: /logprobs, /entropy, /offsets\n"
    "  --temperature T      logits are divided by T (default 1)\n"
    "  --batch-tokens N     tokens per packed forward pass (default 4096)\n"
    "  --device cpu|cuda    the fp32 CPU engine (default) or the bf16 GPU engine on device 0\n"
    "  --grad-output FILE   also the gradient of a fixed weighted sum of the logprobs (fp32 safetensors)\n";

struct LogprobsArgs {
  std::string model, input, output;
  std::string grad_output;  // empty: no backward
  std::string device = "cpu";  // cuda: the bf16 GPU engine on device 0
  float temperature = 1.f;
  int64_t batch_tokens = 4096;
};

LogprobsArgs parse_args(const std::vector<std::string>& args) {
  LogprobsArgs a;
  for (size_t i = 0; i < args.size(); ++i) {
    const std::string& k = args[i];
    HONE_USER_CHECK(k == "--model" || k == "--input" || k == "--output" || k == "--temperature" ||
                        k == "--batch-tokens" || k == "--device" || k == "--grad-output",
                    "logprobs: unknown argument '", k, "' (see hone logprobs --help)");
    HONE_USER_CHECK(i + 1 < args.size(), "logprobs: ", k, " needs a value (see hone logprobs --help)");
    const std::string& v = args[++i];
    try {
      size_t used = 0;
      if (k == "--model") a.model = v;
      else if (k == "--input") a.input = v;
      else if (k == "--output") a.output = v;
      else if (k == "--device") a.device = v;
      else if (k == "--grad-output") a.grad_output = v;
      else if (k == "--temperature") a.temperature = std::stof(v, &used);
      else a.batch_tokens = std::stoll(v, &used);
      HONE_USER_CHECK(used == 0 || used == v.size(), "logprobs: bad value '", v, "' for ", k);
    } catch (const std::logic_error&) {
      throw UserError(cat("logprobs: bad value '", v, "' for ", k));
    }
  }
  HONE_USER_CHECK(!a.model.empty() && !a.input.empty() && !a.output.empty(),
                  "logprobs: --model, --input and --output are required (see hone logprobs --help)");
  HONE_USER_CHECK(!std::filesystem::is_directory(a.output), "logprobs: --output ", a.output,
                  " is a folder; name the HDF5 file to write");
  HONE_USER_CHECK(a.temperature > 0.f && std::isfinite(a.temperature),
                  "logprobs: --temperature must be a positive number, got ", a.temperature);
  HONE_USER_CHECK(a.device == "cpu" || a.device == "cuda", "logprobs: --device must be cpu or cuda, got '",
                  a.device, "'");
  HONE_USER_CHECK(a.batch_tokens >= 1, "logprobs: --batch-tokens must be at least 1, got ", a.batch_tokens);
  return a;
}

// Reads {"tokens": [...]} lines; errors name the file and line.
std::vector<std::vector<int32_t>> read_sequences(const std::string& path, int vocab_size) {
  std::ifstream f(path);
  HONE_USER_CHECK(f.good(), "cannot open input file '", path, "'");
  std::vector<std::vector<int32_t>> seqs;
  std::string line;
  for (int lineno = 1; std::getline(f, line); ++lineno) {
    if (line.find_first_not_of(" \t\r") == std::string::npos) continue;
    const std::string where = cat(path, ":", lineno, ": ");
    nlohmann::json j;
    try {
      j = nlohmann::json::parse(line);
    } catch (const nlohmann::json::exception& e) {
      throw UserError(cat(where, "not valid JSON (", e.what(), ")"));
    }
    HONE_USER_CHECK(j.is_object() && j.contains("tokens") && j["tokens"].is_array(), where,
                    "expected an object {\"tokens\": [ids...]}");
    const auto& arr = j["tokens"];
    HONE_USER_CHECK(!arr.empty(), where, "empty token sequence");
    std::vector<int32_t> ids;
    ids.reserve(arr.size());
    for (size_t i = 0; i < arr.size(); ++i) {
      HONE_USER_CHECK(arr[i].is_number_integer(), where, "token ", i, " is not an integer");
      const int64_t id = arr[i].get<int64_t>();
      HONE_USER_CHECK(id >= 0 && id < vocab_size, where, "token id ", id, " (position ", i,
                      ") is outside the vocabulary [0, ", vocab_size, ")");
      ids.push_back(int32_t(id));
    }
    seqs.push_back(std::move(ids));
  }
  return seqs;
}

// The name of the first parameter holding NaN or Inf, or "".
std::string first_non_finite_parameter(const ModelWeights& w) {
  for (const auto& [name, t] : w.named_parameters()) {
    const float* p = t.f32();
    for (int64_t i = 0, n = t.numel(); i < n; ++i)
      if (!std::isfinite(p[i])) return name;
  }
  return "";
}

// The weight of logprobs[i] in the loss whose gradient --grad-output writes.
float grad_coefficient(int64_t i) { return 1.f + 0.1f * float(i % 5); }

int run_logprobs(const std::vector<std::string>& argv) {
  LogprobsArgs a = parse_args(argv);
  a.model = model_folder(a.model);
  HONE_USER_CHECK(std::filesystem::is_directory(a.model), "model directory '", a.model, "' does not exist");
#if HONE_CUDA
  if (a.device == "cuda") usable_cuda_devices("hone logprobs --device cuda");
#endif
  const ModelConfig config = load_model_config(a.model);
  const bool want_grads = !a.grad_output.empty();
  rl::check_host_memory_for_model(config, want_grads ? 2 : 1, "hone logprobs");
  ModelWeights weights = allocate_weights(config);
  load_weights(weights, config, a.model);
  // NaN or Inf in a weight makes every logprob that passes it NaN: named here rather than written as results.
  if (const std::string bad = first_non_finite_parameter(weights); !bad.empty())
    throw UserError(cat("logprobs: ", a.model, ": the weight '", bad, "' holds NaN or Inf values"));
  const auto seqs = read_sequences(a.input, config.vocab_size);

  std::vector<int> lengths;
  std::vector<int64_t> offsets{0};
  for (const auto& s : seqs) {
    lengths.push_back(int(s.size()));
    offsets.push_back(offsets.back() + int64_t(s.size()) - 1);
  }
  std::vector<float> logprobs(size_t(offsets.back())), entropy(size_t(offsets.back()));

  const auto groups = split_by_tokens(lengths, a.batch_tokens);
  ModelWeights grads;
  if (want_grads) grads = allocate_weights(config);
  std::unique_ptr<Transformer> model;
#if HONE_CUDA
  cuda::GpuContext ctx;
  std::unique_ptr<GpuTransformer> gpu;
  DeviceArray<float> gpu_grads;
#endif
  if (a.device == "cuda") {
#if HONE_CUDA
    int max_tokens = 1;
    for (const auto& [begin, end] : groups) {
      int n = 0;
      for (int s = begin; s < end; ++s) n += lengths[size_t(s)];
      max_tokens = std::max(max_tokens, n);
    }
    ctx = cuda::create_gpu_context(0);
    gpu = std::make_unique<GpuTransformer>(config, ParamLayout::of(config), ctx, max_tokens);
    gpu->upload_weights(weights);
    if (want_grads) {
      gpu_grads = DeviceArray<float>(gpu->layout().num_params);
      CUDA_CHECK(cudaMemset(gpu_grads.get(), 0, gpu_grads.bytes()));
    }
#else
    throw UserError("logprobs: --device cuda needs a CUDA build of hone (make CUDA=1)");
#endif
  } else {
    model = std::make_unique<Transformer>(config, weights);
    model->set_recompute(true);  // no layer keeps its activations (backward recomputes them: same results)
  }
#if HONE_CUDA
  std::vector<float> lp_host, en_host;
#endif
  for (const auto& [begin, end] : groups) {
    PackedBatch batch;
    for (int s = begin; s < end; ++s) batch.append(seqs[size_t(s)]);
    const float* lp = nullptr;
    const float* en = nullptr;
    if (model) {
      model->forward(batch, a.temperature, /*need_entropy=*/true);
      lp = model->logprobs();
      en = model->entropy();
    }
#if HONE_CUDA
    if (gpu) {
      gpu->forward(batch, a.temperature, /*need_entropy=*/true, /*need_backward=*/want_grads);
      lp_host = gpu->logprobs_host();
      en_host = gpu->entropy_host();
      lp = lp_host.data();
      en = en_host.data();
    }
#endif
    for (int s = begin; s < end; ++s) {
      const int row = batch.seq_begin(s - begin);
      const int64_t n = offsets[size_t(s) + 1] - offsets[size_t(s)];
      std::copy(lp + row, lp + row + n, logprobs.begin() + offsets[size_t(s)]);
      std::copy(en + row, en + row + n, entropy.begin() + offsets[size_t(s)]);
    }
    if (!want_grads) continue;
    std::vector<float> dlogprob(size_t(batch.num_tokens()), 0.f);  // 0 where targets < 0 (each sequence's end)
    for (int s = begin; s < end; ++s) {
      const int row = batch.seq_begin(s - begin);
      for (int64_t i = offsets[size_t(s)]; i < offsets[size_t(s) + 1]; ++i)
        dlogprob[size_t(row + (i - offsets[size_t(s)]))] = grad_coefficient(i);
    }
    if (model) model->backward(dlogprob.data(), nullptr, grads);
#if HONE_CUDA
    if (gpu) gpu->backward_host(dlogprob, nullptr, gpu_grads.get());
#endif
  }

#if HONE_CUDA
  if (gpu) {
    if (want_grads) {  // same layout as allocate_weights: one copy of the flat buffer
      HONE_CHECK(gpu_grads.size() == grads.flat.numel(), "GPU gradient layout differs from the host's");
      CUDA_CHECK(cudaMemcpy(grads.flat.f32(), gpu_grads.get(), gpu_grads.bytes(), cudaMemcpyDeviceToHost));
      gpu_grads = DeviceArray<float>();
    }
    gpu.reset();
    cuda::destroy_gpu_context(ctx);
  }
#endif

  // Finite weights can still overflow (a huge weight, a tiny temperature): such results are not written as numbers.
  const auto bad_logprob = std::find_if(logprobs.begin(), logprobs.end(), [](float v) { return !std::isfinite(v); });
  if (bad_logprob != logprobs.end()) {
    const int64_t i = bad_logprob - logprobs.begin();
    const int64_t s = int64_t(std::upper_bound(offsets.begin(), offsets.end(), i) - offsets.begin()) - 1;
    throw UserError(cat("logprobs: the logprob of token ", i - offsets[size_t(s)] + 1, " of sequence ", s + 1, " in ",
                        a.input, " is ", *bad_logprob, " (not finite): the model's activations overflow (--temperature ",
                        a.temperature, "); nothing was written"));
  }

  // Written next to the destination (a temporary of this process) and renamed, so a failure never leaves a
  // half-written output, nor the temporary.
  write_file_atomic_with(a.output, [&](const std::string& tmp) {
    Hdf5File out(tmp, Hdf5File::Mode::create);
    out.write_f32("/logprobs", logprobs);
    out.write_f32("/entropy", entropy);
    out.write_i64("/offsets", offsets);
    out.set_attribute("/", "model", a.model);
    out.set_attribute("/", "temperature", cat(a.temperature));
    out.set_attribute("/", "device", a.device);
    out.close();  // writes the file: a full disk is reported here
  });
  if (want_grads) {
    std::vector<SafetensorsEntry> entries;
    for (const auto& [name, t] : grads.named_parameters()) entries.push_back(safetensors_entry(name, t));
    write_safetensors(a.grad_output, entries);
  }
  std::printf("wrote %zu sequences, %lld logprobs to %s\n", seqs.size(), (long long)offsets.back(),
              a.output.c_str());
  return kExitOk;
}

const CommandRegistration reg{{"logprobs", "per-token logprobs of token sequences under a model (HDF5 out)",
                               /*uses_mpi=*/false, &run_logprobs, kUsage}};

}  // namespace
}  // namespace hone
