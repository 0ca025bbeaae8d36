// The trainer's checkpoint payload and its restore (the folder mechanics are io/checkpoint.h's):
//   config.json + model.safetensors   training weights in f32 (a Hugging Face folder; bitwise resume)
//   optimizer.safetensors             AdamW exp_avg and exp_avg_sq, f32
//   state.json                        step, data cursor, seed, optimizer step count (= the LR schedule position)
// The generation copy is restored from the training weights (they are equal after every refit); the reference
// model is rebuilt from its source (model.path or the seeded random init), never checkpointed. Sampling needs no
// RNG state: its counter-based draws are keyed by (seed, step, sample, position).
#include <cstring>
#include <filesystem>
#include <nlohmann/json.hpp>

#include "io/atomic_file.h"
#include "model/safetensors.h"
#include "rl/grpo_trainer.h"
#include "runtime/error.h"

namespace hone::rl {
namespace fs = std::filesystem;
using json = nlohmann::json;

void GrpoTrainer::save(const std::string& folder, int64_t step) const {
  ModelWeights master;
  Tensor m, v;
  engine_->read_state(master, m, v);
  save_model(master, mc_, folder, DType::f32);
  write_safetensors((fs::path(folder) / "optimizer.safetensors").string(),
                    {safetensors_entry("exp_avg", m), safetensors_entry("exp_avg_sq", v)}, {{"format", "hone-adamw"}});
  json st;
  st["format"] = "hone-grpo-state-1";
  st["step"] = step;
  st["data_cursor"] = data_.source->save_cursor();
  st["seed"] = s_.seed;
  st["optimizer_step"] = engine_->optimizer_step_count();
  st["lr_schedule_step"] = engine_->optimizer_step_count();
  write_file_durable((fs::path(folder) / "state.json").string(), st.dump(2) + "\n");
}

int64_t GrpoTrainer::restore(const std::string& folder) {
  const std::string state_path = (fs::path(folder) / "state.json").string();
  json st;
  try {
    st = json::parse(read_file_text(state_path));
  } catch (const json::exception& e) {
    throw UserError(cat(state_path, ": not a hone checkpoint state (", e.what(), ")"));
  }
  HONE_USER_CHECK(st.value("format", "") == "hone-grpo-state-1", state_path, ": unknown checkpoint format");
  const uint64_t seed = st.at("seed").get<uint64_t>();
  HONE_USER_CHECK(seed == s_.seed, "checkpoint ", folder, " was written with run.seed = ", seed,
                  " but the deck says ", s_.seed, ": resume with the same seed");

  ModelWeights master = allocate_weights(mc_);
  load_weights(master, mc_, folder);
  SafetensorsFile opt((fs::path(folder) / "optimizer.safetensors").string());
  const int64_t n = master.flat.numel();
  for (const char* name : {"exp_avg", "exp_avg_sq"})
    HONE_USER_CHECK(opt.info(name).numel() == n, opt.path(), ": ", name, " has ", opt.info(name).numel(),
                    " values but the model has ", n, " parameters");
  Tensor m = Tensor::empty({n}), v = Tensor::empty({n});
  opt.read_f32("exp_avg", m.f32());
  opt.read_f32("exp_avg_sq", v.f32());
  engine_->write_state(master, m.f32(), v.f32(), st.at("optimizer_step").get<int>());
  data_.source->restore_cursor(st.at("data_cursor").get<std::string>());
  return st.at("step").get<int64_t>();
}

}  // namespace hone::rl
