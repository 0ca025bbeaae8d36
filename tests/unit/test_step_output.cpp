// The output file (io/step_output.*): metrics, NaN back-fill, nested groups, units, samples, attributes,
// the overwrite refusal, resume truncation, an unwritable folder, the stdout line, and reading by h5py.
#include <boost/test/unit_test.hpp>

#include <cmath>
#include <filesystem>
#include <fstream>

#include "common/paths.h"
#include "config/config.h"
#include "io/atomic_file.h"
#include "io/output_metrics.h"
#include "io/step_output.h"
#include "io/step_output_line.h"
#include "runtime/error.h"
#include "runtime/version.h"
#include "unit/test_step_output_util.h"

namespace fs = std::filesystem;

namespace {

hone::StepOutputOptions options(const std::string& dir) {
  hone::StepOutputOptions o;
  o.dir = dir;
  o.run_name = "r1";
  o.deck_toml = "[run]\nname = \"r1\"\nmax_steps = 5  # ünïcode\n";
  o.num_ranks = 3;
  o.gpus = "2 x Test GPU";
  o.sample_every = 2;
  return o;
}

// Steps 1..n: time/generation = step, kl from step 3 on, reward/mean on every step but 4, samples on even steps.
void write_steps(hone::StepOutput& out, int64_t first, int64_t last) {
  for (int64_t s = first; s <= last; ++s) {
    hone::StepRow row(s);
    row.set("time/generation", static_cast<double>(s));
    row.set("tokens_per_s/training", 100.0 * s);
    if (s >= 3) row.set("kl", 0.5 * s);
    if (s != 4) row.set("reward/mean", 0.25 * s);
    if (out.sample_due(s)) {
      row.add_sample("prompt " + std::to_string(s), "Grüße ∑ " + std::to_string(s), 0.1 * s);
      row.add_sample("second " + std::to_string(s), "", -1.0);
    }
    out.append(row);
  }
}

template <typename F>
std::string user_error_of(F&& f) {
  try {
    f();
  } catch (const hone::UserError& e) {
    return e.what();
  }
  return "<no UserError>";
}

}  // namespace

BOOST_AUTO_TEST_SUITE(step_output)

BOOST_AUTO_TEST_CASE(metrics_round_trip_with_nan_backfill_nested_groups_and_units) {
  const std::string dir = test::temp_dir("out-metrics");
  {
    hone::StepOutput out(options(dir));
    BOOST_TEST(out.path() == dir + "/r1.h5");
    write_steps(out, 1, 5);
  }
  test_h5::File f(dir + "/r1.h5");
  BOOST_TEST_REQUIRE(f.id >= 0);
  BOOST_TEST((test_h5::int64s(f.id, "/steps/step") == std::vector<int64_t>{1, 2, 3, 4, 5}));
  BOOST_TEST(test_h5::object_type(f.id, "/steps/time") == H5I_GROUP);
  BOOST_TEST(test_h5::object_type(f.id, "/steps/time/generation") == H5I_DATASET);
  BOOST_TEST((test_h5::doubles(f.id, "/steps/time/generation") == std::vector<double>{1, 2, 3, 4, 5}));
  BOOST_TEST((test_h5::doubles(f.id, "/steps/tokens_per_s/training") == std::vector<double>{100, 200, 300, 400, 500}));
  auto kl = test_h5::doubles(f.id, "/steps/kl");
  BOOST_TEST_REQUIRE(kl.size() == 5u);
  BOOST_TEST(std::isnan(kl[0]));
  BOOST_TEST(std::isnan(kl[1]));
  BOOST_TEST(kl[2] == 1.5);
  BOOST_TEST(kl[4] == 2.5);
  auto rm = test_h5::doubles(f.id, "/steps/reward/mean");
  BOOST_TEST_REQUIRE(rm.size() == 5u);
  BOOST_TEST(rm[2] == 0.75);
  BOOST_TEST(std::isnan(rm[3]));
  BOOST_TEST(test_h5::string_attr(f.id, "/steps/time/generation", "unit") == "s");
  BOOST_TEST(test_h5::string_attr(f.id, "/steps/tokens_per_s/training", "unit") == "tokens/s");
  BOOST_TEST(test_h5::string_attr(f.id, "/steps/step", "unit") == "step");
  BOOST_TEST(test_h5::string_attr(f.id, "/steps/kl", "description").size() > 10u);
  // Nothing beyond what was written: 4 metrics + step.
  BOOST_TEST(!test_h5::link_exists(f.id, "/steps/loss"));
}

