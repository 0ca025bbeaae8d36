// The pre-flight checks of `hone check` (see the header).
#include "rl/preflight.h"

#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <algorithm>
#include <functional>
#include <memory>
#include <optional>

#include "config/config.h"
#include "data/dataset_jsonl.h"
#include "io/jsonl.h"
#include "model/deck_model.h"
#include "model/model_config.h"
#include "model/model_source.h"
#include "model/param_table.h"
#include "model/safetensors.h"
#include "parallel/generation_layout.h"
#include "parallel/pp_check.h"
#include "reward/plugin_reward.h"
#include "reward/process_reward.h"
#include "rl/device_memory_plan.h"
#include "rl/grpo_settings.h"
#include "rl/host_memory_plan.h"
#include "runtime/error.h"
#include "runtime/host_memory.h"
#include "runtime/rank_grid.h"
#include "runtime/runtime.h"
#include "tokenizer/chat_setup.h"
#include "tokenizer/tokenizer.h"

namespace hone::rl {
namespace {
namespace fs = std::filesystem;

std::string shape_string(const std::vector<int64_t>& shape) {
  std::string s = "[";
  for (size_t i = 0; i < shape.size(); ++i) s += cat(i ? ", " : "", shape[i]);
  return s + "]";
}

std::string gib(double bytes) {
  char b[32];
  std::snprintf(b, sizeof b, "%.2f GiB", bytes / double(int64_t(1) << 30));
  return b;
}

// Where a problem with `key` is to be fixed: its line or override; a value derived from another key (tokenizer.path
// from model.path) points at that key.
std::string where(const Config& c, const std::string& key) {
  const ValueSource& s = c.source(key);
  if (s.kind == ValueSource::Kind::derived && !s.text.empty() && find_key_spec(s.text))
    return cat(key_location(c, s.text), ": ", key, " (from ", s.text, ")");
  return cat(key_location(c, key), ": ", key);
}

// "<where>: model.path = "x": <what>".
std::string about(const Config& c, const std::string& key, const std::string& what) {
  return cat(where(c, key), " = \"", c.get_string(key), "\": ", what);
}

bool readable_file(const fs::path& p, std::string* why) {
  std::error_code ec;
  if (!fs::exists(p, ec)) {
    *why = cat("no ", p.filename().string(), " in it");
    return false;
  }
  if (!fs::is_regular_file(p, ec)) {
    *why = cat(p.string(), " is not a file");
    return false;
  }
  std::ifstream in(p, std::ios::binary);
  if (!in) {
    *why = cat(p.string(), " cannot be read: ", std::strerror(errno));
    return false;
  }
  return true;
}

// A folder the run writes into: it exists and takes a file, or its nearest existing parent does (the run creates
// the rest). A probe file is written and removed: permissions alone lie for root and read-only file systems.
std::string writable_folder_problem(const std::string& dir) {
  std::error_code ec;
  fs::path p = fs::absolute(dir, ec);
  if (fs::exists(p, ec) && !fs::is_directory(p, ec)) return "a file of that name is in the way";
  while (!p.empty() && !fs::exists(p, ec)) p = p.parent_path();
  if (!fs::is_directory(p, ec)) return cat("its parent ", p.string(), " is not a folder");
  const std::string probe = (p / cat(".hone-check-probe-", ::getpid())).string();
  const int fd = ::open(probe.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0644);
  if (fd < 0) return cat(p.string(), " is not writable: ", std::strerror(errno));
  ::close(fd);
  ::unlink(probe.c_str());
  return {};
}

// The weight files of a model folder against the model's parameter table: their headers only (the files are mapped,
// their tensors never read), every parameter present with its Hugging Face shape.
std::string check_weight_files(const std::string& dir, const ModelConfig& m, std::string* problem) {
  const bool indexed = fs::exists(fs::path(dir) / "model.safetensors.index.json");
  if (!indexed && !fs::exists(fs::path(dir) / "model.safetensors")) {
    *problem = "no model.safetensors (or model.safetensors.index.json) in it; set model.init = \"random\" to start "
               "from random weights of its config.json";
    return {};
  }
  try {
    const SafetensorsCheckpoint ck(dir);
    for (const ParamSpec& p : param_table(m)) {
      if (!ck.contains(p.name)) {
        *problem = cat("the weights have no ", p.name, " (the model of config.json needs it)");
        return {};
      }
      const auto& shape = ck.info(p.name).shape;
      if (shape != p.shape) {
        *problem = cat(p.name, " has shape ", shape_string(shape), " in the weights but config.json makes it ",
                       shape_string(p.shape));
        return {};
      }
    }
  } catch (const UserError& e) {
    *problem = e.what();
    return {};
  }
  std::error_code ec;
  double bytes = 0;
  int files = 0;
  for (const auto& e : fs::directory_iterator(dir, ec))
    if (e.path().extension() == ".safetensors") {
      bytes += double(fs::file_size(e.path(), ec));
      ++files;
    }
  return cat("weights: ", files, " safetensors file", files == 1 ? "" : "s", " (", gib(bytes),
             "), every tensor's shape as config.json says");
}

std::string shape_text(const ModelConfig& m) {
  return cat(architecture_hf_name(m.arch), ": ", m.num_hidden_layers, " layers, hidden ", m.hidden_size, ", ",
             m.num_attention_heads, " heads (", m.num_key_value_heads, " KV), vocabulary ", m.vocab_size, ", ",
             m.num_parameters(), " parameters");
}

class Preflight {
 public:
  Preflight(const Config& c, int ranks) : c_(c), ranks_(ranks) {}

