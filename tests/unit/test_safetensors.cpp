// safetensors: round trips of every dtype and odd shapes, conversion on write, sharded checkpoints, ranges of a
// tensor read alone, the incremental writer (the same bytes as the one-call writer), and damaged files, each of
// which must be a UserError naming the file (never a crash).
#include <boost/test/unit_test.hpp>

#include <cstring>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "common/paths.h"
#include "model/safetensors.h"
#include "runtime/error.h"

namespace fs = std::filesystem;
using hone::DType;
using hone::Tensor;

namespace {

Tensor filled(std::vector<int64_t> shape, DType dtype, int salt) {
  Tensor t = Tensor::empty(std::move(shape), dtype);
  auto* b = static_cast<uint8_t*>(t.data());
  for (size_t i = 0; i < t.nbytes(); ++i) b[i] = uint8_t(i * 31 + salt * 7 + 1);
  return t;
}

std::string read_all(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return std::string(std::istreambuf_iterator<char>(in), {});
}

// A file of an 8-byte length, `header`, then `data_bytes` bytes.
std::string raw_file(const std::string& dir, const std::string& name, const std::string& header, size_t data_bytes,
                     uint64_t declared_len = UINT64_MAX) {
  const std::string path = dir + "/" + name;
  std::ofstream out(path, std::ios::binary);
  uint64_t len = declared_len == UINT64_MAX ? header.size() : declared_len;
  for (int i = 0; i < 8; ++i) out.put(char(uint8_t(len >> (8 * i))));
  out << header << std::string(data_bytes, '\x01');
  return path;
}

void expect_bad_file(const std::string& path, const std::string& needle) {
  try {
    hone::SafetensorsFile f(path);
    BOOST_ERROR("no error for " << path);
  } catch (const hone::UserError& e) {
    const std::string msg = e.what();
    BOOST_TEST_INFO(msg);
    BOOST_TEST(msg.find(path) != std::string::npos);
    BOOST_TEST(msg.find(needle) != std::string::npos);
  }
}

}  // namespace

BOOST_AUTO_TEST_SUITE(safetensors)

BOOST_AUTO_TEST_CASE(round_trip_every_dtype_and_odd_shapes) {
  const std::string dir = test::temp_dir("st-roundtrip");
  const std::vector<std::pair<std::string, Tensor>> tensors = {
      {"f32", filled({3, 5}, DType::f32, 1)},         {"bf16", filled({7}, DType::bf16, 2)},
      {"f16", filled({2, 2, 3}, DType::f16, 3)},      {"i32", filled({4}, DType::i32, 4)},
      {"i64", filled({1, 3}, DType::i64, 5)},         {"scalar", filled({}, DType::f32, 6)},
      {"empty", Tensor::zeros({0, 3}, DType::bf16)},  {"after.empty", filled({2}, DType::i64, 7)},
  };
  std::vector<hone::SafetensorsEntry> entries;
  for (const auto& [n, t] : tensors) entries.push_back(hone::safetensors_entry(n, t));
  const std::string path = dir + "/a.safetensors";
  hone::write_safetensors(path, entries);
  for (const auto& e : fs::directory_iterator(dir)) BOOST_TEST(e.path().filename() == "a.safetensors");  // no temp

  const std::string raw = read_all(path);
  uint64_t header_len = 0;
  std::memcpy(&header_len, raw.data(), 8);
  BOOST_TEST((8 + header_len) % 8 == 0);  // data starts aligned, as the format asks
  size_t data_bytes = 0;
  for (const auto& [n, t] : tensors) data_bytes += t.nbytes();
  BOOST_TEST(raw.size() == 8 + header_len + data_bytes);

  hone::SafetensorsFile f(path);
  BOOST_TEST(f.tensors().size() == tensors.size());
  BOOST_TEST(f.metadata().at("format") == "pt");
  for (const auto& [n, t] : tensors) {
    BOOST_TEST_INFO(n);
    Tensor v = f.view(n);
    BOOST_TEST(int(v.dtype()) == int(t.dtype()));
    BOOST_TEST(v.shape() == t.shape());
    BOOST_TEST(v.nbytes() == t.nbytes());
    BOOST_TEST(std::memcmp(v.data(), t.data(), t.nbytes()) == 0);
  }
  BOOST_TEST(f.info("scalar").shape.empty());
  BOOST_TEST(f.info("scalar").numel() == 1);
  BOOST_TEST(f.info("empty").numel() == 0);
  BOOST_TEST(f.find("nope") == nullptr);
  BOOST_CHECK_THROW(f.view("nope"), hone::UserError);
}