BOOST_AUTO_TEST_CASE(samples_are_appended_on_due_steps) {
  const std::string dir = test::temp_dir("out-samples");
  {
    hone::StepOutput out(options(dir));
    BOOST_TEST(!out.sample_due(3));
    BOOST_TEST(out.sample_due(4));
    write_steps(out, 1, 5);
  }
  test_h5::File f(dir + "/r1.h5");
  BOOST_TEST_REQUIRE(f.id >= 0);
  BOOST_TEST((test_h5::int64s(f.id, "/samples/step") == std::vector<int64_t>{2, 2, 4, 4}));
  BOOST_TEST((test_h5::strings(f.id, "/samples/prompt") ==
              std::vector<std::string>{"prompt 2", "second 2", "prompt 4", "second 4"}));
  BOOST_TEST((test_h5::strings(f.id, "/samples/completion") ==
              std::vector<std::string>{"Grüße ∑ 2", "", "Grüße ∑ 4", ""}));
  BOOST_TEST((test_h5::doubles(f.id, "/samples/reward") == std::vector<double>{0.2, -1.0, 0.4, -1.0}));
}

BOOST_AUTO_TEST_CASE(root_attributes_hold_deck_version_ranks_gpus_and_start_time) {
  const std::string dir = test::temp_dir("out-attrs");
  auto o = options(dir);
  { hone::StepOutput out(o); }  // the file exists from construction on, with no steps
  test_h5::File f(dir + "/r1.h5");
  BOOST_TEST_REQUIRE(f.id >= 0);
  BOOST_TEST(test_h5::string_attr(f.id, ".", "deck") == o.deck_toml);
  BOOST_TEST(test_h5::string_attr(f.id, ".", "hone_version") == std::string(hone::version()));
  BOOST_TEST(test_h5::string_attr(f.id, ".", "git_commit") == std::string(hone::git_commit()));
  BOOST_TEST(test_h5::string_attr(f.id, ".", "gpus") == "2 x Test GPU");
  BOOST_TEST(test_h5::string_attr(f.id, ".", "run_name") == "r1");
  BOOST_TEST(test_h5::int_attr(f.id, ".", "num_ranks") == 3);
  const std::string t = test_h5::string_attr(f.id, ".", "start_time");
  BOOST_TEST_REQUIRE(t.size() == 20u);  // 2026-11-22T02:30:00Z
  BOOST_TEST(t[4] == '-');
  BOOST_TEST(t[10] == 'T');
  BOOST_TEST(t[19] == 'Z');
  BOOST_TEST(test_h5::length(f.id, "/steps/step") == 0u);
  BOOST_TEST(test_h5::length(f.id, "/samples/prompt") == 0u);
}

BOOST_AUTO_TEST_CASE(existing_file_is_refused_unless_overwrite) {
  const std::string dir = test::temp_dir("out-overwrite");
  {
    hone::StepOutput out(options(dir));
    write_steps(out, 1, 3);
  }
  const std::string msg = user_error_of([&] { hone::StepOutput again(options(dir)); });
  BOOST_TEST(msg.find(dir + "/r1.h5") != std::string::npos, msg);
  BOOST_TEST(msg.find("output.overwrite") != std::string::npos, msg);
  {  // the refused run did not touch the file
    test_h5::File f(dir + "/r1.h5");
    BOOST_TEST_REQUIRE(f.id >= 0);
    BOOST_TEST(test_h5::length(f.id, "/steps/step") == 3u);
  }
  auto o = options(dir);
  o.overwrite = true;
  hone::StepOutput replaced(o);
  BOOST_TEST(replaced.steps().empty());
  test_h5::File f(dir + "/r1.h5");
  BOOST_TEST_REQUIRE(f.id >= 0);
  BOOST_TEST(test_h5::length(f.id, "/steps/step") == 0u);
  BOOST_TEST(!test_h5::link_exists(f.id, "/steps/kl"));
}

