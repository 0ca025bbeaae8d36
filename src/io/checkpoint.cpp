// Checkpoint folders: atomic creation, the COMPLETE marker, keep-N, and finding the newest complete one
// (see checkpoint.h and doc/output.md).
#include "io/checkpoint.h"

#include <unistd.h>

#include <algorithm>
#include <cinttypes>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>

#include "config/config.h"
#include "io/atomic_file.h"
#include "io/step_output.h"
#include "runtime/error.h"
#include "runtime/log.h"

namespace fs = std::filesystem;
using json = nlohmann::json;

namespace hone {

namespace {

constexpr const char* kFormat = "hone-checkpoint 1";
constexpr const char* kMarker = "COMPLETE";

// The step of a final folder name "step_<digits>", or -1.
int64_t parse_folder_step(const std::string& name) {
  if (name.size() <= 5 || name.compare(0, 5, "step_") != 0 || name.size() > 5 + 18) return -1;
  int64_t v = 0;
  for (size_t i = 5; i < name.size(); ++i) {
    if (name[i] < '0' || name[i] > '9') return -1;
    v = v * 10 + (name[i] - '0');
  }
  return v;
}

bool is_work_folder(const std::string& name) {  // ".step_<N>.tmp-<pid>" or ".step_<N>.del-<pid>"
  return name.rfind(".step_", 0) == 0 &&
         (name.find(".tmp-") != std::string::npos || name.find(".del-") != std::string::npos);
}

// Makes a folder vanish atomically (rename to a hidden name), then deletes it: a kill mid-delete never leaves a
// half-deleted folder under a step_ name.
void remove_folder(const fs::path& dir, const fs::path& folder) {
  std::error_code ec;
  fs::path doomed = folder;
  const std::string name = folder.filename().string();
  if (!is_work_folder(name)) {
    doomed = dir / cat(".", name, ".del-", ::getpid());
    fs::remove_all(doomed, ec);
    fs::rename(folder, doomed, ec);
    if (ec) doomed = folder;
    else fsync_dir(dir.string());
  }
  fs::remove_all(doomed, ec);
  if (ec) throw UserError(cat("cannot delete '", doomed.string(), "': ", ec.message()));
}

// Parses the marker of a folder and checks its files' sizes (and hashes when asked). Returns "" when complete.
std::string check_folder(const fs::path& folder, bool check_hashes, CheckpointInfo* info) {
  const int64_t name_step = parse_folder_step(folder.filename().string());
  if (name_step < 0) return "the folder name is not step_<N>";
  const fs::path marker = folder / kMarker;
  std::error_code ec;
  if (!fs::is_regular_file(marker, ec)) return "no COMPLETE marker";
  json m;
  try {
    m = json::parse(read_file_text(marker.string()));
    if (!m.is_object() || m.value("format", "") != kFormat) return "the COMPLETE marker has an unknown format";
    if (m.at("step").get<int64_t>() != name_step) return "the COMPLETE marker names another step";
    for (const auto& f : m.at("files")) {
      const std::string rel = f.at("path").get<std::string>();
      const uint64_t bytes = f.at("bytes").get<uint64_t>();
      const fs::path p = folder / rel;
      if (!fs::is_regular_file(p, ec)) return cat("file '", rel, "' is missing");
      if (fs::file_size(p, ec) != bytes || ec) return cat("file '", rel, "' does not have its recorded size");
      if (check_hashes && f.contains("fnv1a64") && fnv1a64_file(p.string()) != f.at("fnv1a64").get<std::string>())
        return cat("file '", rel, "' does not have its recorded hash");
    }
    if (info) {
      info->path = folder.string();
      info->step = name_step;
      info->run_name = m.at("run_name").get<std::string>();
    }
  } catch (const std::exception& e) {
    return cat("the COMPLETE marker cannot be read: ", e.what());
  }
  return "";
}

void check_dir_usable(const std::string& dir) {
  std::error_code ec;
  fs::create_directories(dir, ec);
  if (ec || !fs::is_directory(dir))
    throw UserError(cat("checkpoint.dir '", dir, "': cannot create the folder",
                        ec ? cat(": ", ec.message()) : std::string(" (a file of that name is in the way)")));
}

// Removes temporary folders and step_ folders that are not complete (both only ever come from interrupted saves).
void clean_incomplete(const fs::path& dir) {
  std::error_code ec;
  std::vector<fs::path> doomed;
  for (const auto& e : fs::directory_iterator(dir, ec)) {
    if (!e.is_directory(ec)) continue;
    const std::string name = e.path().filename().string();
    if (is_work_folder(name) || (parse_folder_step(name) >= 0 && !check_folder(e.path(), false, nullptr).empty()))
      doomed.push_back(e.path());
  }
  for (const auto& p : doomed) remove_folder(dir, p);
}

// Fsyncs every file and folder below root and lists the files (relative paths, sorted) for the marker.
json seal_files(const fs::path& root, uint64_t hash_limit) {
  json files = json::array();
  std::vector<fs::path> dirs{root};
  std::vector<std::pair<std::string, fs::path>> found;
  for (auto it = fs::recursive_directory_iterator(root); it != fs::recursive_directory_iterator(); ++it) {
    const auto st = it->symlink_status().type();
    if (st == fs::file_type::directory) {
      dirs.push_back(it->path());
    } else {
      HONE_CHECK(st == fs::file_type::regular, "checkpoint payload wrote '", it->path().string(),
                 "', which is not a regular file or folder");
      found.emplace_back(fs::relative(it->path(), root).generic_string(), it->path());
    }
  }
  std::sort(found.begin(), found.end());
  for (const auto& [rel, p] : found) {
    HONE_CHECK(rel != kMarker, "checkpoint payload must not write a file named ", kMarker);
    fsync_path(p.string());
    const uint64_t bytes = fs::file_size(p);
    json f = {{"path", rel}, {"bytes", bytes}};
    if (bytes <= hash_limit) f["fnv1a64"] = fnv1a64_file(p.string());
    files.push_back(f);
  }
  for (const auto& d : dirs) fsync_dir(d.string());
  return files;
}

}  // namespace

CheckpointOptions CheckpointOptions::from_config(const Config& c) {
  CheckpointOptions o;
  o.dir = c.get_string("checkpoint.dir");
  o.run_name = c.get_string("run.name");
  o.keep = c.get_int("checkpoint.keep");
  return o;
}

std::string checkpoint_folder_name(int64_t step) {
  HONE_CHECK(step >= 0, "negative checkpoint step ", step);
  char buf[40];
  std::snprintf(buf, sizeof buf, "step_%08" PRId64, step);
  return buf;
}

std::string fnv1a64_file(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) throw UserError(cat("cannot read '", path, "'"));
  uint64_t h = 14695981039346656037ull;
  std::vector<char> buf(1 << 20);
  while (in) {
    in.read(buf.data(), static_cast<std::streamsize>(buf.size()));
    const std::streamsize n = in.gcount();
    for (std::streamsize i = 0; i < n; ++i) {
      h ^= static_cast<unsigned char>(buf[static_cast<size_t>(i)]);
      h *= 1099511628211ull;
    }
  }
  char hex[20];
  std::snprintf(hex, sizeof hex, "%016" PRIx64, h);
  return hex;
}