BOOST_AUTO_TEST_CASE(f32_stored_as_bf16_and_f16_rounds_to_nearest_even) {
  const std::string dir = test::temp_dir("st-convert");
  Tensor x = Tensor::empty({6}, DType::f32);
  const float vals[6] = {1.0f, 1.00390625f /* 1 + 2^-8: ties to even for bf16 */, -3.14159f, 1e-3f, 65504.f, 0.f};
  std::memcpy(x.f32(), vals, sizeof vals);
  hone::write_safetensors(dir + "/c.safetensors", {{"b", x, DType::bf16}, {"h", x, DType::f16}, {"f", x, DType::f32}});
  hone::SafetensorsFile f(dir + "/c.safetensors");
  BOOST_TEST(f.info("b").dtype_name == "BF16");
  BOOST_TEST(f.info("h").dtype_name == "F16");
  const Tensor b = f.view("b"), h = f.view("h");
  for (int i = 0; i < 6; ++i) {
    BOOST_TEST(b.u16()[i] == hone::f32_to_bf16(vals[i]));
    BOOST_TEST(h.u16()[i] == hone::f32_to_f16(vals[i]));
  }
  BOOST_TEST(b.u16()[1] == 0x3f80);  // 1 + 2^-8 is halfway between 1 and 1 + 2^-7: the even one, 1.0
  float back[6];
  f.read_f32("b", back);
  BOOST_TEST(back[2] == hone::bf16_to_f32(hone::f32_to_bf16(-3.14159f)));
  BOOST_TEST(back[2] != -3.14159f);
  f.read_f32("h", back);
  BOOST_TEST(back[4] == 65504.f);
  f.read_f32("f", back);
  BOOST_TEST(std::memcmp(back, vals, sizeof vals) == 0);
}

BOOST_AUTO_TEST_CASE(sharded_checkpoint_write_and_read) {
  const std::string dir = test::temp_dir("st-sharded");
  std::vector<hone::SafetensorsEntry> entries;
  std::vector<Tensor> ts;
  for (int i = 0; i < 5; ++i) {
    ts.push_back(filled({10, 10}, DType::f32, i));  // 400 bytes each
    entries.push_back(hone::safetensors_entry("t" + std::to_string(i), ts.back()));
  }
  const auto files = hone::write_safetensors_checkpoint(dir, entries, 850);  // two per shard
  BOOST_TEST(files.size() == 4u);
  BOOST_TEST(files[0] == "model-00001-of-00003.safetensors");
  BOOST_TEST(files[2] == "model-00003-of-00003.safetensors");
  BOOST_TEST(files[3] == "model.safetensors.index.json");
  const auto idx = nlohmann::json::parse(read_all(dir + "/model.safetensors.index.json"));
  BOOST_TEST(idx["metadata"]["total_size"].get<int64_t>() == 2000);
  BOOST_TEST(idx["weight_map"]["t0"].get<std::string>() == "model-00001-of-00003.safetensors");
  BOOST_TEST(idx["weight_map"]["t2"].get<std::string>() == "model-00002-of-00003.safetensors");
  BOOST_TEST(idx["weight_map"]["t4"].get<std::string>() == "model-00003-of-00003.safetensors");

  hone::SafetensorsCheckpoint ck(dir);
  BOOST_TEST(ck.sharded());
  BOOST_TEST(ck.files().size() == 3u);
  BOOST_TEST(ck.names().size() == 5u);
  for (int i = 0; i < 5; ++i) {
    Tensor v = ck.view("t" + std::to_string(i));
    BOOST_TEST(std::memcmp(v.data(), ts[size_t(i)].data(), 400) == 0);
  }
  // Everything fits: one file, and the stale index of the sharded save is gone.
  const auto single = hone::write_safetensors_checkpoint(dir, entries, 1 << 20);
  BOOST_TEST(single == std::vector<std::string>{"model.safetensors"});
  BOOST_TEST(!fs::exists(dir + "/model.safetensors.index.json"));
  hone::SafetensorsCheckpoint ck1(dir);
  BOOST_TEST(!ck1.sharded());
  BOOST_TEST(ck1.names().size() == 5u);
}