  PreflightReport run() {
    attempt([&] { check_tokenizer(); });  // first: a random-init vocabulary of 0 is the tokenizer's
    attempt([&] { check_model(); });
    if (model_ && tokenizer_) check_model_against_deck();
    attempt([&] { check_data(); });
    attempt([&] { check_reward(); });
    attempt([&] { check_validation_data(); });
    attempt([&] { check_folders(); });
    attempt([&] { check_layout(); });
    if (model_ && grid_) attempt([&] { report_memory(); });
    return std::move(r_);
  }

 private:
  // One check: its refusal is a problem; the next checks still run.
  void attempt(const std::function<void()>& check) {
    try {
      check();
    } catch (const UserError& e) {
      r_.problems.push_back(e.what());
    }
  }
  void line(const std::string& what, const std::string& text) {
    std::string w = what;
    w.resize(std::max<size_t>(w.size(), 11), ' ');
    r_.lines.push_back(w + " " + text);
  }

  // The folder to check for a path key: the key's value, or the cached conversion of the GGUF file it names
  // (made here when missing, as hone run would).
  std::string gguf_folder(const char* key) {
    const std::string path = c_.get_string(key);
    if (!is_gguf_path(path)) return path;
    try {
      return model_folder(path);
    } catch (const UserError& e) {
      throw UserError(about(c_, key, e.what()));
    }
  }

  void check_model() {
    const std::string path = gguf_folder("model.path");
    if (path.empty()) {
      ModelConfig m = random_init_model_config(c_);
      if (m.vocab_size == 0 && !tokenizer_) return;  // its size is the tokenizer's, which did not load
      if (m.vocab_size == 0) m.vocab_size = tokenizer_->vocab_size();
      model_ = m;
      line("model", cat("random init: ", shape_text(m)));
      return;
    }
    std::error_code ec;
    HONE_USER_CHECK(fs::exists(path, ec), about(c_, "model.path", "no such folder"));
    HONE_USER_CHECK(fs::is_directory(path, ec), about(c_, "model.path", "not a folder"));
    std::string why;
    HONE_USER_CHECK(readable_file(fs::path(path) / "config.json", &why),
                    about(c_, "model.path", why + " (a Hugging Face model folder is expected)"));
    try {
      model_ = load_model_config(path);
    } catch (const UserError& e) {
      throw UserError(about(c_, "model.path", e.what()));
    }
    std::string weights = "weights not read: the run starts from random weights";
    if (c_.get_string("model.init") != "random") {  // a config.json alone may start from random weights
      std::string problem;
      weights = check_weight_files(path, *model_, &problem);
      HONE_USER_CHECK(problem.empty(), about(c_, "model.path", problem));
    }
    const std::string given = c_.get_string("model.path");
    line("model", cat(given == path ? path : cat(given, " (converted into ", path, ")"), ": ", shape_text(*model_),
                      "; ", weights));
  }

