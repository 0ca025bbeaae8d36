// The trainer's checkpoint payload and its restore (the folder mechanics are io/checkpoint.h's). The payload is the
// dp-independent state, whatever the optimizer's sharding: a checkpoint restores under any number of ranks.
//   config.json + model.safetensors   training weights in f32 (a Hugging Face folder; bitwise resume)
//   optimizer.safetensors             AdamW exp_avg and exp_avg_sq, f32
//   state.json                        step, data cursor, seed, optimizer step count (= the LR schedule position)
//   hf/                               a ready Hugging Face folder (checkpoint.hf_folder): config.json, weights in
//                                     checkpoint.dtype, generation_config.json, tokenizer files; never read back
// The generation copy is restored from the training weights (they are equal after every refit); the reference
// model is rebuilt from its source (model.path or the seeded random init), never checkpointed. Sampling needs no
// RNG state: its counter-based draws are keyed by (seed, step, sample, position).
#include <cmath>
#include <filesystem>
#include <nlohmann/json.hpp>

#include "io/atomic_file.h"
#include "model/hf_folder.h"
#include "model/safetensors.h"
#include "rl/checkpoint_state.h"
#include "rl/grpo_trainer.h"
#include "runtime/agree.h"
#include "runtime/error.h"

namespace hone::rl {
namespace fs = std::filesystem;
using json = nlohmann::json;

namespace {

// The first of the state's tensors that holds a NaN or an Inf ("" when all are finite): weights by their Hugging
// Face name, the moments by theirs.
std::string first_non_finite(const ModelWeights& master, const Tensor& exp_avg, const Tensor& exp_avg_sq) {
  auto finite = [](const float* p, int64_t n) {
    for (int64_t i = 0; i < n; ++i)
      if (!std::isfinite(p[i])) return false;
    return true;
  };
  for (const auto& [name, t] : master.named_parameters())
    if (!finite(t.f32(), t.numel())) return name;
  if (exp_avg.defined() && !finite(exp_avg.f32(), exp_avg.numel())) return "exp_avg";
  if (exp_avg_sq.defined() && !finite(exp_avg_sq.f32(), exp_avg_sq.numel())) return "exp_avg_sq";
  return "";
}

}  // namespace

GrpoTrainer::Snapshot GrpoTrainer::snapshot() {
  Snapshot snap;
  roles_.learner->read_state(snap.master, snap.exp_avg, snap.exp_avg_sq);
  snap.optimizer_step = roles_.learner->optimizer_step_count();
  return snap;
}

void GrpoTrainer::save(const std::string& folder, int64_t step, const Snapshot& snap) const {
  HONE_CHECK(snap.master.flat.defined(), "a checkpoint is written by data-parallel rank 0, from its snapshot");
  // An update with a finite gradient norm can still overflow the weights (a learning rate past fp32's range): such a
  // state is never written, so resume=auto can never pick it; the run ends and the last good checkpoint stays.
  const std::string bad = first_non_finite(snap.master, snap.exp_avg, snap.exp_avg_sq);
  HONE_USER_CHECK(bad.empty(), "step ", step, ": the training state is not finite (", bad,
                  " holds NaN or Inf after the update): no checkpoint written, the newest complete one is kept; the ",
                  "run diverged: lower train.learning_rate or keep train.max_grad_norm > 0");
  save_model(snap.master, mc_, folder, DType::f32);
  write_safetensors((fs::path(folder) / "optimizer.safetensors").string(),
                    {safetensors_entry("exp_avg", snap.exp_avg), safetensors_entry("exp_avg_sq", snap.exp_avg_sq)},
                    {{"format", "hone-adamw"}});
  json st;
  st["format"] = "hone-grpo-state-1";
  st["step"] = step;
  st["data_cursor"] = task_.prompts->save_cursor();
  st["seed"] = s_.seed;
  st["optimizer_step"] = snap.optimizer_step;
  st["lr_schedule_step"] = snap.optimizer_step;
  write_file_durable((fs::path(folder) / "state.json").string(), st.dump(2) + "\n");
  if (s_.checkpoint_hf_folder) write_hf_folder((fs::path(folder) / "hf").string(), folder, snap);
}

// The whole weights of the snapshot, as the checkpoint's own model.safetensors are written: in bf16 a second copy;
// in f32 the same bytes, so hard links to them (a copy where the file system has no links).
void GrpoTrainer::write_hf_folder(const std::string& hf, const std::string& folder, const Snapshot& snap) const {
  if (s_.checkpoint_bf16) {
    save_model(snap.master, mc_, hf, DType::bf16);
  } else {
    fs::create_directories(hf);
    for (const auto& e : fs::directory_iterator(folder)) {
      const std::string name = e.path().filename().string();
      const bool weights = name.rfind("model", 0) == 0 &&
                           (e.path().extension() == ".safetensors" || name == "model.safetensors.index.json");
      if (!weights && name != "config.json") continue;
      std::error_code ec;
      fs::create_hard_link(e.path(), fs::path(hf) / name, ec);
      if (ec) fs::copy_file(e.path(), fs::path(hf) / name, fs::copy_options::overwrite_existing);
    }
  }
  write_hf_side_files(hf, mc_, model_path_, tokenizer_dir_, tok_->eos_id());
}

// Reading and checking the files is local to each rank (agreed: a bad file ends every rank with one message);
// handing the state to the engine is collective (a sharded optimizer keeps its part, the GPU refits).
int64_t GrpoTrainer::restore(const std::string& folder) {
  Snapshot snap;
  int64_t step = 0;
  agreed([&] {
    const std::string state_path = (fs::path(folder) / "state.json").string();
    const CheckpointState st = parse_checkpoint_state(read_file_text(state_path), state_path);
    const uint64_t seed = st.seed;
    HONE_USER_CHECK(seed == s_.seed, "checkpoint ", folder, " was written with run.seed = ", seed,
                    " but the deck says ", s_.seed, ": resume with the same seed");

    snap.master = allocate_weights(mc_);
    load_weights(snap.master, mc_, folder);
    SafetensorsFile opt((fs::path(folder) / "optimizer.safetensors").string());
    const int64_t n = snap.master.flat.numel();
    for (const char* name : {"exp_avg", "exp_avg_sq"})
      HONE_USER_CHECK(opt.info(name).numel() == n, opt.path(), ": ", name, " has ", opt.info(name).numel(),
                      " values but the model has ", n, " parameters");
    snap.exp_avg = Tensor::empty({n});
    snap.exp_avg_sq = Tensor::empty({n});
    opt.read_f32("exp_avg", snap.exp_avg.f32());
    opt.read_f32("exp_avg_sq", snap.exp_avg_sq.f32());
    snap.optimizer_step = int(st.optimizer_step);
    // hone never writes such a state (save above); one from elsewhere would end the run at its first step.
    const std::string bad = first_non_finite(snap.master, snap.exp_avg, snap.exp_avg_sq);
    HONE_USER_CHECK(bad.empty(), "checkpoint ", folder, " holds a non-finite training state (", bad,
                    " holds NaN or Inf): move it out of ", fs::path(folder).parent_path().string(),
                    " to resume from the one before");
    task_.prompts->restore_cursor(st.data_cursor);
    step = st.step;
  });
  roles_.learner->write_state(snap.master, snap.exp_avg.f32(), snap.exp_avg_sq.f32(), snap.optimizer_step);
  return step;
}

}  // namespace hone::rl