BOOST_AUTO_TEST_CASE(resume_drops_rows_after_the_checkpoint_and_never_duplicates) {
  const std::string dir = test::temp_dir("out-resume");
  std::string start;
  {
    hone::StepOutput out(options(dir));
    write_steps(out, 1, 6);
    start = out.start_time();
  }
  auto o = options(dir);
  o.resume_step = 4;
  {
    hone::StepOutput out(o);
    BOOST_TEST((out.steps() == std::vector<int64_t>{1, 2, 3, 4}));
    BOOST_TEST(out.metric("time/generation").size() == 4u);
    BOOST_TEST(out.samples().size() == 4u);  // steps 2 and 4, two each
    {
      test_h5::File f(dir + "/r1.h5");  // rewritten already, truncated
      BOOST_TEST_REQUIRE(f.id >= 0);
      BOOST_TEST((test_h5::int64s(f.id, "/steps/step") == std::vector<int64_t>{1, 2, 3, 4}));
    }
    write_steps(out, 5, 7);
  }
  test_h5::File f(dir + "/r1.h5");
  BOOST_TEST_REQUIRE(f.id >= 0);
  BOOST_TEST((test_h5::int64s(f.id, "/steps/step") == std::vector<int64_t>{1, 2, 3, 4, 5, 6, 7}));
  BOOST_TEST((test_h5::doubles(f.id, "/steps/time/generation") == std::vector<double>{1, 2, 3, 4, 5, 6, 7}));
  auto kl = test_h5::doubles(f.id, "/steps/kl");
  BOOST_TEST_REQUIRE(kl.size() == 7u);
  BOOST_TEST(std::isnan(kl[0]));  // the back-fill survives the reload
  BOOST_TEST(kl[6] == 3.5);
  BOOST_TEST((test_h5::int64s(f.id, "/samples/step") == std::vector<int64_t>{2, 2, 4, 4, 6, 6}));
  BOOST_TEST(test_h5::string_attr(f.id, "/steps/kl", "unit") == "nats");
  BOOST_TEST(test_h5::string_attr(f.id, ".", "start_time") == start);
  BOOST_TEST(test_h5::string_attr(f.id, ".", "resume_history").find("step 4 at ") == 0u);
}

// Resume once accepted any file: a deleted one started over at the step after the checkpoint, an older copy or
// another run's mixed rows (1, 5, 6 or 1, 2, 5, 6). Now its rows up to the checkpoint's step must be 1..N, and a
// missing file is refused unless the run goes on in another output.dir (said in the resume history).
BOOST_AUTO_TEST_CASE(resume_checks_the_file_against_the_checkpoint_step) {
  const std::string dir = test::temp_dir("out-resume-check");
  {
    hone::StepOutput out(options(dir));
    write_steps(out, 1, 2);
  }
  auto o = options(dir);
  o.resume_step = 4;
  std::string msg = user_error_of([&] { hone::StepOutput out(o); });
  BOOST_TEST(msg.find("cannot resume at step 4: the output file '" + dir + "/r1.h5' holds 2 steps (1..2) up to the "
                      "checkpoint's step, not steps 1..4") != std::string::npos, msg);
  {
    test_h5::File f(dir + "/r1.h5");  // untouched
    BOOST_TEST((test_h5::int64s(f.id, "/steps/step") == std::vector<int64_t>{1, 2}));
  }
  fs::remove(dir + "/r1.h5");
  msg = user_error_of([&] { hone::StepOutput out(o); });
  BOOST_TEST(msg.find("cannot resume at step 4: the output file '" + dir + "/r1.h5' is missing") != std::string::npos, msg);
  o.new_output_dir = true;
  o.resume_note = "changed output.dir 'a' -> 'b'";
  {
    hone::StepOutput out(o);
    write_steps(out, 5, 5);
  }
  test_h5::File f(dir + "/r1.h5");
  BOOST_TEST((test_h5::int64s(f.id, "/steps/step") == std::vector<int64_t>{5}));
  BOOST_TEST(test_h5::string_attr(f.id, ".", "resume_history").find("a new output.dir; steps 1..4 are in the file of "
                                                                     "the earlier one") != std::string::npos);
}