std::string verify_checkpoint(const std::string& folder, bool check_hashes) {
  return check_folder(fs::path(folder), check_hashes, nullptr);
}

std::vector<CheckpointInfo> complete_checkpoints(const std::string& dir) {
  std::vector<CheckpointInfo> out;
  std::error_code ec;
  for (const auto& e : fs::directory_iterator(dir, ec)) {
    if (!e.is_directory(ec) || parse_folder_step(e.path().filename().string()) < 0) continue;
    CheckpointInfo info;
    if (check_folder(e.path(), false, &info).empty()) out.push_back(info);
  }
  std::sort(out.begin(), out.end(), [](const auto& a, const auto& b) { return a.step < b.step; });
  return out;
}

std::optional<CheckpointInfo> latest_complete_checkpoint(const std::string& dir) {
  auto all = complete_checkpoints(dir);
  if (all.empty()) return std::nullopt;
  return all.back();
}

std::optional<CheckpointInfo> prepare_checkpoint_dir(const CheckpointOptions& opt, CheckpointStart start) {
  check_dir_usable(opt.dir);
  const auto all = complete_checkpoints(opt.dir);
  switch (start) {
    case CheckpointStart::resume: {
      // Every step_ folder, newest first, checked in full (sizes and the hashes of COMPLETE: a bit flip, an edited
      // state.json); a damaged one is named loudly and the next older is tried.
      std::vector<std::pair<int64_t, fs::path>> folders;
      std::error_code ec;
      for (const auto& e : fs::directory_iterator(opt.dir, ec))
        if (e.is_directory(ec) && parse_folder_step(e.path().filename().string()) >= 0)
          folders.emplace_back(parse_folder_step(e.path().filename().string()), e.path());
      std::sort(folders.begin(), folders.end(), [](const auto& a, const auto& b) { return a.first > b.first; });
      std::optional<CheckpointInfo> chosen;
      std::string damaged;
      for (const auto& [step, folder] : folders) {
        CheckpointInfo info;
        const std::string why = check_folder(folder, /*check_hashes=*/true, &info);
        if (why.empty()) {
          chosen = info;
          break;
        }
        log_warn("checkpoint ", folder.string(), " is damaged (", why, "): it is not resumed from",
                 folders.size() > 1 ? "; trying an older checkpoint" : "");
        damaged += cat(damaged.empty() ? "" : "; ", folder.filename().string(), ": ", why);
      }
      HONE_USER_CHECK(chosen || damaged.empty(), "cannot resume: no checkpoint in checkpoint.dir '", opt.dir,
                      "' is whole (", damaged, "); move the damaged ones away to start afresh");
      if (!chosen) return std::nullopt;
      const CheckpointInfo& last = *chosen;
      HONE_USER_CHECK(last.run_name == opt.run_name, "cannot resume: the newest checkpoint in checkpoint.dir '",
                      opt.dir, "' (", fs::path(last.path).filename().string(), ") belongs to run '", last.run_name,
                      "', not to run.name '", opt.run_name, "'; set run.name=", last.run_name,
                      " to continue that run, or choose another checkpoint.dir");
      return last;
    }
    case CheckpointStart::fresh:
      HONE_USER_CHECK(all.empty(), "checkpoint.dir '", opt.dir, "' already holds checkpoints (run '",
                      all.empty() ? "" : all.back().run_name, "', newest step ", all.empty() ? 0 : all.back().step,
                      "): set run.resume=auto to continue from them, checkpoint.overwrite=true to delete them, ",
                      "or choose another checkpoint.dir");
      return std::nullopt;
    case CheckpointStart::overwrite:
      if (!all.empty())
        log_info("checkpoint.overwrite = true: deleting ", all.size(), " checkpoint", all.size() == 1 ? "" : "s",
                 " in checkpoint.dir '", opt.dir, "' (run '", all.back().run_name, "', steps ", all.front().step,
                 all.size() > 1 ? cat("-", all.back().step) : std::string(), ")");
      for (const auto& c : all) remove_folder(opt.dir, c.path);
      clean_incomplete(opt.dir);
      return std::nullopt;
  }
  return std::nullopt;
}

