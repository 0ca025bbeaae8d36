// What `hone bench` is asked: named shapes and argument parsing (app/bench_args.h).
#include "app/bench_args.h"

#include <stdexcept>

#include "config/toml.h"
#include "runtime/error.h"

namespace hone {

namespace {

int64_t parse_int(const std::string& k, const std::string& v) {
  try {
    size_t used = 0;
    const long long x = std::stoll(v, &used);
    HONE_USER_CHECK(used == v.size() && x > 0, "bench: ", k, " needs a positive integer, got '", v, "'");
    return x;
  } catch (const std::logic_error&) {
    throw UserError(cat("bench: ", k, " needs a positive integer, got '", v, "'"));
  }
}

// [bench] shape, micro_batch_tokens, sequences, seq_len, reps, recompute, profile, output_dir.
void read_deck(const std::string& path, BenchArgs& a) {
  toml::table t;
  try {
    t = toml::parse_file(path);
  } catch (const toml::parse_error& e) {
    throw UserError(cat(path, ": ", e.description()));
  }
  const toml::table* b = t["bench"].as_table();
  HONE_USER_CHECK(b != nullptr, path, ": a bench deck needs a [bench] table");
  for (const auto& [key, node] : *b) {
    const std::string k(key.str());
    auto positive = [&](int64_t& out) {
      const auto v = node.value<int64_t>();
      HONE_USER_CHECK(v && *v > 0, path, ": bench.", k, " must be a positive integer");
      out = *v;
    };
    auto flag = [&](bool& out) {
      const auto v = node.value<bool>();
      HONE_USER_CHECK(v.has_value(), path, ": bench.", k, " must be true or false");
      out = *v;
    };
    int64_t n = 0;
    if (k == "shape" || k == "output_dir") {
      const auto v = node.value<std::string>();
      HONE_USER_CHECK(v.has_value(), path, ": bench.", k, " must be a string");
      (k == "shape" ? a.shape : a.output_dir) = *v;
    } else if (k == "micro_batch_tokens") {
      positive(a.micro_batch_tokens);
    } else if (k == "sequences" || k == "seq_len" || k == "reps") {
      positive(n);
      (k == "sequences" ? a.sequences : k == "seq_len" ? a.seq_len : a.reps) = int(n);
    } else if (k == "layers") {
      const auto v = node.value<int64_t>();
      HONE_USER_CHECK(v && *v >= 0, path, ": bench.layers must be a non-negative integer");
      a.layers = int(*v);
    } else if (k == "recompute") {  // true / false (the older form) or "none" | "selective" | "full"
      if (const auto b = node.value<bool>()) {
        a.recompute = *b ? Recompute::full : Recompute::none;
      } else {
        const auto v = node.value<std::string>();
        HONE_USER_CHECK(v && (*v == "none" || *v == "selective" || *v == "full"), path,
                        ": bench.recompute must be \"none\", \"selective\" or \"full\"");
        a.recompute = parse_recompute(*v);
      }
    } else if (k == "profile") {
      flag(a.profile);
    } else {
      throw UserError(cat(path, ": unknown key bench.", k,
                          " (allowed: shape, micro_batch_tokens, sequences, seq_len, reps, layers, recompute, "
                          "profile, output_dir)"));
    }
  }
}

}  // namespace

ModelConfig bench_shape(const std::string& name) {
  ModelConfig c;
  c.rms_norm_eps = 1e-6f;
  c.tie_word_embeddings = true;
  c.max_position_embeddings = 40960;
  if (name == "qwen3-0.6b" || name == "qwen3-1.7b") {
    const bool small = name == "qwen3-0.6b";
    c.arch = Architecture::qwen3;
    c.vocab_size = 151936;
    c.hidden_size = small ? 1024 : 2048;
    c.intermediate_size = small ? 3072 : 6144;
    c.num_hidden_layers = 28;
    c.num_attention_heads = 16;
    c.num_key_value_heads = 8;
    c.head_dim = 128;
    c.qk_norm = true;
    c.rope.theta = 1e6f;
  } else if (name == "llama-3.2-1b") {
    c.arch = Architecture::llama;
    c.vocab_size = 128256;
    c.hidden_size = 2048;
    c.intermediate_size = 8192;
    c.num_hidden_layers = 16;
    c.num_attention_heads = 32;
    c.num_key_value_heads = 8;
    c.head_dim = 64;
    c.rms_norm_eps = 1e-5f;
    c.max_position_embeddings = 131072;
    c.rope.theta = 500000.f;
    c.rope.llama3 = true;
    c.rope.factor = 32.f;
    c.rope.low_freq_factor = 1.f;
    c.rope.high_freq_factor = 4.f;
    c.rope.original_max_position_embeddings = 8192;
  } else if (name == "qwen3-30b-a3b") {
    c.arch = Architecture::qwen3_moe;
    c.vocab_size = 151936;
    c.hidden_size = 2048;
    c.intermediate_size = 6144;
    c.num_hidden_layers = 48;
    c.num_attention_heads = 32;
    c.num_key_value_heads = 4;
    c.head_dim = 128;
    c.qk_norm = true;
    c.rope.theta = 1e6f;
    c.tie_word_embeddings = false;
    c.num_experts = 128;
    c.num_experts_per_tok = 8;
    c.moe_intermediate_size = 768;
    c.norm_topk_prob = true;
    c.router_aux_loss_coef = 0.001f;
  } else {
    throw UserError(cat("bench: unknown shape '", name,
                        "' (known: qwen3-0.6b, qwen3-1.7b, llama-3.2-1b, qwen3-30b-a3b; see hone bench --help)"));
  }
  c.rope.head_dim = c.head_dim;
  c.validate();
  return c;
}

BenchArgs parse_bench_args(const std::vector<std::string>& args) {
  BenchArgs a;
  for (size_t i = 0; i < args.size(); ++i) {
    const std::string& k = args[i];
    if (k == "--recompute") {  // alone: full
      a.recompute = Recompute::full;
      if (i + 1 < args.size() && (args[i + 1] == "none" || args[i + 1] == "selective" || args[i + 1] == "full"))
        a.recompute = parse_recompute(args[++i]);
    } else if (k == "--profile") {
      a.profile = true;
    } else if (k.rfind("--", 0) == 0) {
      HONE_USER_CHECK(k == "--micro-batch-tokens" || k == "--sequences" || k == "--seq-len" || k == "--reps" ||
                          k == "--output-dir" || k == "--layers",
                      "bench: unknown argument '", k, "' (see hone bench --help)");
      HONE_USER_CHECK(i + 1 < args.size(), "bench: ", k, " needs a value (see hone bench --help)");
      const std::string& v = args[++i];
      if (k == "--output-dir") a.output_dir = v;
      else if (k == "--layers") a.layers = int(parse_int(k, v));
      else if (k == "--micro-batch-tokens") a.micro_batch_tokens = parse_int(k, v);
      else if (k == "--sequences") a.sequences = int(parse_int(k, v));
      else if (k == "--seq-len") a.seq_len = int(parse_int(k, v));
      else a.reps = int(parse_int(k, v));
    } else if (k.size() > 5 && k.substr(k.size() - 5) == ".toml") {
      read_deck(k, a);
    } else {
      a.shape = k;
    }
  }
  return a;
}


}  // namespace hone