// /validation: its own step column, units from the validation catalog, resume keeps the validations up to the
// checkpoint's step (none without a checkpoint), steps must increase.
BOOST_AUTO_TEST_CASE(validation_table_round_trips_and_resumes) {
  const std::string dir = test::temp_dir("out-validation");
  auto validation = [](int64_t step, double acc) {
    hone::StepRow row(step);
    row.set("accuracy", acc);
    row.set("time/validation", 0.5);
    return row;
  };
  {
    hone::StepOutput out(options(dir));
    BOOST_TEST(out.validation_steps().empty());
    {
      test_h5::File f(dir + "/r1.h5");  // the group exists before any validation
      BOOST_TEST(test_h5::int64s(f.id, "/validation/step").empty());
    }
    out.append_validation(validation(0, 0.0));
    write_steps(out, 1, 4);
    out.append_validation(validation(2, 0.25));
    out.append_validation(validation(4, 0.5));
    BOOST_CHECK_THROW(out.append_validation(validation(4, 0.5)), hone::Error);
    hone::StepRow bad(5);
    bad.set("kl", 1.0);  // a step metric, not a validation one
    BOOST_CHECK_THROW(out.append_validation(bad), hone::Error);
  }
  {
    test_h5::File f(dir + "/r1.h5");
    BOOST_TEST((test_h5::int64s(f.id, "/validation/step") == std::vector<int64_t>{0, 2, 4}));
    BOOST_TEST((test_h5::doubles(f.id, "/validation/accuracy") == std::vector<double>{0.0, 0.25, 0.5}));
    BOOST_TEST(test_h5::string_attr(f.id, "/validation/time/validation", "unit") == "s");
    BOOST_TEST(test_h5::string_attr(f.id, "/validation/accuracy", "unit") == "1");
    BOOST_TEST((test_h5::int64s(f.id, "/steps/step") == std::vector<int64_t>{1, 2, 3, 4}));
  }
  auto o = options(dir);
  o.resume_step = 2;
  {
    hone::StepOutput out(o);
    BOOST_TEST((out.validation_steps() == std::vector<int64_t>{0, 2}));
    BOOST_TEST((out.validation_metric("accuracy") == std::vector<double>{0.0, 0.25}));
    out.append_validation(validation(3, 0.75));
  }
  o.resume_step = 0;  // resumed without a checkpoint: everything is done again, the start's validation too
  {
    hone::StepOutput out(o);
    BOOST_TEST(out.validation_steps().empty());
    BOOST_TEST(out.steps().empty());
  }
}

BOOST_AUTO_TEST_CASE(resume_of_a_file_that_is_not_hdf5_is_a_user_error) {
  const std::string dir = test::temp_dir("out-resume-bad");
  std::ofstream(dir + "/r1.h5") << "not an HDF5 file";
  auto o = options(dir);
  o.resume_step = 2;
  const std::string msg = user_error_of([&] { hone::StepOutput out(o); });
  BOOST_TEST(msg.find("r1.h5") != std::string::npos, msg);
  BOOST_TEST(msg.find("cannot resume") != std::string::npos, msg);
}