std::string begin_checkpoint(const CheckpointOptions& opt, int64_t step) {
  HONE_CHECK(opt.keep >= 1, "checkpoint.keep must be at least 1");
  check_dir_usable(opt.dir);
  const fs::path dir(opt.dir);
  clean_incomplete(dir);
  // prepare_checkpoint_dir enforces one run per folder at the start; checked again here because keep-N would
  // otherwise delete another run's checkpoints (two runs started on the same checkpoint.dir).
  for (const auto& c : complete_checkpoints(opt.dir))
    HONE_USER_CHECK(c.run_name == opt.run_name, "checkpoint.dir '", opt.dir, "' holds a checkpoint of run '",
                    c.run_name, "' (", fs::path(c.path).filename().string(), "), not of run.name '", opt.run_name,
                    "': two runs must not share a checkpoint.dir");
  const fs::path tmp = dir / cat(".", checkpoint_folder_name(step), ".tmp-", ::getpid());
  std::error_code ec;
  fs::remove_all(tmp, ec);
  fs::create_directory(tmp, ec);
  if (ec) throw UserError(cat("checkpoint.dir '", opt.dir, "': cannot create '", tmp.string(), "': ", ec.message()));
  return tmp.string();
}

void abandon_checkpoint(const std::string& temp_folder) {
  std::error_code ec;
  fs::remove_all(temp_folder, ec);  // best effort; the next save removes what is left
}

CheckpointInfo finish_checkpoint(const CheckpointOptions& opt, int64_t step, const std::string& temp_folder) {
  const fs::path dir(opt.dir), tmp(temp_folder);
  const fs::path final_path = dir / checkpoint_folder_name(step);
  json marker = {{"format", kFormat},
                 {"run_name", opt.run_name},
                 {"step", step},
                 {"time", iso8601_utc_now()},
                 {"files", seal_files(tmp, opt.hash_limit_bytes)}};
  write_file_durable((tmp / kMarker).string(), marker.dump(1) + "\n");
  fsync_dir(tmp.string());
  if (fs::exists(final_path)) remove_folder(dir, final_path);
  rename_durable(tmp.string(), final_path.string());

  // The new checkpoint is complete: only now may older ones go.
  auto all = complete_checkpoints(opt.dir);
  const size_t keep = static_cast<size_t>(opt.keep);
  if (all.size() > keep)
    for (size_t i = 0; i + keep < all.size(); ++i) remove_folder(dir, all[i].path);

  CheckpointInfo info;
  info.path = final_path.string();
  info.step = step;
  info.run_name = opt.run_name;
  return info;
}

CheckpointInfo save_checkpoint(const CheckpointOptions& opt, int64_t step, const CheckpointPayload& payload) {
  const std::string tmp = begin_checkpoint(opt, step);
  try {
    payload(tmp);
    return finish_checkpoint(opt, step, tmp);
  } catch (...) {
    abandon_checkpoint(tmp);
    throw;
  }
}

}  // namespace hone
