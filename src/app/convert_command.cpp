// `hone convert`: reads a Hugging Face checkpoint and writes it back through hone's own writer (f32 or bf16,
// optionally sharded). Useful to change a checkpoint's dtype or sharding, and to check that a checkpoint loads.
// With --init random it needs only the folder's config.json and writes seeded random weights of that shape (a model
// folder to start from, as `model.init = "random"` does in a deck).
// With a GGUF file (llama.cpp) it writes the Hugging Face folder of that model (model/gguf_import.h).
#include <cctype>
#include <cstdio>
#include <filesystem>
#include <string>
#include <vector>

#include "model/gguf_file.h"
#include "model/gguf_import.h"
#include "model/hf_folder.h"
#include "model/model_config.h"
#include "model/model_source.h"
#include "model/weights.h"
#include "rl/host_memory_plan.h"
#include "runtime/command.h"
#include "runtime/error.h"

namespace hone {
namespace {

namespace fs = std::filesystem;

const char* kUsage =
    "usage: hone convert --model DIR|FILE.gguf --output DIR [--dtype f32|bf16] [--max-shard-size BYTES]\n"
    "                    [--init pretrained|random] [--seed N] [--init-std X]\n"
    "  Reads a Hugging Face checkpoint and writes it back (another dtype or sharding; also checks that it loads),\n"
    "  or turns a GGUF file (llama.cpp) into a Hugging Face folder: config.json, safetensors, tokenizer.json,\n"
    "  tokenizer_config.json (chat template, special tokens), generation_config.json.\n"
    "  --model DIR            a Hugging Face checkpoint (config.json + safetensors)\n"
    "  --model FILE.gguf      a GGUF model (architectures llama, qwen2, qwen3, qwen3moe), dequantized to fp32\n"
    "                         exactly as ggml does (default --dtype f32)\n"
    "  --output DIR           where to write; must not exist or be empty\n"
    "  --init random          write random weights of DIR's config.json shape instead (DIR needs no weights):\n"
    "                         normal(0, --init-std, default 0.02) matrices, norms 1, biases 0, seeded by --seed\n"
    "                         (default 1234), the weights `hone run` draws with model.init = \"random\"\n"
    "  --dtype f32|bf16       dtype of the written weights (default: bf16 when the config says bfloat16, else f32)\n"
    "  --max-shard-size SIZE  shard above this size, in bytes or with a suffix KB, MB, GB (10^3) or KiB, MiB, GiB\n"
    "                         (default 5GB)\n";

// "1000", "5GB", "512MiB" -> bytes.
int64_t parse_size(const std::string& text) {
  size_t i = 0;
  while (i < text.size() && std::isdigit(static_cast<unsigned char>(text[i]))) ++i;
  HONE_USER_CHECK(i > 0 && i <= 15, "--max-shard-size: '", text, "' is not a size (e.g. 2000000000, 2GB, 500MiB)");
  int64_t n = std::stoll(text.substr(0, i));
  const std::string unit = text.substr(i);
  int64_t mult = 1;
  if (unit.empty() || unit == "B") mult = 1;
  else if (unit == "KB") mult = 1000;
  else if (unit == "MB") mult = 1000 * 1000;
  else if (unit == "GB") mult = 1000 * 1000 * 1000;
  else if (unit == "KiB") mult = int64_t(1) << 10;
  else if (unit == "MiB") mult = int64_t(1) << 20;
  else if (unit == "GiB") mult = int64_t(1) << 30;
  else throw UserError(cat("--max-shard-size: unknown unit '", unit, "' (use B, KB, MB, GB, KiB, MiB, GiB)"));
  HONE_USER_CHECK(n > 0, "--max-shard-size must be positive");
  return n * mult;
}

int run_convert(const std::vector<std::string>& args) {
  std::string model, output, dtype_arg, shard_arg, init = "pretrained", seed_arg = "1234", std_arg = "0.02";
  for (size_t i = 0; i < args.size(); ++i) {
    const std::string& a = args[i];
    auto value = [&]() -> std::string {
      HONE_USER_CHECK(i + 1 < args.size(), "convert: ", a, " needs a value (see hone convert --help)");
      return args[++i];
    };
    if (a == "--model") model = value();
    else if (a == "--output") output = value();
    else if (a == "--dtype") dtype_arg = value();
    else if (a == "--max-shard-size") shard_arg = value();
    else if (a == "--init") init = value();
    else if (a == "--seed") seed_arg = value();
    else if (a == "--init-std") std_arg = value();
    else throw UserError(cat("convert: unknown argument '", a, "' (see hone convert --help)"));
  }
  HONE_USER_CHECK(!model.empty() && !output.empty(), "convert: --model and --output are required (see hone convert --help)");
  HONE_USER_CHECK(!fs::exists(output) || (fs::is_directory(output) && fs::is_empty(output)), "convert: ", output,
                  " exists and is not an empty folder; refusing to overwrite it");

  if (is_gguf_path(model)) {
    HONE_USER_CHECK(init == "pretrained" && shard_arg.empty(), "convert: --init and --max-shard-size apply to "
                    "Hugging Face folders; a GGUF file is converted as it is");
    DType dtype = DType::f32;
    if (dtype_arg == "bf16" || dtype_arg == "bfloat16") dtype = DType::bf16;
    else HONE_USER_CHECK(dtype_arg.empty() || dtype_arg == "f32" || dtype_arg == "float32",
                         "convert: --dtype must be f32 or bf16 (got '", dtype_arg, "')");
    HONE_USER_CHECK(fs::is_regular_file(model), "convert: ", model, ": no such GGUF file");
    const gguf::GgufFile file(model);
    const ModelConfig config = gguf_model_config(file);
    write_hf_folder_from_gguf(file, output, dtype);
    std::printf("converted %s (%s, %lld parameters) to %s in %s\n", model.c_str(), architecture_hf_name(config.arch),
                static_cast<long long>(config.num_parameters()), output.c_str(), dtype_name(dtype));
    return kExitOk;
  }
  const ModelConfig config = load_model_config(model);
  DType dtype = config.torch_dtype == "bfloat16" ? DType::bf16 : DType::f32;
  if (dtype_arg == "f32" || dtype_arg == "float32") dtype = DType::f32;
  else if (dtype_arg == "bf16" || dtype_arg == "bfloat16") dtype = DType::bf16;
  else HONE_USER_CHECK(dtype_arg.empty(), "convert: --dtype must be f32 or bf16 (got '", dtype_arg, "')");
  const int64_t max_shard = shard_arg.empty() ? int64_t(5) * 1000 * 1000 * 1000 : parse_size(shard_arg);

  HONE_USER_CHECK(init == "pretrained" || init == "random", "convert: --init must be pretrained or random (got '",
                  init, "')");
  rl::check_host_memory_for_model(config, 1, "hone convert");
  ModelWeights w = allocate_weights(config);
  if (init == "random") {
    size_t used = 0;
    uint64_t seed = 0;
    double init_std = 0;
    try {
      seed = std::stoull(seed_arg, &used);
      HONE_USER_CHECK(used == seed_arg.size() && seed_arg[0] != '-', "");
      init_std = std::stod(std_arg, &used);
      HONE_USER_CHECK(used == std_arg.size(), "");
    } catch (const std::exception&) {
      throw UserError(cat("convert: --seed must be an integer >= 0 and --init-std a number (got '", seed_arg, "', '",
                          std_arg, "')"));
    }
    HONE_USER_CHECK(init_std > 0 && init_std <= 1, "convert: --init-std must be in (0, 1], got ", std_arg);
    init_random_weights(w, config, seed, float(init_std));
  } else {
    load_weights(w, config, model);
  }
  save_model(w, config, output, dtype, max_shard);
  // Tokenizer and generation settings travel along unchanged, so the output is a complete model folder.
  write_hf_side_files(output, config, model, model, -1);

  std::printf("%s %s (%s, %lld parameters) to %s in %s\n", init == "random" ? "random weights of" : "converted",
              model.c_str(), architecture_hf_name(config.arch), static_cast<long long>(config.num_parameters()),
              output.c_str(), dtype_name(dtype));
  return kExitOk;
}

const CommandRegistration reg{{"convert", "rewrite a Hugging Face checkpoint (dtype, sharding)", false, &run_convert,
                               kUsage}};

}  // namespace
}  // namespace hone