BOOST_AUTO_TEST_CASE(unwritable_output_dir_is_a_user_error_naming_output_dir) {
  const std::string dir = test::temp_dir("out-unwritable");
  std::ofstream(dir + "/plainfile") << "x";
  auto o = options(dir + "/plainfile/sub");
  const std::string msg = user_error_of([&] { hone::StepOutput out(o); });
  BOOST_TEST(msg.find("output.dir") != std::string::npos, msg);
  BOOST_TEST(msg.find("plainfile/sub") != std::string::npos, msg);
}

// The rollouts folder is where hone deletes step files: a symbolic link there (out/r1.rollouts -> /victim) is
// refused before anything is written or deleted, on a fresh run and on resume.
BOOST_AUTO_TEST_CASE(a_rollouts_folder_that_is_a_symlink_is_refused) {
  const std::string dir = test::temp_dir("out-rollouts-link");
  const std::string victim = test::temp_dir("out-rollouts-victim");
  std::ofstream(victim + "/step_00000099.h5") << "not hone's";
  fs::create_directory_symlink(victim, dir + "/r1.rollouts");
  for (int64_t resume : {-1, 0}) {
    auto o = options(dir);
    o.resume_step = resume;
    const std::string msg = user_error_of([&] { hone::StepOutput out(o); });
    BOOST_TEST(msg.find("r1.rollouts is a symbolic link") != std::string::npos, msg);
    BOOST_TEST(fs::exists(victim + "/step_00000099.h5"));
  }
}

BOOST_AUTO_TEST_CASE(no_temporary_files_are_left_and_stale_ones_are_removed) {
  const std::string dir = test::temp_dir("out-tmp");
  std::ofstream(dir + "/r1.h5.tmp-999999") << "left by a killed run";
  hone::StepOutput out(options(dir));
  write_steps(out, 1, 2);
  std::vector<std::string> names;
  for (const auto& e : fs::directory_iterator(dir)) names.push_back(e.path().filename().string());
  BOOST_TEST((names == std::vector<std::string>{"r1.h5"}));
}

BOOST_AUTO_TEST_CASE(programmer_errors_are_hone_errors) {
  const std::string dir = test::temp_dir("out-errors");
  hone::StepOutput out(options(dir));
  hone::StepRow unknown(1);
  unknown.set("no_such_metric", 1.0);
  BOOST_CHECK_THROW(out.append(unknown), hone::Error);
  out.declare_metric("my/metric", "widgets", "a metric declared by the caller");
  hone::StepRow ok(1);
  ok.set("my/metric", 2.0);
  out.append(ok);
  BOOST_TEST(out.metric("my/metric") == std::vector<double>{2.0});
  hone::StepRow same(1);  // steps must increase
  BOOST_CHECK_THROW(out.append(same), hone::Error);
  out.declare_metric("my", "1", "would be a dataset where the group my/ is");
  hone::StepRow clash(2);
  clash.set("my", 1.0);
  BOOST_CHECK_THROW(out.append(clash), hone::Error);
  hone::StepRow bad(3);
  BOOST_CHECK_THROW(bad.set("a//b", 1.0), hone::Error);
  BOOST_CHECK_THROW(bad.set("step", 1.0), hone::Error);
}

BOOST_AUTO_TEST_CASE(stdout_line_has_one_column_per_header_title) {
  hone::StepRow row(12);
  row.set("time/generation", 1.5);
  row.set("time/total", 2.25);
  row.set("reward/mean", 0.4375);
  row.set("kl", 0.00123);
  row.set("tokens_per_s/generation", 2120.54);
  const std::string header = hone::step_line_header();
  const std::string line = hone::format_step_line(row);
  BOOST_TEST(header.size() == line.size(), "\n" << header << "\n" << line);
  BOOST_TEST(header.find("step") != std::string::npos);
  BOOST_TEST(header.find("total_s") != std::string::npos);
  BOOST_TEST(line.find("      12") == 0u, line);
  BOOST_TEST(line.find("1.500") != std::string::npos, line);
  BOOST_TEST(line.find("2.250") != std::string::npos, line);
  BOOST_TEST(line.find("0.4375") != std::string::npos, line);
  BOOST_TEST(line.find("1.230e-03") != std::string::npos, line);
  BOOST_TEST(line.find("2120.5") != std::string::npos, line);
  BOOST_TEST(line.find(" -") != std::string::npos, line);  // refit time was not set
}

