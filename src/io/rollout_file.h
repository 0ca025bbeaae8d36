// Every rollout of one GRPO step (output.rollouts = "all"), in a compressed HDF5 file of its own,
// <output.dir>/<run.name>.rollouts/step_<NNNNNNNN>.h5, which the output file links to as /rollouts/step_<NNNNNNNN>
// (an HDF5 external link: h5py and the HDF5 tools follow it as if the group were in the output file). One file per
// step because the output file is rewritten whole after every step, and all rollouts of a long run would make that
// rewrite grow without bound; a step's file is written once, atomically (temporary sibling, fsync, rename).
//
// In the file, rows in the step's global order (group g's G samples at rows g*G .. g*G+G-1), N rows:
//   group, prompt_id, prompt_tokens, completion_tokens      int64 [N]
//   reward, advantage, generation_logprob_sum               float64 [N]
//   correct, trained, finish_reason                         int8 [N]  (finish_reason: 0 stop, 1 length)
//   scores/<name>                                           float64 [N], NaN where the reward gave no such sub-score
//   prompt, completion, answer                              text: <name>_bytes uint8 [total] (UTF-8, concatenated)
//                                                           and <name>_offsets int64 [N+1]; row i is
//                                                           bytes[offsets[i]:offsets[i+1]]
// Every dataset is chunked and deflate-compressed (numbers byte-shuffled first). Root attributes: format
// ("hone-rollouts 1"), run_name, step, count. Read the attributes of the linked group by opening it first
// (H5Gopen2, as h5py does): HDF5 1.10's H5Aopen_by_name through an external link finds the linking file's own
// root attributes of the same name. tools/hone-rollouts reads them (as JSON lines, or a summary).
#pragma once

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

namespace hone {

struct RolloutRecord {
  int64_t group = 0;      // the prompt's place in the step (global)
  int64_t prompt_id = 0;  // its dataset line, or the synthetic task's example index
  std::string prompt;     // as the model saw it: the chat template applied, decoded
  std::string completion;
  std::string answer;
  double reward = 0;
  bool correct = false;
  double advantage = 0;
  bool trained = true;           // false: masked out (overlong filtering)
  int64_t prompt_tokens = 0;
  int64_t completion_tokens = 0;
  bool truncated = false;        // finish reason: length (true) or stop
  double logprob_sum = 0;        // sum of the generation's logprobs of the completion tokens
  std::vector<std::pair<std::string, double>> scores;  // the reward's named sub-scores
};

struct RolloutTable {
  int64_t step = 0;
  std::vector<RolloutRecord> rows;  // in the step's global order
};

constexpr const char* kRolloutFormat = "hone-rollouts 1";

// "<run_name>.rollouts" and "step_00000012.h5": where a step's file goes, relative to output.dir.
std::string rollout_folder_name(const std::string& run_name);
std::string rollout_file_name(int64_t step);

// Writes the table to `path` atomically. Throws hone::Error naming the HDF5 call on failure.
void write_rollout_file(const std::string& path, const std::string& run_name, const RolloutTable& table);

}  // namespace hone