BOOST_AUTO_TEST_CASE(missing_shard_and_bad_index_are_named) {
  const std::string dir = test::temp_dir("st-missing-shard");
  Tensor a = filled({100}, DType::f32, 1), b = filled({100}, DType::f32, 2);
  hone::write_safetensors_checkpoint(dir, {hone::safetensors_entry("a", a), hone::safetensors_entry("b", b)}, 400);
  fs::remove(dir + "/model-00002-of-00002.safetensors");
  try {
    hone::SafetensorsCheckpoint ck(dir);
    BOOST_ERROR("no error for a missing shard");
  } catch (const hone::UserError& e) {
    BOOST_TEST(std::string(e.what()).find("shard model-00002-of-00002.safetensors is missing") != std::string::npos);
  }
  std::ofstream(dir + "/model.safetensors.index.json") << R"({"weight_map": {"a": "../x.safetensors"}})";
  BOOST_CHECK_THROW(hone::SafetensorsCheckpoint{dir}, hone::UserError);
  std::ofstream(dir + "/model.safetensors.index.json") << R"({"weight_map": {"zz": "model-00001-of-00002.safetensors"}})";
  BOOST_CHECK_EXCEPTION(hone::SafetensorsCheckpoint{dir}, hone::UserError, [](const hone::UserError& e) {
    return std::string(e.what()).find("'zz' is not in its shard") != std::string::npos;
  });
  std::ofstream(dir + "/model.safetensors.index.json") << "{not json";
  BOOST_CHECK_THROW(hone::SafetensorsCheckpoint{dir}, hone::UserError);
  BOOST_CHECK_EXCEPTION(hone::SafetensorsCheckpoint{test::temp_dir("st-nothing")}, hone::UserError,
                        [](const hone::UserError& e) {
                          return std::string(e.what()).find("no model.safetensors") != std::string::npos;
                        });
}

BOOST_AUTO_TEST_CASE(damaged_files_are_user_errors_naming_the_file) {
  const std::string dir = test::temp_dir("st-bad");
  const std::string ok = R"({"a": {"dtype": "F32", "shape": [2], "data_offsets": [0, 8]}})";
  std::ofstream(dir + "/four.st", std::ios::binary) << "abcd";
  expect_bad_file(dir + "/four.st", "shorter than the 8-byte header length");
  std::ofstream(dir + "/zero.st", std::ios::binary).close();
  expect_bad_file(dir + "/zero.st", "shorter than the 8-byte header length");
  expect_bad_file(raw_file(dir, "len.st", ok, 8, 1000), "passes the end of the file");
  expect_bad_file(raw_file(dir, "huge.st", ok, 8, uint64_t(1) << 40), "over the");
  expect_bad_file(raw_file(dir, "json.st", R"({"a": {"dtype": "F32", )", 8), "not valid JSON");
  expect_bad_file(raw_file(dir, "array.st", "[1, 2]", 0), "not a JSON object");
  expect_bad_file(raw_file(dir, "range.st", R"({"a": {"dtype": "F32", "shape": [4], "data_offsets": [0, 16]}})", 8),
                  "pass the end of the data");
  expect_bad_file(raw_file(dir, "trunc.st", ok, 5), "truncated");
  expect_bad_file(raw_file(dir, "overlap.st",
                           R"({"a": {"dtype": "F32", "shape": [2], "data_offsets": [0, 8]},
                               "b": {"dtype": "F32", "shape": [2], "data_offsets": [4, 12]}})",
                           12),
                  "overlap");
  expect_bad_file(raw_file(dir, "dtype.st", R"({"a": {"dtype": "Q4", "shape": [2], "data_offsets": [0, 8]}})", 8),
                  "unknown dtype 'Q4'");
  expect_bad_file(raw_file(dir, "size.st", R"({"a": {"dtype": "F32", "shape": [3], "data_offsets": [0, 8]}})", 8),
                  "needs 12 bytes but data_offsets cover 8");
  expect_bad_file(raw_file(dir, "overflow.st",
                           R"({"a": {"dtype": "F32", "shape": [4294967296, 4294967296, 16], "data_offsets": [0, 8]}})", 8),
                  "needs 2^64 bytes or more");
  expect_bad_file(raw_file(dir, "backwards.st", R"({"a": {"dtype": "F32", "shape": [0], "data_offsets": [8, 0]}})", 8),
                  "run backwards");
  expect_bad_file(raw_file(dir, "negshape.st", R"({"a": {"dtype": "F32", "shape": [-2], "data_offsets": [0, 8]}})", 8),
                  "not a non-negative integer");
  expect_bad_file(raw_file(dir, "nooffsets.st", R"({"a": {"dtype": "F32", "shape": [2]}})", 8), "data_offsets");
  expect_bad_file(raw_file(dir, "meta.st", R"({"__metadata__": {"format": 3}})", 0), "__metadata__");
  // A valid file cut short.
  Tensor t = filled({64}, DType::f32, 3);
  hone::write_safetensors(dir + "/whole.st", {hone::safetensors_entry("t", t)});
  const std::string whole = read_all(dir + "/whole.st");
  std::ofstream(dir + "/cut.st", std::ios::binary) << whole.substr(0, whole.size() - 10);
  expect_bad_file(dir + "/cut.st", "truncated");
  expect_bad_file(dir + "/does-not-exist.st", "cannot open");
}