BOOST_AUTO_TEST_CASE(options_from_config_read_the_deck_keys) {
  hone::Config c = hone::load_config(test::source_dir() + "/input/demo.toml",
                                     {"run.name=deckrun", "output.dir=somewhere", "output.overwrite=true",
                                      "output.sample_every=7"});
  auto o = hone::StepOutputOptions::from_config(c, 12, 4, "none");
  BOOST_TEST(o.dir == "somewhere");
  BOOST_TEST(o.run_name == "deckrun");
  BOOST_TEST(o.overwrite);
  BOOST_TEST(o.sample_every == 7);
  BOOST_TEST(o.resume_step == 12);
  BOOST_TEST(o.num_ranks == 4);
  BOOST_TEST(o.deck_toml == c.to_toml());
}

static boost::test_tools::assertion_result h5py_available(boost::unit_test::test_unit_id) {
  boost::test_tools::assertion_result r(test::run_command("/usr/bin/python3 -c 'import h5py'") == 0);
  if (!r) r.message() << "skipped: /usr/bin/python3 cannot import h5py (Debian package python3-h5py)";
  return r;
}

BOOST_AUTO_TEST_CASE(h5py_reads_the_file, *boost::unit_test::precondition(h5py_available)) {
  const std::string dir = test::temp_dir("out-h5py");
  auto o = options(dir);
  {
    hone::StepOutput out(o);
    write_steps(out, 1, 4);
  }
  const std::string script = dir + "/read.py";
  std::ofstream(script) << "import math, sys, h5py\n"
                           "f = h5py.File(sys.argv[1], 'r')\n"
                           "assert list(f['steps/step'][:]) == [1, 2, 3, 4]\n"
                           "assert list(f['steps/time/generation'][:]) == [1.0, 2.0, 3.0, 4.0]\n"
                           "assert f['steps']['time']['generation'].attrs['unit'] == 's'\n"
                           "kl = f['steps/kl'][:]\n"
                           "assert math.isnan(kl[0]) and kl[3] == 2.0\n"
                           "assert f.attrs['deck'] == open(sys.argv[2], encoding='utf-8').read()\n"
                           "assert int(f.attrs['num_ranks']) == 3\n"
                           "assert list(f['samples/completion'].asstr()[:]) == ['Grüße ∑ 2', '', 'Grüße ∑ 4', '']\n"
                           "print('h5py ok')\n";
  std::ofstream(dir + "/deck.toml", std::ios::binary) << o.deck_toml;
  std::string out;
  const int rc = test::run_command("/usr/bin/python3 " + script + " " + dir + "/r1.h5 " + dir + "/deck.toml", &out);
  BOOST_TEST(rc == 0, out);
  BOOST_TEST(out.find("h5py ok") != std::string::npos, out);
}

BOOST_AUTO_TEST_SUITE_END()

BOOST_AUTO_TEST_SUITE(step_output_doc)

// doc/output.md lists every metric of the catalog with its unit.
BOOST_AUTO_TEST_CASE(doc_table_lists_every_catalog_metric_with_its_unit) {
  const std::string doc = hone::read_file_text(test::source_dir() + "/doc/output.md");
  for (const auto& m : hone::metric_catalog()) {
    const std::string row = "| `" + m.name + "` | " + m.unit + " |";
    BOOST_TEST(doc.find(row) != std::string::npos, "doc/output.md lacks the row " << row);
  }
  BOOST_TEST(hone::metric_catalog().size() == 41u);
  for (const auto& m : hone::validation_metric_catalog()) {
    const std::string row = "| `" + m.name + "` | " + m.unit + " | " + m.description + " |";
    BOOST_TEST(doc.find(row) != std::string::npos, "doc/output.md lacks the row " << row);
  }
}

BOOST_AUTO_TEST_SUITE_END()
