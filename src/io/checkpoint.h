// Checkpoints: <checkpoint.dir>/step_<NNNNNNNN>/ holding whatever files a payload callback writes (the GRPO loop
// writes the model safetensors + config.json, the optimizer state and state.json with step, RNG state and data
// cursor). A checkpoint is complete, and only then visible under its final name, when:
//   1. the payload wrote its files into the temporary sibling .step_<NNNNNNNN>.tmp-<pid>/,
//   2. every file and folder in it was fsynced,
//   3. the marker COMPLETE (JSON: format, run name, step, time, every file with its size and, for files up to
//      hash_limit_bytes, its FNV-1a 64 hash) was written last and fsynced,
//   4. the folder was renamed to step_<NNNNNNNN> and checkpoint.dir fsynced.
// A kill at any moment leaves the previous checkpoints intact; temporary folders and step_* folders without a
// valid marker are ignored by latest_complete_checkpoint() and removed at the next save. After a new checkpoint is
// complete, all but the newest `keep` complete checkpoints are deleted.
//
// One checkpoint.dir belongs to one run name (recorded in every marker); see prepare_checkpoint_dir for the rule.
#pragma once

#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <vector>

namespace hone {

class Config;

struct CheckpointOptions {
  std::string dir = "checkpoints";  // checkpoint.dir
  std::string run_name = "hone";    // run.name, recorded in the marker
  int64_t keep = 2;                 // checkpoint.keep (>= 1)
  uint64_t hash_limit_bytes = uint64_t(256) << 20;  // larger files are recorded by size only (hashing GBs is slow)

  static CheckpointOptions from_config(const Config& c);
};

struct CheckpointInfo {
  std::string path;      // the step_<NNNNNNNN> folder
  int64_t step = 0;
  std::string run_name;  // as recorded in its marker
};

// "step_00000042".
std::string checkpoint_folder_name(int64_t step);

// How a run starts with respect to checkpoint.dir.
enum class CheckpointStart {
  fresh,      // run.resume=never, checkpoint.overwrite=false: refuse a dir that holds complete checkpoints
  resume,     // run.resume=auto: continue from the newest complete checkpoint, which must be of this run name
  overwrite,  // run.resume=never, checkpoint.overwrite=true: delete the checkpoints in the dir (of any run), saying so
};

// Creates checkpoint.dir (UserError naming checkpoint.dir when that fails) and applies the start rule above
// (UserError naming the dir, the run names and the keys to change). Returns the checkpoint to resume from
// (resume only; nullopt when the dir holds none).
std::optional<CheckpointInfo> prepare_checkpoint_dir(const CheckpointOptions& opt, CheckpointStart start);

// Writes one checkpoint: payload(folder) writes its files (and subfolders) into `folder`; it must not write a file
// named COMPLETE. Returns the finished checkpoint. A checkpoint of the same step that exists already is replaced.
using CheckpointPayload = std::function<void(const std::string& folder)>;
CheckpointInfo save_checkpoint(const CheckpointOptions& opt, int64_t step, const CheckpointPayload& payload);

// save_checkpoint in two halves, for files written by several ranks: rank 0 calls begin_checkpoint (clean-up and
// the empty temporary folder, whose path it broadcasts), every rank writes its files there and fsyncs them itself
// (write_file_durable / fsync_path: on a network file system only the writer's fsync counts), a barrier, then
// rank 0 calls finish_checkpoint (fsync, marker, rename, keep-N). abandon_checkpoint removes the temporary folder
// after a failure (the next save would remove it too).
std::string begin_checkpoint(const CheckpointOptions& opt, int64_t step);
CheckpointInfo finish_checkpoint(const CheckpointOptions& opt, int64_t step, const std::string& temp_folder);
void abandon_checkpoint(const std::string& temp_folder);

// Complete checkpoints in dir (valid marker, every listed file present with its listed size), oldest first.
std::vector<CheckpointInfo> complete_checkpoints(const std::string& dir);
// The newest of them, or nullopt.
std::optional<CheckpointInfo> latest_complete_checkpoint(const std::string& dir);

// Checks one checkpoint folder: "" when complete, else the reason. check_hashes also rereads every hashed file.
std::string verify_checkpoint(const std::string& folder, bool check_hashes);

// FNV-1a 64-bit hash of a file's bytes, as 16 lowercase hex digits (what the marker records).
std::string fnv1a64_file(const std::string& path);

}  // namespace hone