  void check_tokenizer() {
    const std::string kind = c_.get_string("tokenizer.kind");
    const std::string path = c_.has_value("tokenizer.path") ? gguf_folder("tokenizer.path") : "";
    if (kind == "hf") {
      HONE_USER_CHECK(!path.empty(), where(c_, "tokenizer.path"),
                      " is empty: tokenizer.kind = \"hf\" needs a folder holding tokenizer.json");
      std::error_code ec;
      HONE_USER_CHECK(fs::is_directory(path, ec), about(c_, "tokenizer.path", "no such folder"));
      std::string why;
      HONE_USER_CHECK(readable_file(fs::path(path) / "tokenizer.json", &why), about(c_, "tokenizer.path", why));
    }
    try {
      tokenizer_ = load_tokenizer(kind, path);
    } catch (const UserError& e) {
      throw UserError(kind == "hf" ? about(c_, "tokenizer.path", e.what()) : std::string(e.what()));
    }
    line("tokenizer", cat(kind == "hf" ? path + ": " : std::string("built-in characters: "),
                          tokenizer_->vocab_size(), " tokens, chat format ", c_.get_string("tokenizer.chat_format")));
    // The chat format as hone run resolves it: the model's template parsed and rendered for a probe turn (a
    // construct outside hone's jinja, a template that fails, loops past its budget or renders nothing), a fixed
    // format checked against the tokenizer's special tokens.
    const std::string chat_format = c_.get_string("tokenizer.chat_format");
    try {
      const ChatSetup chat(chat_format, *tokenizer_, kind == "hf" ? path : "");
    } catch (const UserError& e) {
      throw UserError(cat(where(c_, "tokenizer.chat_format"), ": ", e.what()));
    }
  }

  // What `hone run` compares once both are read: the model against the tokenizer and the deck's lengths.
  void check_model_against_deck() {
    const ModelConfig& m = *model_;
    const bool random = c_.get_string("model.path").empty();
    attempt([&] {
      HONE_USER_CHECK(m.vocab_size >= tokenizer_->vocab_size(),
                      random ? where(c_, "model.vocab_size") : where(c_, "model.path"), ": the model's vocabulary (",
                      m.vocab_size, " tokens) is smaller than the tokenizer's (", tokenizer_->vocab_size(), ")");
    });
    attempt([&] {
      const int64_t total = c_.get_int("generation.max_total_sequence_length");
      HONE_USER_CHECK(m.max_position_embeddings >= total, where(c_, "generation.max_total_sequence_length"), " = ",
                      total, ": the model is built for ", m.max_position_embeddings,
                      " positions (max_position_embeddings); lower it to at most ", m.max_position_embeddings);
    });
    attempt([&] {
      for (int64_t id : c_.get_int_list("generation.stop_token_ids"))
        HONE_USER_CHECK(id < m.vocab_size, where(c_, "generation.stop_token_ids"), ": ", id,
                        " is outside the vocabulary (", m.vocab_size, " tokens)");
    });
  }

  void check_data() {
    const std::string task = c_.get_string("data.task");
    if (task != "jsonl") {
      line("data", cat("built-in task ", task, " (generated as the run goes)"));
      return;
    }
    const std::string path = c_.has_value("data.path") ? c_.get_string("data.path") : "";
    HONE_USER_CHECK(!path.empty(), where(c_, "data.path"), " is empty: data.task = \"jsonl\" needs a JSONL file");
    std::error_code ec;
    HONE_USER_CHECK(fs::exists(path, ec), about(c_, "data.path", "no such file"));
    std::string why;
    HONE_USER_CHECK(readable_file(path, &why), about(c_, "data.path", why));
    data::DatasetOptions o;
    o.path = path;
    o.prompt_key = c_.get_string("data.prompt_key");
    o.answer_key = c_.get_string("data.answer_key");
    const bool skip = c_.get_bool("data.skip_bad_lines");
    JsonlReader reader(path);
    JsonlRecord rec;
    int parsed = 0, skipped = 0;
    while (parsed < kPreflightDataRows && reader.next(rec)) {
      try {
        data::prompt_from_record(rec, path, o);
        ++parsed;
      } catch (const UserError& e) {
        if (!skip) throw UserError(cat(e.what(), " (", where(c_, "data.path"), "; data.skip_bad_lines = true skips such lines)"));
        ++skipped;
      }
    }
    HONE_USER_CHECK(parsed > 0, about(c_, "data.path", skipped ? "no usable prompt in its first lines" : "empty file"));
    line("data", cat(path, ": the first ", parsed, " rows parse (", o.prompt_key, ", ", o.answer_key, ")",
                     skipped ? cat(", ", skipped, " bad lines skipped") : std::string()));
  }

