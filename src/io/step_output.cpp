// The run's output file (see step_output.h and doc/output.md).
#include "io/step_output.h"

#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <ctime>
#include <filesystem>
#include <limits>

#include "config/config.h"
#include "io/atomic_file.h"
#include "io/output_hdf5.h"
#include "io/output_metrics.h"
#include "io/rollout_file.h"
#include "runtime/error.h"
#include "runtime/version.h"

namespace fs = std::filesystem;

namespace hone {

namespace {

constexpr const char* kFormat = "hone-output 1";
const double kNaN = std::numeric_limits<double>::quiet_NaN();

// Whether one metric name is a '/'-prefix of the other ("time" and "time/generation"): HDF5 cannot hold both, one
// would be a dataset and a group at once.
bool nests(const std::string& a, const std::string& b) {
  const std::string& s = a.size() < b.size() ? a : b;
  const std::string& l = a.size() < b.size() ? b : a;
  return l.size() > s.size() && l.compare(0, s.size(), s) == 0 && l[s.size()] == '/';
}

}  // namespace

std::string iso8601_utc_now() {
  std::time_t t = std::time(nullptr);
  std::tm tm{};
  gmtime_r(&t, &tm);
  char buf[32];
  std::strftime(buf, sizeof buf, "%Y-%m-%dT%H:%M:%SZ", &tm);
  return buf;
}

void StepRow::set(const std::string& metric, double value) {
  HONE_CHECK(valid_metric_name(metric), "invalid metric name '", metric, "'");
  HONE_CHECK(metric != "step", "'step' is the step number, not a metric");
  values_[metric] = value;
}

std::optional<double> StepRow::get(const std::string& metric) const {
  auto it = values_.find(metric);
  if (it == values_.end()) return std::nullopt;
  return it->second;
}

void StepRow::add_sample(std::string prompt, std::string completion, double reward) {
  samples_.push_back({step_, std::move(prompt), std::move(completion), reward});
}

StepOutputOptions StepOutputOptions::from_config(const Config& c, int64_t resume_step, int64_t num_ranks,
                                                 const std::string& gpus) {
  StepOutputOptions o;
  o.dir = c.get_string("output.dir");
  o.run_name = c.get_string("run.name");
  o.overwrite = c.get_bool("output.overwrite");
  o.sample_every = c.get_int("output.sample_every");
  o.deck_toml = c.to_toml();
  o.resume_step = resume_step;
  o.num_ranks = num_ranks;
  o.gpus = gpus;
  return o;
}

StepOutput::StepOutput(StepOutputOptions options) : opt_(std::move(options)) {
  HONE_CHECK(!opt_.run_name.empty(), "empty run name");
  path_ = (fs::path(opt_.dir) / (opt_.run_name + ".h5")).string();
  check_output_dir();
  start_time_ = iso8601_utc_now();

  // Temporary files of earlier runs that were killed mid-write: never a complete file, only clutter.
  const std::string tmp_prefix = opt_.run_name + ".h5.tmp-";
  std::error_code ec;
  for (const auto& e : fs::directory_iterator(opt_.dir, ec))
    if (e.path().filename().string().rfind(tmp_prefix, 0) == 0) fs::remove(e.path(), ec);

  const bool exists = fs::exists(path_);
  if (opt_.resume_step >= 0) {
    if (exists) {
      load_for_resume();
    } else if (opt_.resume_step > 0) {
      HONE_USER_CHECK(opt_.new_output_dir, "cannot resume at step ", opt_.resume_step, ": the output file '", path_,
                      "' is missing (deleted or moved?), so steps 1..", opt_.resume_step,
                      " would be absent from it: restore it, or set output.dir to another folder to go on in a new "
                      "file from step ", opt_.resume_step + 1);
      resume_history_ = cat("step ", opt_.resume_step, " at ", iso8601_utc_now(), ": a new output.dir; steps 1..",
                            opt_.resume_step, " are in the file of the earlier one",
                            opt_.resume_note.empty() ? std::string() : "; " + opt_.resume_note, "\n");
    }
  } else if (exists && !opt_.overwrite) {
    throw UserError(cat("the output file '", path_, "' already exists: set output.overwrite=true to replace it, ",
                        "run.resume=auto to continue its run from the newest checkpoint, or choose another ",
                        "output.dir or run.name"));
  }
  remove_rollout_files(opt_.resume_step >= 0 ? opt_.resume_step : -1);
  write_file();
}

void StepOutput::check_output_dir() const {
  std::error_code ec;
  fs::create_directories(opt_.dir, ec);
  if (ec || !fs::is_directory(opt_.dir))
    throw UserError(cat("output.dir '", opt_.dir, "': cannot create the folder",
                        ec ? cat(": ", ec.message()) : std::string(" (a file of that name is in the way)")));
  // Root may write anywhere whatever the permissions say: try a real file rather than access(W_OK).
  const std::string probe = (fs::path(opt_.dir) / cat(".", opt_.run_name, ".h5.probe-", ::getpid())).string();
  int fd = ::open(probe.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (fd < 0) throw UserError(cat("output.dir '", opt_.dir, "' is not writable: ", std::strerror(errno)));
  ::close(fd);
  ::unlink(probe.c_str());
}

void StepOutput::declare_metric(const std::string& name, const std::string& unit, const std::string& description) {
  HONE_CHECK(valid_metric_name(name) && name != "step", "invalid metric name '", name, "'");
  declared_[name] = {unit, description};
  auto it = steps_.metrics.find(name);
  if (it != steps_.metrics.end()) {
    it->second.unit = unit;
    it->second.description = description;
  }
}

bool StepOutput::sample_due(int64_t step) const { return opt_.sample_every > 0 && step % opt_.sample_every == 0; }

std::vector<std::string> StepOutput::metric_names() const {
  std::vector<std::string> names;
  for (const auto& [name, s] : steps_.metrics) names.push_back(name);
  return names;
}

const std::vector<double>& StepOutput::metric(const std::string& name) const {
  auto it = steps_.metrics.find(name);
  HONE_CHECK(it != steps_.metrics.end(), "no metric '", name, "' in the output");
  return it->second.values;
}

const std::vector<double>& StepOutput::validation_metric(const std::string& name) const {
  auto it = validation_.metrics.find(name);
  HONE_CHECK(it != validation_.metrics.end(), "no validation metric '", name, "' in the output");
  return it->second.values;
}

void StepOutput::add_metric(Table& t, const std::string& name) {
  for (const auto& [other, s] : t.metrics)
    HONE_CHECK(!nests(name, other), "metric '", name, "' and metric '", other,
               "' cannot both exist: one would be a group holding the other");
  Series s;
  const bool steps = &t == &steps_;
  if (auto d = declared_.find(name); steps && d != declared_.end()) {
    s.unit = d->second.first;
    s.description = d->second.second;
  } else if (const MetricInfo* info = steps ? find_metric_info(name) : find_validation_metric_info(name)) {
    s.unit = info->unit;
    s.description = info->description;
  } else {
    HONE_CHECK(false, "metric '", name, "' of /", t.group, " has no unit: add it to the catalog in ",
               "src/io/output_metrics.cpp (and doc/output.md)", steps ? " or declare it with StepOutput::declare_metric" : "");
  }
  s.values.assign(t.steps.size(), kNaN);
  t.metrics.emplace(name, std::move(s));
}

void StepOutput::append_row(Table& t, const StepRow& row) {
  for (const auto& [name, v] : row.values())
    if (!t.metrics.count(name)) add_metric(t, name);
  t.steps.push_back(row.step());
  for (auto& [name, s] : t.metrics) {
    auto v = row.get(name);
    s.values.push_back(v ? *v : kNaN);
  }
}

// hone writes and deletes step files in the rollouts folder: through a symbolic link that would be another folder
// (`out/demo.rollouts -> /victim` once wrote there and deleted /victim/step_00000099.h5).
void StepOutput::check_rollout_folder() const {
  const fs::path folder = fs::path(opt_.dir) / rollout_folder_name(opt_.run_name);
  std::error_code ec;
  HONE_USER_CHECK(!fs::is_symlink(fs::symlink_status(folder, ec)), "output.dir: ", folder.string(),
                  " is a symbolic link; hone writes and deletes the rollout files of this run there, so it must be a "
                  "folder of its own: remove the link, or choose another output.dir or run.name");
}

void StepOutput::remove_rollout_files(int64_t after) const {
  const fs::path folder = fs::path(opt_.dir) / rollout_folder_name(opt_.run_name);
  check_rollout_folder();
  std::error_code ec;
  if (!fs::is_directory(folder, ec)) return;
  for (const auto& e : fs::directory_iterator(folder, ec)) {
    const std::string name = e.path().filename().string();
    long long step = -1;
    char tail = 0;
    // step_<N>.h5, and the temporary siblings of one whose write was cut short
    if (std::sscanf(name.c_str(), "step_%lld.h%c", &step, &tail) != 2 || tail != '5') continue;
    if (step > after || name.find(".tmp-") != std::string::npos) fs::remove(e.path(), ec);
  }
}

void StepOutput::append(const StepRow& row) {
  HONE_CHECK(row.step() > last_step(), "step ", row.step(), " does not follow step ", last_step());
  if (const auto& r = row.rollouts()) {
    const fs::path folder = fs::path(opt_.dir) / rollout_folder_name(opt_.run_name);
    check_rollout_folder();
    std::error_code ec;
    fs::create_directories(folder, ec);
    HONE_USER_CHECK(!ec, "output.dir: cannot create ", folder.string(), ": ", ec.message());
    try {
      write_rollout_file((folder / rollout_file_name(row.step())).string(), opt_.run_name, *r);
    } catch (const Error& e) {
      throw UserError(cat("cannot write the rollouts of step ", row.step(), " in ", folder.string(), ": ", e.what()));
    }
  }
  append_row(steps_, row);
  for (const auto& smp : row.samples()) samples_.push_back(smp);
  if (row.rollouts()) rollout_steps_.push_back(row.step());
  write_file();
}

void StepOutput::append_validation(const StepRow& row) {
  HONE_CHECK(row.step() >= 0, "validation at step ", row.step());
  HONE_CHECK(validation_.steps.empty() || row.step() > validation_.steps.back(), "validation at step ", row.step(),
             " does not follow the one at step ", validation_.steps.back());
  append_row(validation_, row);
  write_file();
}

// The rows of group t.group with a step <= keep_through (all of them when the group is missing: none).
void StepOutput::load_table(hid_t f, Table& t, int64_t keep_through) {
  const std::string step_path = t.group + "/step";
  if (!h5out::exists(f, step_path)) return;
  h5out::Handle g(H5Gopen2(f, t.group.c_str(), H5P_DEFAULT), H5Gclose, "H5Gopen2");
  std::vector<int64_t> all_steps = h5out::read_int64s(g, "step");
  size_t keep = 0;  // rows with step <= keep_through; the steps are increasing
  while (keep < all_steps.size() && all_steps[keep] <= keep_through) {
    HONE_USER_CHECK(keep == 0 || all_steps[keep] > all_steps[keep - 1], "cannot resume: the steps of /", t.group,
                    " in '", path_, "' are not increasing");
    ++keep;
  }
  t.steps.assign(all_steps.begin(), all_steps.begin() + static_cast<std::ptrdiff_t>(keep));
  for (const auto& name : h5out::list_datasets(g)) {
    if (name == "step") continue;
    h5out::Handle d(H5Dopen2(g, name.c_str(), H5P_DEFAULT), H5Dclose, "H5Dopen2");
    Series s;
    s.unit = h5out::get_string_attr(d, "unit").value_or("");
    s.description = h5out::get_string_attr(d, "description").value_or("");
    s.values = h5out::read_doubles(g, name);
    HONE_USER_CHECK(s.values.size() == all_steps.size(), "cannot resume: /", t.group, "/", name, " in '", path_,
                    "' has ", s.values.size(), " elements but /", t.group, "/step has ", all_steps.size());
    s.values.resize(keep);
    t.metrics.emplace(name, std::move(s));
  }
}

void StepOutput::load_for_resume() {
  auto file = h5out::open_file_readonly(path_);
  HONE_USER_CHECK(file, "cannot resume: the output file '", path_, "' is not a readable HDF5 file; move it away ",
                  "(a new one is started) or choose another output.dir");
  try {
    hid_t f = *file;
    if (auto t = h5out::get_string_attr(f, "start_time")) start_time_ = *t;
    if (auto r = h5out::get_string_attr(f, "resume_history")) resume_history_ = *r;
    HONE_USER_CHECK(h5out::exists(f, "steps/step"), "cannot resume: '", path_, "' has no /steps/step dataset");
    load_table(f, steps_, opt_.resume_step);
    // The rows up to the checkpoint's step must be this run's 1..N: an older copy of the file, or another run's,
    // would mix rows (1, 5, 6 or 1, 2, 5, 6).
    const auto& st = steps_.steps;
    const int64_t n = opt_.resume_step;
    HONE_USER_CHECK(int64_t(st.size()) == std::max<int64_t>(n, 0) && (st.empty() || (st.front() == 1 && st.back() == n)),
                    "cannot resume at step ", n, ": the output file '", path_, "' holds ",
                    st.empty() ? std::string("no step") : cat(st.size(), " steps (", st.front(), "..", st.back(), ")"),
                    " up to the checkpoint's step, not steps 1..", n,
                    " (an older copy of the file, or another run's?): restore the file this run wrote, or set "
                    "output.dir to another folder to go on in a new file");
    // A validation runs after its step and before that step's checkpoint, so the checkpoint's step keeps its
    // validation; without a checkpoint (resume_step 0) a validation at the start is run again.
    load_table(f, validation_, opt_.resume_step > 0 ? opt_.resume_step : -1);
    if (h5out::exists(f, "samples/step")) {
      h5out::Handle g(H5Gopen2(f, "samples", H5P_DEFAULT), H5Gclose, "H5Gopen2(samples)");
      auto st = h5out::read_int64s(g, "step");
      auto pr = h5out::read_strings(g, "prompt");
      auto co = h5out::read_strings(g, "completion");
      auto re = h5out::read_doubles(g, "reward");
      HONE_USER_CHECK(pr.size() == st.size() && co.size() == st.size() && re.size() == st.size(),
                      "cannot resume: the /samples datasets in '", path_, "' differ in length");
      for (size_t i = 0; i < st.size(); ++i)
        if (st[i] <= opt_.resume_step) samples_.push_back({st[i], pr[i], co[i], re[i]});
    }
    if (h5out::exists(f, "rollouts")) {
      h5out::Handle g(H5Gopen2(f, "rollouts", H5P_DEFAULT), H5Gclose, "H5Gopen2(rollouts)");
      for (const std::string& name : h5out::list_links(g)) {
        long long step = -1;
        if (std::sscanf(name.c_str(), "step_%lld", &step) == 1 && step <= opt_.resume_step)
          rollout_steps_.push_back(step);
      }
      std::sort(rollout_steps_.begin(), rollout_steps_.end());
    }
  } catch (const Error& e) {
    throw UserError(cat("cannot resume from the output file '", path_, "': ", e.what()));
  }
  resume_history_ += cat("step ", opt_.resume_step, " at ", iso8601_utc_now(),
                         opt_.resume_note.empty() ? std::string() : ": " + opt_.resume_note, "\n");
}

void StepOutput::write_file() const {
  try {
    // Built in memory and written by write_file_atomic: a full disk is its one-line error, and no HDF5 file is
    // left open behind it.
    h5out::Handle f = h5out::create_memory_file();
    write_contents(f);
    write_file_atomic(path_, h5out::file_image(f));
  } catch (const Error& e) {
    throw UserError(cat("cannot write the output file '", path_, "': ", e.what()));
  }
}

void StepOutput::write_contents(hid_t f) const {
  h5out::set_attr(f, "format", std::string(kFormat));
  h5out::set_attr(f, "run_name", opt_.run_name);
  h5out::set_attr(f, "deck", opt_.deck_toml);
  h5out::set_attr(f, "hone_version", std::string(version()));
  h5out::set_attr(f, "git_commit", std::string(git_commit()));
  h5out::set_attr(f, "num_ranks", opt_.num_ranks);
  h5out::set_attr(f, "gpus", opt_.gpus);
  h5out::set_attr(f, "start_time", start_time_);
  h5out::set_attr(f, "resume_history", resume_history_);
  h5out::set_attr(f, "last_write_time", iso8601_utc_now());

  for (const Table* t : {&steps_, &validation_}) {
    h5out::Handle g = h5out::create_group(f, t->group);
    {
      h5out::Handle d = h5out::write_int64s(g, "step", t->steps);
      h5out::set_attr(d, "unit", std::string("step"));
      h5out::set_attr(d, "description", std::string(t == &steps_ ? "GRPO step number of each row"
                                                                   : "steps trained before each validation (0: before the first)"));
    }
    for (const auto& [name, s] : t->metrics) {
      h5out::Handle d = h5out::write_doubles(g, name, s.values);
      h5out::set_attr(d, "unit", s.unit);
      h5out::set_attr(d, "description", s.description);
    }
  }

  h5out::Handle samples = h5out::create_group(f, "samples");
  std::vector<int64_t> st;
  std::vector<std::string> pr, co;
  std::vector<double> re;
  for (const auto& s : samples_) {
    st.push_back(s.step);
    pr.push_back(s.prompt);
    co.push_back(s.completion);
    re.push_back(s.reward);
  }
  h5out::Handle d1 = h5out::write_int64s(samples, "step", st);
  h5out::Handle d2 = h5out::write_strings(samples, "prompt", pr);
  h5out::Handle d3 = h5out::write_strings(samples, "completion", co);
  h5out::Handle d4 = h5out::write_doubles(samples, "reward", re);
  h5out::set_attr(d1, "unit", std::string("step"));
  h5out::set_attr(d4, "unit", std::string("1"));

  // Every rollout of a step: an external link to the step's own file, by a path relative to this file's folder
  // (where HDF5 looks first), so the pair can be moved together.
  if (!rollout_steps_.empty()) {
    h5out::Handle g = h5out::create_group(f, "rollouts");
    const std::string folder = rollout_folder_name(opt_.run_name);
    for (int64_t step : rollout_steps_) {
      const std::string file = rollout_file_name(step);
      const std::string target = folder + "/" + file;
      h5out::check(H5Lcreate_external(target.c_str(), "/", g, file.substr(0, file.size() - 3).c_str(), H5P_DEFAULT,
                                      H5P_DEFAULT),
                   "H5Lcreate_external");
    }
  }
}

}  // namespace hone
