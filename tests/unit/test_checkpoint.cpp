// Checkpoint folders (io/checkpoint.*): the marker, which folder latest_complete_checkpoint picks among complete,
// partial, marker-less and corrupt ones, keep-N, clean-up of temporary folders, the run-name rule.
#include <boost/test/unit_test.hpp>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>

#include "common/paths.h"
#include "config/config.h"
#include "io/atomic_file.h"
#include "io/checkpoint.h"
#include "runtime/error.h"

namespace fs = std::filesystem;

namespace {

hone::CheckpointOptions options(const std::string& dir, int64_t keep = 5) {
  hone::CheckpointOptions o;
  o.dir = dir;
  o.run_name = "runA";
  o.keep = keep;
  return o;
}

void payload(const std::string& folder, int64_t step) {
  std::ofstream(folder + "/state.json") << "{\"step\": " << step << "}\n";
  fs::create_directories(folder + "/model");
  std::ofstream(folder + "/model/weights.bin", std::ios::binary) << std::string(1000 + step, 'w');
}

hone::CheckpointInfo save(const hone::CheckpointOptions& o, int64_t step) {
  return hone::save_checkpoint(o, step, [&](const std::string& f) { payload(f, step); });
}

std::vector<std::string> entries(const std::string& dir) {
  std::vector<std::string> names;
  for (const auto& e : fs::directory_iterator(dir)) names.push_back(e.path().filename().string());
  std::sort(names.begin(), names.end());
  return names;
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

BOOST_AUTO_TEST_SUITE(checkpoint)

BOOST_AUTO_TEST_CASE(save_writes_files_and_a_marker_listing_them) {
  const std::string dir = test::temp_dir("ckpt-save");
  BOOST_TEST(!hone::latest_complete_checkpoint(dir).has_value());
  auto info = save(options(dir), 7);
  BOOST_TEST(info.path == dir + "/step_00000007");
  BOOST_TEST(info.step == 7);
  BOOST_TEST((entries(dir) == std::vector<std::string>{"step_00000007"}));
  BOOST_TEST((entries(info.path) == std::vector<std::string>{"COMPLETE", "model", "state.json"}));
  auto m = nlohmann::json::parse(hone::read_file_text(info.path + "/COMPLETE"));
  BOOST_TEST(m["step"].get<int64_t>() == 7);
  BOOST_TEST(m["run_name"].get<std::string>() == "runA");
  BOOST_TEST_REQUIRE(m["files"].size() == 2u);
  BOOST_TEST(m["files"][0]["path"].get<std::string>() == "model/weights.bin");
  BOOST_TEST(m["files"][0]["bytes"].get<uint64_t>() == 1007u);
  BOOST_TEST(m["files"][0]["fnv1a64"].get<std::string>() == hone::fnv1a64_file(info.path + "/model/weights.bin"));
  BOOST_TEST(hone::verify_checkpoint(info.path, true) == "");
  auto latest = hone::latest_complete_checkpoint(dir);
  BOOST_TEST_REQUIRE(latest.has_value());
  BOOST_TEST(latest->step == 7);
  BOOST_TEST(latest->run_name == "runA");
}

BOOST_AUTO_TEST_CASE(fnv1a64_matches_the_published_test_vectors) {
  const std::string dir = test::temp_dir("ckpt-fnv");
  std::ofstream(dir + "/empty");
  std::ofstream(dir + "/a") << "a";
  std::ofstream(dir + "/foobar") << "foobar";
  BOOST_TEST(hone::fnv1a64_file(dir + "/empty") == "cbf29ce484222325");
  BOOST_TEST(hone::fnv1a64_file(dir + "/a") == "af63dc4c8601ec8c");
  BOOST_TEST(hone::fnv1a64_file(dir + "/foobar") == "85944171f73967e8");
}

BOOST_AUTO_TEST_CASE(latest_ignores_partial_markerless_corrupt_and_temporary_folders) {
  const std::string dir = test::temp_dir("ckpt-latest");
  auto o = options(dir);
  for (int64_t s : {5, 7, 8, 10, 11}) save(o, s);
  // step 7 made partial: a listed file lost its tail.
  fs::resize_file(dir + "/step_00000007/model/weights.bin", 10);
  // step 8: a corrupt marker.
  std::ofstream(dir + "/step_00000008/COMPLETE") << "{\"format\": \"hone-checkpoint 1\", \"step\": ";
  // step 9: no marker at all.
  fs::create_directories(dir + "/step_00000009");
  std::ofstream(dir + "/step_00000009/state.json") << "{}";
  // step 10: the temporary folder of an interrupted save (complete inside, never renamed).
  fs::rename(dir + "/step_00000010", dir + "/.step_00000010.tmp-12345");
  // step 11: a marker that names another step than its folder.
  fs::rename(dir + "/step_00000011", dir + "/step_00000012");

  BOOST_TEST(hone::verify_checkpoint(dir + "/step_00000007", false).find("size") != std::string::npos);
  BOOST_TEST(hone::verify_checkpoint(dir + "/step_00000008", false).find("cannot be read") != std::string::npos);
  BOOST_TEST(hone::verify_checkpoint(dir + "/step_00000009", false) == "no COMPLETE marker");
  BOOST_TEST(hone::verify_checkpoint(dir + "/step_00000012", false).find("another step") != std::string::npos);
  auto latest = hone::latest_complete_checkpoint(dir);
  BOOST_TEST_REQUIRE(latest.has_value());
  BOOST_TEST(latest->step == 5);

  // The next save removes every incomplete folder and keeps the complete one.
  save(o, 13);
  BOOST_TEST((entries(dir) == std::vector<std::string>{"step_00000005", "step_00000013"}));
  BOOST_TEST(hone::latest_complete_checkpoint(dir)->step == 13);
}

BOOST_AUTO_TEST_CASE(hash_check_finds_a_changed_byte_that_sizes_miss) {
  const std::string dir = test::temp_dir("ckpt-hash");
  auto info = save(options(dir), 3);
  {
    std::fstream f(info.path + "/model/weights.bin", std::ios::in | std::ios::out | std::ios::binary);
    f.seekp(100);
    f.put('x');
  }
  BOOST_TEST(hone::verify_checkpoint(info.path, false) == "");
  BOOST_TEST(hone::verify_checkpoint(info.path, true).find("hash") != std::string::npos);
}

BOOST_AUTO_TEST_CASE(keep_n_newest_complete_checkpoints) {
  const std::string dir = test::temp_dir("ckpt-keep");
  auto o = options(dir, 2);
  for (int64_t s = 1; s <= 5; ++s) save(o, s * 10);
  BOOST_TEST((entries(dir) == std::vector<std::string>{"step_00000040", "step_00000050"}));
  auto all = hone::complete_checkpoints(dir);
  BOOST_TEST_REQUIRE(all.size() == 2u);
  BOOST_TEST(all[0].step == 40);
  BOOST_TEST(all[1].step == 50);
}

BOOST_AUTO_TEST_CASE(saving_a_step_again_replaces_it) {
  const std::string dir = test::temp_dir("ckpt-again");
  auto o = options(dir);
  save(o, 4);
  hone::save_checkpoint(o, 4, [](const std::string& f) { std::ofstream(f + "/other.txt") << "second"; });
  BOOST_TEST((entries(dir + "/step_00000004") == std::vector<std::string>{"COMPLETE", "other.txt"}));
  BOOST_TEST(hone::verify_checkpoint(dir + "/step_00000004", true) == "");
}

BOOST_AUTO_TEST_CASE(failed_payload_leaves_previous_checkpoints_and_no_folder) {
  const std::string dir = test::temp_dir("ckpt-fail");
  auto o = options(dir);
  save(o, 1);
  BOOST_CHECK_THROW(hone::save_checkpoint(o, 2,
                                          [](const std::string& f) {
                                            std::ofstream(f + "/half") << "x";
                                            throw hone::UserError("disk full");
                                          }),
                    hone::UserError);
  BOOST_CHECK_THROW(hone::save_checkpoint(o, 3, [](const std::string& f) { std::ofstream(f + "/COMPLETE") << "{}"; }),
                    hone::Error);
  BOOST_TEST((entries(dir) == std::vector<std::string>{"step_00000001"}));
  BOOST_TEST(hone::latest_complete_checkpoint(dir)->step == 1);
}

BOOST_AUTO_TEST_CASE(begin_and_finish_for_files_written_by_several_ranks) {
  const std::string dir = test::temp_dir("ckpt-split");
  auto o = options(dir);
  const std::string tmp = hone::begin_checkpoint(o, 3);
  BOOST_TEST(fs::path(tmp).filename().string().rfind(".step_00000003.tmp-", 0) == 0u, tmp);
  BOOST_TEST(!hone::latest_complete_checkpoint(dir).has_value());  // nothing visible before finish
  hone::write_file_durable(tmp + "/shard_0.bin", "rank zero");
  hone::write_file_durable(tmp + "/shard_1.bin", "rank one");
  auto info = hone::finish_checkpoint(o, 3, tmp);
  BOOST_TEST(!fs::exists(tmp));
  BOOST_TEST((entries(info.path) == std::vector<std::string>{"COMPLETE", "shard_0.bin", "shard_1.bin"}));
  BOOST_TEST(hone::verify_checkpoint(info.path, true) == "");
  const std::string tmp2 = hone::begin_checkpoint(o, 4);
  hone::abandon_checkpoint(tmp2);
  BOOST_TEST((entries(dir) == std::vector<std::string>{"step_00000003"}));
}

BOOST_AUTO_TEST_CASE(start_rules_for_fresh_resume_and_overwrite) {
  const std::string dir = test::temp_dir("ckpt-rules");
  auto o = options(dir);
  BOOST_TEST(!hone::prepare_checkpoint_dir(o, hone::CheckpointStart::fresh).has_value());
  BOOST_TEST(!hone::prepare_checkpoint_dir(o, hone::CheckpointStart::resume).has_value());
  save(o, 2);
  save(o, 4);

  std::string msg = user_error_of([&] { hone::prepare_checkpoint_dir(o, hone::CheckpointStart::fresh); });
  BOOST_TEST(msg.find("checkpoint.dir '" + dir + "'") != std::string::npos, msg);
  BOOST_TEST(msg.find("run.resume=auto") != std::string::npos, msg);
  BOOST_TEST(msg.find("checkpoint.overwrite=true") != std::string::npos, msg);

  auto r = hone::prepare_checkpoint_dir(o, hone::CheckpointStart::resume);
  BOOST_TEST_REQUIRE(r.has_value());
  BOOST_TEST(r->step == 4);

  auto other = o;
  other.run_name = "runB";
  msg = user_error_of([&] { hone::prepare_checkpoint_dir(other, hone::CheckpointStart::resume); });
  BOOST_TEST(msg.find("runA") != std::string::npos, msg);
  BOOST_TEST(msg.find("run.name") != std::string::npos, msg);

  msg = user_error_of([&] { save(other, 6); });  // saving next to another run's checkpoints
  BOOST_TEST(msg.find("two runs") != std::string::npos, msg);
  BOOST_TEST(hone::latest_complete_checkpoint(dir)->step == 4);

  BOOST_TEST(!hone::prepare_checkpoint_dir(other, hone::CheckpointStart::overwrite).has_value());
  BOOST_TEST(entries(dir).empty());

  std::ofstream(dir + "/afile") << "x";
  auto blocked = o;
  blocked.dir = dir + "/afile/sub";
  msg = user_error_of([&] { hone::prepare_checkpoint_dir(blocked, hone::CheckpointStart::fresh); });
  BOOST_TEST(msg.find("checkpoint.dir") != std::string::npos, msg);
}

// Resume once trusted the newest folder whose files had their recorded sizes: a same-size bit flip in the weights, a
// state.json edited to another step were loaded, and a damaged newest checkpoint fell back without a word. Now every
// hash of COMPLETE is checked, a damaged checkpoint is named (a warning) and the next older one is tried; when none
// is whole, resume is refused.
BOOST_AUTO_TEST_CASE(resume_checks_the_hashes_and_falls_back_past_damaged_checkpoints) {
  const std::string dir = test::temp_dir("ckpt-damaged");
  auto o = options(dir);
  save(o, 2);
  save(o, 4);
  save(o, 6);
  {  // a bit flip, same size
    std::fstream f(dir + "/step_00000006/model/weights.bin", std::ios::in | std::ios::out | std::ios::binary);
    f.seekp(100);
    f.put('x');
  }
  BOOST_TEST(hone::latest_complete_checkpoint(dir)->step == 6);  // by sizes alone it looks whole
  auto r = hone::prepare_checkpoint_dir(o, hone::CheckpointStart::resume);
  BOOST_TEST_REQUIRE(r.has_value());
  BOOST_TEST(r->step == 4);
  fs::remove(dir + "/step_00000004/COMPLETE");
  r = hone::prepare_checkpoint_dir(o, hone::CheckpointStart::resume);
  BOOST_TEST_REQUIRE(r.has_value());
  BOOST_TEST(r->step == 2);
  std::ofstream(dir + "/step_00000002/state.json") << "{\"step\": 9}\n";  // edited, same size
  const std::string msg = user_error_of([&] { hone::prepare_checkpoint_dir(o, hone::CheckpointStart::resume); });
  BOOST_TEST(msg.find("cannot resume: no checkpoint in checkpoint.dir") != std::string::npos, msg);
  BOOST_TEST(msg.find("step_00000006: file 'model/weights.bin' does not have its recorded hash") != std::string::npos, msg);
  BOOST_TEST(msg.find("step_00000004: no COMPLETE marker") != std::string::npos, msg);
  BOOST_TEST(msg.find("step_00000002: file 'state.json' does not have its recorded hash") != std::string::npos, msg);
}

BOOST_AUTO_TEST_CASE(options_from_config_read_the_deck_keys) {
  hone::Config c = hone::load_config(test::source_dir() + "/input/demo.toml",
                                     {"run.name=deckrun", "checkpoint.dir=ck", "checkpoint.keep=3"});
  auto o = hone::CheckpointOptions::from_config(c);
  BOOST_TEST(o.dir == "ck");
  BOOST_TEST(o.run_name == "deckrun");
  BOOST_TEST(o.keep == 3);
}

BOOST_AUTO_TEST_CASE(atomic_file_replaces_content_and_leaves_no_temporary) {
  const std::string dir = test::temp_dir("atomic-file");
  hone::write_file_atomic(dir + "/a.txt", "first");
  hone::write_file_atomic(dir + "/a.txt", "second");
  BOOST_TEST(hone::read_file_text(dir + "/a.txt") == "second");
  BOOST_CHECK_THROW(hone::write_file_atomic_with(dir + "/a.txt",
                                                 [](const std::string& tmp) {
                                                   std::ofstream(tmp) << "half";
                                                   throw hone::UserError("writer failed");
                                                 }),
                    hone::UserError);
  BOOST_TEST(hone::read_file_text(dir + "/a.txt") == "second");
  BOOST_TEST((entries(dir) == std::vector<std::string>{"a.txt"}));
  BOOST_CHECK_THROW(hone::write_file_atomic(dir + "/missing/b.txt", "x"), hone::UserError);
}

BOOST_AUTO_TEST_SUITE_END()