  // The user's reward as the run starts it, on rank 0: the plug-in loaded (its functions and ABI version, its
  // hone_reward_create with reward.library_options, then hone_reward_destroy), the program started and watched for
  // kRewardProbeSeconds without a request (it must keep running, silent on stdout), then sent end of input.
  static constexpr double kRewardProbeSeconds = 2.0;
  void check_reward() {
    const std::string command = c_.get_string("reward.command"), library = c_.get_string("reward.library");
    auto placed = [&](const char* key, const std::function<void()>& start) {
      try {
        start();
      } catch (const UserError& e) {
        throw UserError(cat(key_location(c_, key), ": ", e.what()));
      }
    };
    if (!library.empty()) {
      std::error_code ec;
      HONE_USER_CHECK(fs::exists(library, ec), about(c_, "reward.library", "no such file"));
      std::string why;
      HONE_USER_CHECK(readable_file(library, &why), about(c_, "reward.library", why));
      placed("reward.library", [&] { reward::PluginReward(library, c_.get_string("reward.library_options"), 0); });
      line("reward", cat("plug-in ", library, " (loaded, created and destroyed)"));
    } else if (!command.empty()) {
      placed("reward.command", [&] {
        reward::ProcessReward program(command, c_.get_float("reward.timeout_s"), 0);
        program.probe(kRewardProbeSeconds);
      });
      line("reward", cat("the program `", command, "` (started; running after ", kRewardProbeSeconds, " s)"));
    } else {
      line("reward", c_.get_string("data.task") == "jsonl" ? std::string("the math answer checker")
                                                          : cat("the ", c_.get_string("data.task"), " task's checker"));
    }
  }

  // The held-out problems' file, when validation is on and reads one (a synthetic task needs none).
  void check_validation_data() {
    const std::string path = c_.get_string("validation.path");
    if (!(c_.get_int("validation.every") > 0 || c_.get_bool("validation.at_start")) || path.empty()) return;
    std::error_code ec;
    HONE_USER_CHECK(fs::exists(path, ec), about(c_, "validation.path", "no such file"));
    std::string why;
    HONE_USER_CHECK(readable_file(path, &why), about(c_, "validation.path", why));
    line("validation", cat(path, ", every ", c_.get_int("validation.every"), " steps",
                           c_.get_bool("validation.at_start") ? " and at the start" : ""));
  }

  void check_folders() {
    const std::string out = c_.get_string("output.dir"), ck = c_.get_string("checkpoint.dir");
    std::string problem = writable_folder_problem(out);
    HONE_USER_CHECK(problem.empty(), about(c_, "output.dir", problem));
    const std::string h5 = (fs::path(out) / (c_.get_string("run.name") + ".h5")).string();
    std::error_code ec;
    HONE_USER_CHECK(!fs::exists(h5, ec) || c_.get_bool("output.overwrite") || c_.get_string("run.resume") == "auto",
                    where(c_, "output.dir"), ": the output file '", h5,
                    "' already exists: set output.overwrite=true to replace it, run.resume=auto to continue its run, ",
                    "or choose another output.dir or run.name");
    problem = writable_folder_problem(ck);
    HONE_USER_CHECK(problem.empty(), about(c_, "checkpoint.dir", problem));
    line("output", cat(h5, " and ", out, "/", c_.get_string("run.name"), ".deck.toml; checkpoints in ", ck));
  }

  void check_layout() {
    grid_ = read_rank_grid(c_, ranks_);  // tp and pp supported, tp divides the model, the ranks divide
    try {
      read_grpo_settings(c_, grid_->dp());  // the batch sizes against the data-parallel ranks
    } catch (const UserError&) {
      grid_.reset();  // the memory count needs the settings: said once, here
      throw;
    }
    line("layout", cat(ranks_, ranks_ == 1 ? " rank" : " ranks", ": dp ", grid_->dp(), " x tp ", grid_->tp(),
                       grid_->cp() > 1 ? cat(" x cp ", grid_->cp()) : std::string(), " x pp ", grid_->pp(),
                       ", run.device = ", c_.get_string("run.device")));
  }