BOOST_AUTO_TEST_CASE(valid_but_unheld_dtype_is_listed_not_viewed) {
  const std::string dir = test::temp_dir("st-f64");
  const std::string path =
      raw_file(dir, "f64.st", R"({"d": {"dtype": "F64", "shape": [1], "data_offsets": [0, 8]}})", 8);
  hone::SafetensorsFile f(path);
  BOOST_TEST(f.info("d").dtype_name == "F64");
  BOOST_TEST(!f.info("d").supported);
  BOOST_CHECK_THROW(f.view("d"), hone::UserError);
  float x;
  BOOST_CHECK_THROW(f.read_f32("d", &x), hone::UserError);
}


BOOST_AUTO_TEST_CASE(a_range_of_elements_reads_as_the_whole_does) {
  const std::string dir = test::temp_dir("st-range");
  Tensor x = Tensor::empty({5, 7}, DType::f32);
  for (int i = 0; i < 35; ++i) x.f32()[i] = 0.37f * float(i) - 4.f;
  hone::write_safetensors(dir + "/r.safetensors", {{"f", x, DType::f32}, {"b", x, DType::bf16}, {"h", x, DType::f16}});
  hone::SafetensorsFile f(dir + "/r.safetensors");
  for (const char* name : {"f", "b", "h"}) {
    std::vector<float> whole(35), part(35, -1.f);
    f.read_f32(name, whole.data());
    for (auto [begin, count] : {std::pair{0, 35}, {7, 14}, {34, 1}, {3, 0}}) {
      f.read_f32(name, begin, count, part.data());
      BOOST_TEST(std::memcmp(part.data(), whole.data() + begin, size_t(count) * 4) == 0, name << " " << begin);
    }
    BOOST_CHECK_THROW(f.read_f32(name, 30, 6, part.data()), hone::Error);  // passes the end
  }
}

BOOST_AUTO_TEST_CASE(tensors_handed_over_one_at_a_time_write_the_same_files) {
  const std::string a = test::temp_dir("st-stream-a"), b = test::temp_dir("st-stream-b");
  std::vector<Tensor> ts;
  std::vector<hone::SafetensorsEntry> entries;
  std::vector<hone::SafetensorsSlot> slots;
  for (int i = 0; i < 5; ++i) {
    ts.push_back(filled({10, 5 + i}, DType::f32, i));
    entries.push_back({"t" + std::to_string(i), ts.back(), i % 2 ? DType::bf16 : DType::f32});
    slots.push_back({entries.back().name, ts.back().shape(), entries.back().dtype});
  }
  const auto want = hone::write_safetensors_checkpoint(a, entries, 500);
  hone::SafetensorsCheckpointWriter out(b, slots, 500);
  for (const Tensor& t : ts) out.write(t);
  const auto got = out.finish();
  BOOST_TEST(got == want);
  BOOST_TEST(want.size() > 2u);
  for (const auto& n : want) BOOST_TEST(read_all(a + "/" + n) == read_all(b + "/" + n), n);

  // Handed the wrong tensor, or finished early: an Error, and the unfinished file is not left behind.
  const std::string c = test::temp_dir("st-stream-bad");
  {
    hone::SafetensorsCheckpointWriter bad(c, slots, 1 << 20);
    BOOST_CHECK_THROW(bad.write(ts[1]), hone::Error);  // t0's slot is [10, 5]
    bad.write(ts[0]);
    BOOST_CHECK_THROW(bad.finish(), hone::Error);
  }
  BOOST_TEST(fs::is_empty(c));
  hone::SafetensorsFileWriter one(c + "/one.st", {{"x", {2}, DType::f32}});
  BOOST_CHECK_THROW(one.commit(), hone::Error);
  one.write(Tensor::zeros({2}, DType::f32));
  BOOST_CHECK_THROW(one.write(Tensor::zeros({2}, DType::f32)), hone::Error);
  one.commit();
  BOOST_TEST(hone::SafetensorsFile(c + "/one.st").info("x").numel() == 2);
}

BOOST_AUTO_TEST_SUITE_END()
