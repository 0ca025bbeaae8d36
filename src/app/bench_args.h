// What `hone bench` is asked (app/bench_command.cpp): the model shape by name (the published configurations it
// measures, a mixture of experts among them) and the run's sizes, from the command line or a [bench] deck.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "model/model_config.h"
#include "model/recompute.h"

namespace hone {

struct BenchArgs {
  std::string shape = "qwen3-0.6b";
  int64_t micro_batch_tokens = 16384;
  int sequences = 512;
  int seq_len = 640;
  int reps = 10;
  int layers = 0;  // 0: the shape's (a mixture of experts: as many as fit)
  Recompute recompute = Recompute::none;
  bool profile = false;
  std::string output_dir = "out";
};

// The configuration of a named shape (qwen3-0.6b, qwen3-1.7b, llama-3.2-1b, qwen3-30b-a3b); a UserError naming the
// known ones otherwise.
ModelConfig bench_shape(const std::string& name);

// The command's arguments: a shape name or a deck (*.toml, its [bench] table), then --flags.
BenchArgs parse_bench_args(const std::vector<std::string>& args);

}  // namespace hone