  // The GPU memory planner's count for one rank (rl/device_memory_plan.h), without the activations: their size
  // comes from the GPU model's arena layout, which `hone run` measures before it allocates the optimizer.
  void report_memory() {
    const ModelConfig& m = *model_;
    if (c_.get_string("run.device") == "cpu") return report_host_memory();
    DeviceMemoryPlan plan;
    const PipelineLayout pipe = deck_pipeline_layout(c_, m.num_hidden_layers);
    set_tensor_parallel(plan, m, grid_->tp(), &pipe, grid_->ep());
    set_generation_layout(plan, m, deck_generation_tp(c_),
                          GenerationLayout::of(*grid_, deck_generation_tp(c_)).same_as_training);
    plan.dp = grid_->dp() * grid_->cp();  // the optimizer's group: dp, x cp under context parallelism
    plan.cp = grid_->cp();
    plan.distributed = c_.get_bool("train.distributed_optimizer") && plan.dp > 1;
    plan.offload = c_.get_bool("train.optimizer_offload");
    plan.offload_during_generation = c_.get_bool("train.offload_during_generation");
    plan.microbatch_tokens = c_.get_int("train.max_tokens_per_microbatch");
    plan.kv_cache = c_.get_float("generation.kv_cache_gib") * double(int64_t(1) << 30);
    // Generation's copy of every expert under expert parallelism: counted with generation.experts = replicated;
    // under auto only named (the run keeps it where it fits, else splits the experts).
    const std::string experts = c_.get_string("generation.experts");
    set_expert_replica(plan, m, grid_->tp(), grid_->ep(), experts != "parallel");
    const double replica = experts == "replicated" ? plan.expert_replica : 0.0;
    const double weights = 2.0 * double(plan.num_params);
    line("memory", cat("per GPU rank, at least: ", gib(weights), " bf16 weights + ", gib(plan.optimizer_state()),
                       " optimizer state", plan.distributed ? cat(" (1/", plan.dp, " shard)") : std::string(), " + ",
                       gib(plan.gradients()), " fp32 gradients",
                       plan.generation_copy > 0 ? cat(" + ", gib(plan.generation_copy), " generation copy") : std::string(),
                       replica > 0 ? cat(" + ", gib(replica), " generation copy of every expert") : std::string(),
                       " = ", gib(weights + replica + plan.training()),
                       " before the activations of a ", plan.microbatch_tokens,
                       "-token micro-batch; generation: ", gib(weights + replica + plan.generation()),
                       plan.kv_cache > 0 ? " with the KV cache" : " before the KV cache",
                       plan.expert_replica > 0 && replica == 0
                           ? cat("; generation.experts = auto adds a ", gib(plan.expert_replica),
                                 " copy of every expert where it fits (else the experts stay split)")
                           : std::string()));
    check_gpu_host_memory();
  }

  // The host memory planner's count for one CPU rank (rl/host_memory_plan.h), and what this machine has now. A run
  // this machine cannot hold is refused with `hone run`'s own message (host_memory_refusal: the numbers and the keys
  // to change), as if the ranks that share a host (the launcher's per-node count, else all of them) ran here, rank 0
  // among them: check on the kind of machine the run gets (a job's first step), or read the count.
  HostMemoryPlan host_plan() const {
    const GrpoSettings s = read_grpo_settings(c_, grid_->dp());
    HostMemoryPlan plan = host_memory_plan(s, *model_, grid_->tp(), grid_->dp(), c_.get_string("model.path").empty());
    plan.writer_on_host = true;
    plan.ranks_on_host = std::max(1, std::min(ranks_, launcher_local_size() > 0 ? launcher_local_size() : ranks_));
    if (plan.gpu && (grid_->pp() > 1 || grid_->ep() > 1)) plan.num_params = 0;  // as hone run counts it
    // Synthetic validation problems are validation.max_samples; a file's count is known once it is read.
    const bool validating = c_.get_int("validation.every") > 0 || c_.get_bool("validation.at_start");
    if (validating && c_.get_string("validation.path").empty())
      set_host_validation(plan, c_.get_int("validation.max_samples"), c_.get_int("validation.num_generations"),
                          GenerationLayout::of(*grid_, deck_generation_tp(c_)).replicas());
    return plan;
  }

  // On the GPU the host's share (the initial weights, the samples): refused here as hone run refuses it.
  void check_gpu_host_memory() {
    const HostMemory here = available_host_memory();
    const std::string refusal = host_memory_refusal(host_plan(), here.bytes, here.limit);
    if (!refusal.empty()) r_.problems.push_back(refusal);
  }

  void report_host_memory() {
    const HostMemoryPlan plan = host_plan();
    const HostMemory here = available_host_memory();
    line("memory", cat("per rank (run.device = cpu: host memory, fp32), at least: ", gib(plan.steps()), " (",
                       plan.roles(), " copies of ", plan.num_params, " parameters, AdamW ",
                       plan.distributed ? "shard" : "moments", ", activations of a ", plan.microbatch_tokens,
                       "-token micro-batch, KV cache), ", gib(plan.peak(true)),
                       " on rank 0 while it writes a checkpoint",
                       here.bytes >= 0 ? cat("; this machine has ", gib(here.bytes), " available") : std::string()));
    const std::string refusal = host_memory_refusal(plan, here.bytes, here.limit);
    if (!refusal.empty()) r_.problems.push_back(refusal);
  }

  const Config& c_;
  const int ranks_;
  PreflightReport r_;
  std::optional<ModelConfig> model_;
  std::unique_ptr<Tokenizer> tokenizer_;
  std::optional<RankGrid> grid_;
};

}  // namespace

PreflightReport preflight(const Config& c, int ranks) { return Preflight(c, ranks).run(); }

}  // namespace hone::rl
