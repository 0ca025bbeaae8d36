// A stand-in for the GRPO loop's recording side, for the kill test (tests/unit/test_step_output_kill.cpp): resumes
// from the newest complete checkpoint in <ckpt_dir> (if any), then writes one output row per step and a checkpoint
// every 2 steps until <max_steps>. The test kills it with SIGKILL at random moments and checks what it left.
//
//   output_kill_writer <out_dir> <ckpt_dir> <max_steps>
//
// Checkpoint contents are a function of the step so that the test can check every byte: state.json {"step": N},
// weights.bin (150000 + (N mod 7) * 10007 bytes, byte i = (N + i) mod 251) and
// optim/moments.bin (4096 bytes, each N mod 256).
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "io/checkpoint.h"
#include "io/output_metrics.h"
#include "io/step_output.h"
#include "runtime/error.h"

namespace {

size_t weights_size(int64_t step) { return 150000 + static_cast<size_t>(step % 7) * 10007; }

void write_bytes(const std::string& path, const std::vector<char>& bytes) {
  std::ofstream out(path, std::ios::binary);
  out.write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
  if (!out) throw hone::UserError("cannot write " + path);
}

void payload(const std::string& folder, int64_t step) {
  std::vector<char> w(weights_size(step));
  for (size_t i = 0; i < w.size(); ++i) w[i] = static_cast<char>((static_cast<uint64_t>(step) + i) % 251);
  write_bytes(folder + "/weights.bin", w);
  std::filesystem::create_directories(folder + "/optim");
  write_bytes(folder + "/optim/moments.bin", std::vector<char>(4096, static_cast<char>(step % 256)));
  std::string state = "{\"step\": " + std::to_string(step) + "}\n";
  write_bytes(folder + "/state.json", std::vector<char>(state.begin(), state.end()));
}

}  // namespace

int main(int argc, char** argv) {
  if (argc != 4) {
    std::fprintf(stderr, "usage: %s <out_dir> <ckpt_dir> <max_steps>\n", argv[0]);
    return 2;
  }
  try {
    hone::CheckpointOptions copt;
    copt.dir = argv[2];
    copt.run_name = "killtest";
    copt.keep = 2;
    const int64_t max_steps = std::atoll(argv[3]);
    auto resume = hone::prepare_checkpoint_dir(copt, hone::CheckpointStart::resume);

    hone::StepOutputOptions o;
    o.dir = argv[1];
    o.run_name = "killtest";
    o.resume_step = resume ? resume->step : 0;  // no checkpoint: start over, dropping every row
    o.sample_every = 3;
    o.deck_toml = "[run]\nname = \"killtest\"\n";
    hone::StepOutput out(o);
    out.declare_metric("test/late", "1", "a metric that first appears at step 5");

    for (int64_t step = o.resume_step + 1; step <= max_steps; ++step) {
      hone::StepRow row(step);
      int k = 0;
      for (const auto& m : hone::metric_catalog()) row.set(m.name, static_cast<double>(step) * 1000.0 + k++);
      if (step >= 5) row.set("test/late", -static_cast<double>(step));
      if (out.sample_due(step)) row.add_sample("prompt " + std::to_string(step), "completion \xc3\xa9", 0.5);
      out.append(row);
      if (step % 2 == 0) hone::save_checkpoint(copt, step, [&](const std::string& f) { payload(f, step); });
    }
  } catch (const std::exception& e) {
    std::fprintf(stderr, "output_kill_writer: %s\n", e.what());
    return 1;
  }
  return 0;
}
