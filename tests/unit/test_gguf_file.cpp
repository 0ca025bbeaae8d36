// GGUF files: tiny.gguf (written by gguf.GGUFWriter, tools/gguf_golden.py) read back, its metadata of every value
// type through the typed getters and its tensors dequantized bit for bit as gguf-py does; files built here with
// each kind of damage, every one a one-line UserError naming the file and the problem; the real SmolLM2-135M
// GGUF of the model cache against per-tensor sums and rows made by gguf-py.
#include <boost/test/unit_test.hpp>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <limits>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "common/paths.h"
#include "common/real_model.h"
#include "model/gguf_file.h"
#include "model/gguf_quants.h"
#include "runtime/error.h"

namespace gg = hone::gguf;
using nlohmann::json;

namespace {

std::string data_path(const std::string& name) { return test::source_dir() + "/tests/data/gguf/" + name; }

json load_json(const std::string& name) {
  std::ifstream in(data_path(name));
  BOOST_REQUIRE_MESSAGE(in, "cannot read " << name);
  return json::parse(in);
}

std::vector<uint32_t> hex_bits(const std::string& s) {
  std::vector<uint32_t> out(s.size() / 8);
  for (size_t i = 0; i < out.size(); ++i) {
    uint32_t v = 0;
    for (int b = 0; b < 4; ++b) v |= uint32_t(std::stoul(s.substr(8 * i + 2 * b, 2), nullptr, 16)) << (8 * b);
    out[i] = v;
  }
  return out;
}

uint32_t bits(float f) {
  uint32_t b;
  std::memcpy(&b, &f, 4);
  return b;
}

// --- a small GGUF writer for the damaged files ---

std::string le32(uint32_t v) { return std::string(reinterpret_cast<const char*>(&v), 4); }
std::string le64(uint64_t v) { return std::string(reinterpret_cast<const char*>(&v), 8); }
std::string gstr(std::string_view s) { return le64(s.size()) + std::string(s); }
std::string kv(std::string_view key, uint32_t type, const std::string& payload) {
  return gstr(key) + le32(type) + payload;
}
std::string kv_u32(std::string_view key, uint32_t v) { return kv(key, 4, le32(v)); }
std::string kv_str(std::string_view key, std::string_view v) { return kv(key, 8, gstr(v)); }

struct TensorSpec {
  std::string name;
  std::vector<uint64_t> ne;
  uint32_t type = 0;
  uint64_t offset = 0;
};

struct Spec {
  uint32_t version = 3;
  std::vector<std::string> kvs = {kv_str("general.architecture", "llama")};
  std::vector<TensorSpec> tensors = {{"a", {4, 2}, 0, 0}, {"b", {8}, 0, 32}};
  uint64_t alignment = 32;  // for the padding only: add a general.alignment kv to declare another
  uint64_t data_bytes = 64;
  std::optional<uint64_t> n_kv, n_tensors;  // to lie about the counts
};

std::string build(const Spec& s) {
  std::string f = "GGUF" + le32(s.version) + le64(s.n_tensors.value_or(s.tensors.size())) +
                  le64(s.n_kv.value_or(s.kvs.size()));
  for (const std::string& k : s.kvs) f += k;
  for (const TensorSpec& t : s.tensors) {
    f += gstr(t.name) + le32(uint32_t(t.ne.size()));
    for (uint64_t d : t.ne) f += le64(d);
    f += le32(t.type) + le64(t.offset);
  }
  while (f.size() % s.alignment) f += '\0';
  for (uint64_t i = 0; i < s.data_bytes / 4; ++i) {
    const float v = float(i) * 0.5f - 3.0f;
    f += std::string(reinterpret_cast<const char*>(&v), 4);
  }
  return f;
}

// bytes must be refused with a one-line UserError "bad.gguf: ..." holding needle.
void expect_bad(const std::string& bytes, const std::string& needle) {
  BOOST_TEST_CONTEXT("expecting '" << needle << "'") {
    try {
      gg::GgufFile::from_bytes(bytes, "bad.gguf");
      BOOST_ERROR("no error");
    } catch (const hone::UserError& e) {
      const std::string m = e.what();
      BOOST_TEST_INFO(m);
      BOOST_TEST(m.rfind("bad.gguf: ", 0) == 0);
      BOOST_TEST(m.find(needle) != std::string::npos);
      BOOST_TEST(m.find('\n') == std::string::npos);
    } catch (const std::exception& e) {
      BOOST_ERROR("not a UserError: " << e.what());
    }
  }
}

std::string read_all(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return std::string(std::istreambuf_iterator<char>(in), {});
}

}  // namespace

BOOST_AUTO_TEST_SUITE(gguf_file)

BOOST_AUTO_TEST_CASE(tiny_file_metadata) {
  const gg::GgufFile f(data_path("tiny.gguf"));
  const json g = load_json("tiny_golden.json");
  BOOST_TEST(f.version() == 3u);
  BOOST_TEST(f.name() == data_path("tiny.gguf"));
  BOOST_TEST(f.alignment() == 32u);
  BOOST_TEST(f.keys() == g["keys"].get<std::vector<std::string>>(), boost::test_tools::per_element());

  BOOST_TEST(f.get_string("general.architecture") == "hone-test");
  BOOST_TEST(f.get_int("test.u8") == 200);
  BOOST_TEST(f.get_int("test.i8") == -100);
  BOOST_TEST(f.get_int("test.u16") == 60000);
  BOOST_TEST(f.get_int("test.i16") == -30000);
  BOOST_TEST(f.get_int("test.u32") == 4000000000LL);
  BOOST_TEST(f.get_int("test.i32") == -2000000000LL);
  BOOST_TEST(f.get_int("test.i64") == -9000000000000000000LL);
  BOOST_TEST(f.get_float("test.f32") == double(0.1f));
  BOOST_TEST(f.get_float("test.f64") == 0.1);
  BOOST_TEST(f.get_bool("test.bool"));
  BOOST_TEST(*f.find_bool("test.bool"));
  BOOST_TEST(f.get_string("test.string") == "h\xc3\xa9llo gguf");
  BOOST_TEST((f.value_type("test.u64") == gg::ValueType::u64));
  BOOST_TEST((f.value_type("test.array.f32") == gg::ValueType::array));
  BOOST_TEST((f.array_type("test.array.f32") == gg::ValueType::f32));
  BOOST_TEST(f.array_size("test.array.string") == 3u);

  BOOST_TEST(f.get_int_array("test.array.u8") == (std::vector<int64_t>{1, 2, 255}), boost::test_tools::per_element());
  BOOST_TEST(f.get_int_array("test.array.i32") == (std::vector<int64_t>{-1, 0, 7}), boost::test_tools::per_element());
  BOOST_TEST(f.get_int_array("test.array.u64") == (std::vector<int64_t>{3, int64_t(1) << 40}),
             boost::test_tools::per_element());
  BOOST_TEST(f.get_float_array("test.array.f32") == (std::vector<float>{0.5f, -1.25f, 3.0f}),
             boost::test_tools::per_element());
  BOOST_TEST(f.get_string_array("test.array.string") == (std::vector<std::string>{"a", "", "ccc"}),
             boost::test_tools::per_element());

  // Absent keys: find_* give nothing, get_* name the key.
  BOOST_TEST(!f.has("no.such"));
  BOOST_TEST(f.has("test.u8"));
  BOOST_TEST(!f.find_string("no.such"));
  BOOST_TEST(!f.find_int("no.such"));
  BOOST_TEST(!f.find_float("no.such"));
  BOOST_TEST(!f.find_bool("no.such"));
  auto throws = [&](auto&& fn, const std::string& needle) {
    try {
      fn();
      BOOST_ERROR("no error for " << needle);
    } catch (const hone::UserError& e) {
      const std::string m = e.what();
      BOOST_TEST_INFO(m);
      BOOST_TEST(m.find(needle) != std::string::npos);
      BOOST_TEST(m.find(f.name()) != std::string::npos);
    }
  };
  throws([&] { f.get_int("no.such"); }, "'no.such' is missing");
  throws([&] { f.get_string("no.such"); }, "'no.such' is missing");
  throws([&] { f.get_string_array("no.such"); }, "'no.such' is missing");
  // Types that do not fit.
  throws([&] { f.get_int("test.u64"); }, "'test.u64': value 18000000000000000000 does not fit in int64");
  throws([&] { f.find_int("test.string"); }, "'test.string' is STRING, not an integer");
  throws([&] { f.find_int("test.f32"); }, "'test.f32' is FLOAT32, not an integer");
  throws([&] { f.find_float("test.i32"); }, "'test.i32' is INT32, not a float");
  throws([&] { f.find_string("test.u8"); }, "'test.u8' is UINT8, not a string");
  throws([&] { f.find_bool("test.u8"); }, "'test.u8' is UINT8, not a bool");
  throws([&] { f.get_string_array("test.array.i32"); }, "'test.array.i32' is not an array of strings");
  throws([&] { f.get_int_array("test.array.f32"); }, "'test.array.f32' is not an array of integers");
  throws([&] { f.get_float_array("test.string"); }, "'test.string' is not an array of floats");
}

BOOST_AUTO_TEST_CASE(tiny_file_tensors_equal_gguf_py) {
  const json g = load_json("tiny_golden.json");
  // The same checks on the mapped file and on its bytes, before and after a move.
  gg::GgufFile mapped(data_path("tiny.gguf"));
  gg::GgufFile from_bytes = gg::GgufFile::from_bytes(read_all(data_path("tiny.gguf")), "tiny");
  gg::GgufFile moved(std::move(from_bytes));
  for (const gg::GgufFile* f : {&mapped, &moved}) {
    BOOST_REQUIRE_EQUAL(f->tensors().size(), g["tensors"].size());
    for (size_t i = 0; i < f->tensors().size(); ++i) {
      const gg::TensorInfo& t = f->tensors()[i];
      const json& e = g["tensors"][i];
      BOOST_TEST_CONTEXT(f->name() << " " << t.name) {
        BOOST_TEST(t.name == e["name"].get<std::string>());
        BOOST_TEST(gg::type_name_string(t.type) == e["type"].get<std::string>());
        BOOST_TEST(t.ne == e["ne"].get<std::vector<uint64_t>>(), boost::test_tools::per_element());
        BOOST_TEST(t.offset == e["offset"].get<uint64_t>());
        BOOST_TEST(t.nbytes == e["nbytes"].get<uint64_t>());
        BOOST_TEST(f->find_tensor(t.name) == &t);
        if (!e.contains("values")) {
          try {
            f->read_f32(t);
            BOOST_ERROR("no error reading " << t.name);
          } catch (const hone::UserError& err) {
            BOOST_TEST(std::string(err.what()) ==
                       f->name() + ": tensor 'x.iq4_nl' has type IQ4_NL, which hone cannot dequantize");
          }
          continue;
        }
        const std::vector<uint32_t> want = hex_bits(e["values"]);
        const std::vector<float> got = f->read_f32(t);
        BOOST_REQUIRE_EQUAL(got.size(), want.size());
        BOOST_REQUIRE_EQUAL(t.elements(), want.size());
        size_t bad = 0;
        for (size_t j = 0; j < got.size(); ++j) bad += bits(got[j]) != want[j];
        BOOST_TEST(bad == 0u);
      }
    }
  }
  BOOST_TEST(mapped.find_tensor("no.such") == nullptr);
}

BOOST_AUTO_TEST_CASE(built_files_read_back) {
  // The builder's own file, as version 3 and 2 and with alignments 1 and 64 (data then at odd addresses).
  for (uint32_t version : {2u, 3u}) {
    for (uint64_t align : {1u, 32u, 64u}) {
      Spec s;
      s.version = version;
      s.alignment = align;
      const uint64_t b_at = std::max<uint64_t>(32, align);
      s.tensors[1].offset = b_at;
      s.data_bytes = b_at + 32;
      if (align != 32) s.kvs.push_back(kv_u32("general.alignment", uint32_t(align)));
      if (align == 1) s.kvs.push_back(kv("pad", 0, "\x07"));  // an odd header size
      const gg::GgufFile f = gg::GgufFile::from_bytes(build(s), "ok.gguf");
      BOOST_TEST(f.version() == version);
      BOOST_TEST(f.alignment() == align);
      BOOST_TEST(f.data_offset() % align == 0u);
      const std::vector<float> a = f.read_f32(*f.find_tensor("a"));
      const std::vector<float> b = f.read_f32(*f.find_tensor("b"));
      BOOST_REQUIRE_EQUAL(a.size(), 8u);
      BOOST_REQUIRE_EQUAL(b.size(), 8u);
      for (int i = 0; i < 8; ++i) {
        BOOST_TEST(a[size_t(i)] == float(i) * 0.5f - 3.0f);
        BOOST_TEST(b[size_t(i)] == float(int(b_at / 4) + i) * 0.5f - 3.0f);
      }
    }
  }
  // No tensors, no metadata: valid.
  Spec empty;
  empty.kvs.clear();
  empty.tensors.clear();
  empty.data_bytes = 0;
  BOOST_TEST(gg::GgufFile::from_bytes(build(empty), "empty.gguf").tensors().empty());
}

BOOST_AUTO_TEST_CASE(damaged_header) {
  const std::string good = build(Spec{});
  expect_bad("", "file too short for a GGUF header (0 bytes");
  expect_bad("GGU", "file too short");
  expect_bad(good.substr(0, 20), "file too short");
  expect_bad("GGML" + good.substr(4), "not a GGUF file: wrong magic 0x47474d4c");
  std::string v = good;
  v[4] = 1;
  expect_bad(v, "GGUF version 1 is not supported");
  v[4] = 4;
  expect_bad(v, "unsupported GGUF version 4");
  v.replace(4, 4, std::string("\0\0\0\3", 4));
  expect_bad(v, "big-endian GGUF file");
}

BOOST_AUTO_TEST_CASE(every_truncation_is_a_user_error) {
  // Every prefix that ends before the last tensor's data does (GGUFWriter pads the file after it).
  const std::string whole = read_all(data_path("tiny.gguf"));
  uint64_t end = 0;
  for (const json& t : load_json("tiny_golden.json")["tensors"])
    end = std::max(end, t["offset"].get<uint64_t>() + t["nbytes"].get<uint64_t>());
  BOOST_REQUIRE(end <= whole.size());
  for (size_t n = 0; n < end; ++n) {
    try {
      gg::GgufFile::from_bytes(whole.substr(0, n), "cut.gguf");
      BOOST_ERROR("no error at " << n << " bytes");
    } catch (const hone::UserError& e) {
      const std::string m = e.what();
      if (!(m.find("truncated file") != std::string::npos || m.find("too short") != std::string::npos ||
            m.find("absurd") != std::string::npos))
        BOOST_ERROR(n << " bytes: " << m);
    }
  }
}

BOOST_AUTO_TEST_CASE(damaged_counts) {
  Spec s;
  s.n_kv = uint64_t(1) << 60;
  expect_bad(build(s), "absurd metadata count 1152921504606846976");
  s = Spec{};
  s.n_tensors = uint64_t(1) << 62;
  expect_bad(build(s), "absurd tensor count 4611686018427387904");
  s = Spec{};
  s.kvs = {gstr("k") + le32(8) + le64(uint64_t(1) << 50) + "abc"};
  expect_bad(build(s), "absurd string length 1125899906842624 for metadata key 'k'");
  s.kvs = {le64(~uint64_t(0)) + "k"};
  expect_bad(build(s), "absurd string length 18446744073709551615 for metadata key #0");
  s.kvs = {kv("arr", 9, le32(4) + le64(uint64_t(1) << 40))};
  expect_bad(build(s), "metadata key 'arr': absurd array length 1099511627776");
  s.kvs = {kv("arr", 9, le32(8) + le64(~uint64_t(0) / 2))};
  expect_bad(build(s), "absurd array length");
  s = Spec{};
  s.tensors = {{"t", {4}, 0, 0}};
  s.data_bytes = 16;
  std::string f = build(s);
  // The tensor name's length field: after the header (24 bytes) and the one kv.
  const size_t name_at = 24 + s.kvs[0].size();
  f.replace(name_at, 8, le64(uint64_t(1) << 40));
  expect_bad(f, "absurd string length 1099511627776 for tensor name #0");
}

BOOST_AUTO_TEST_CASE(damaged_metadata) {
  Spec s;
  s.kvs = {kv("k", 13, le32(0))};
  expect_bad(build(s), "metadata key 'k': unknown value type 13");
  s.kvs = {kv("k", 0xffffffffu, "")};
  expect_bad(build(s), "metadata key 'k': unknown value type 4294967295");
  s.kvs = {kv("k", 9, le32(77) + le64(1) + "x")};
  expect_bad(build(s), "metadata key 'k': array of unknown value type 77");
  s.kvs = {kv("k", 9, le32(9) + le64(1) + le32(4) + le64(1) + le32(5))};
  expect_bad(build(s), "metadata key 'k': nested arrays are not supported");
  s.kvs = {kv_u32("k", 1), kv_u32("j", 2), kv_u32("k", 3)};
  expect_bad(build(s), "duplicate metadata key 'k'");
  s.kvs = {kv("flag", 7, "\x02")};
  expect_bad(build(s), "metadata key 'flag': bool value 2 is not 0 or 1");
  s.kvs = {kv("flags", 9, le32(7) + le64(2) + "\x01\x05")};
  expect_bad(build(s), "metadata key 'flags' element 1: bool value 5 is not 0 or 1");
  s.kvs = {kv("line\nbreak", 13, "")};  // a key with a newline: escaped, the message stays one line
  expect_bad(build(s), "metadata key 'line\\x0abreak': unknown value type 13");
  // general.alignment.
  s.kvs = {kv_u32("general.alignment", 3)};
  expect_bad(build(s), "general.alignment 3 is not a power of two");
  s.kvs = {kv_u32("general.alignment", 0)};
  expect_bad(build(s), "general.alignment 0 is not a power of two");
  s.kvs = {kv_str("general.alignment", "32")};
  expect_bad(build(s), "general.alignment is STRING, not an integer");
  s.kvs = {kv("general.alignment", 11, le64(uint64_t(-64)))};
  expect_bad(build(s), "general.alignment -64 is not a power of two");
}

BOOST_AUTO_TEST_CASE(damaged_tensor_infos) {
  auto with = [](std::vector<TensorSpec> ts, uint64_t data_bytes = 64) {
    Spec s;
    s.tensors = std::move(ts);
    s.data_bytes = data_bytes;
    return build(s);
  };
  expect_bad(with({{"a", {4}, 0, 0}, {"a", {4}, 0, 32}}), "duplicate tensor 'a'");
  expect_bad(with({{"a", {}, 0, 0}}), "tensor 'a': n_dims 0 (must be 1 to 4)");
  expect_bad(with({{"a", {1, 1, 1, 1, 1}, 0, 0}}), "tensor 'a': n_dims 5 (must be 1 to 4)");
  expect_bad(with({{"a", {4, 0}, 0, 0}}), "tensor 'a': dimension 1 is 0");
  expect_bad(with({{"a", {uint64_t(1) << 32, uint64_t(1) << 32}, 0, 0}}), "tensor 'a': element count overflows int64");
  expect_bad(with({{"a", {uint64_t(1) << 62, 4}, 0, 0}}), "tensor 'a': element count overflows int64");
  expect_bad(with({{"a", {uint64_t(1) << 62}, 0, 0}}), "tensor 'a': byte size overflows int64");
  expect_bad(with({{"a", {4}, 99, 0}}), "tensor 'a': unknown tensor type 99");
  expect_bad(with({{"a", {16}, gg::kQ4_0, 0}}), "tensor 'a': row length 16 is not a multiple of Q4_0's block size 32");
  expect_bad(with({{"a", {4}, 0, 16}}), "tensor 'a': data offset 16 is not a multiple of the alignment 32");
  expect_bad(with({{"a", {4}, 0, 64}}), "tensor 'a': data out of the file's range");
  expect_bad(with({{"a", {32}, 0, 0}}), "tensor 'a': data out of the file's range (128 bytes at data offset 0");
  expect_bad(with({{"a", {4}, 0, uint64_t(-32)}}), "tensor 'a': data out of the file's range");
  expect_bad(with({{"a", {8}, 0, 0}, {"b", {4}, 0, 0}}), "overlapping tensors 'a' (bytes");
  expect_bad(with({{"a", {4}, 0, 32}, {"b", {16}, 0, 0}}), "overlapping tensors 'b' (bytes");
  // A type hone cannot dequantize is listed and range-checked all the same.
  expect_bad(with({{"iq", {256}, gg::kIQ2_XXS, 0}}), "tensor 'iq': data out of the file's range (66 bytes");
  const gg::GgufFile ok = gg::GgufFile::from_bytes(with({{"iq", {32}, gg::kIQ4_NL, 0}}), "iq.gguf");
  BOOST_TEST(ok.tensors().at(0).nbytes == 18u);
}

BOOST_AUTO_TEST_CASE(files_that_cannot_be_opened) {
  const std::string dir = test::temp_dir("gguf");
  try {
    gg::GgufFile f(dir + "/absent.gguf");
    BOOST_ERROR("no error");
  } catch (const hone::UserError& e) {
    BOOST_TEST(std::string(e.what()) == dir + "/absent.gguf: cannot open: No such file or directory");
  }
  try {
    gg::GgufFile f(dir);
    BOOST_ERROR("no error");
  } catch (const hone::UserError& e) {
    BOOST_TEST(std::string(e.what()) == dir + ": not a regular file");
  }
  std::ofstream(dir + "/empty.gguf").close();
  try {
    gg::GgufFile f(dir + "/empty.gguf");
    BOOST_ERROR("no error");
  } catch (const hone::UserError& e) {
    BOOST_TEST(std::string(e.what()).find("empty.gguf: file too short for a GGUF header (0 bytes") != std::string::npos);
  }
}

// The real model: skipped with a message when `make deps` has not put it in the model cache.
BOOST_AUTO_TEST_CASE(smollm2_equal_to_gguf_py, *boost::unit_test::precondition([](boost::unit_test::test_unit_id) {
  boost::test_tools::assertion_result r(!test::real_gguf_path().empty());
  if (!r) r.message() << "SmolLM2-135M-Instruct GGUF not in " << test::model_cache_dir() << ": run make deps";
  return r;
})) {
  const json g = load_json("smollm2_golden.json");
  const gg::GgufFile f(test::real_gguf_path());
  BOOST_TEST(f.version() == 3u);
  BOOST_TEST(f.get_string("general.architecture") == "llama");
  BOOST_TEST(f.get_int("llama.block_count") == g["metadata"]["llama.block_count"].get<int64_t>());
  BOOST_TEST(f.get_int("llama.embedding_length") == g["metadata"]["llama.embedding_length"].get<int64_t>());
  BOOST_TEST(f.get_float("llama.rope.freq_base") == g["metadata"]["llama.rope.freq_base"].get<double>());
  const std::vector<std::string> tokens = f.get_string_array("tokenizer.ggml.tokens");
  BOOST_TEST(tokens.size() == g["metadata"]["tokenizer.ggml.tokens.size"].get<size_t>());
  const auto first = g["metadata"]["tokenizer.ggml.tokens.first"].get<std::vector<std::string>>();
  for (size_t i = 0; i < first.size(); ++i) BOOST_TEST(tokens.at(i) == first[i]);
  BOOST_TEST(f.get_int_array("tokenizer.ggml.token_type").size() == tokens.size());

  BOOST_REQUIRE_EQUAL(f.tensors().size(), g["n_tensors"].get<size_t>());
  BOOST_REQUIRE_EQUAL(f.tensors().size(), 272u);
  std::vector<float> buf;
  for (const gg::TensorInfo& t : f.tensors()) {
    BOOST_TEST_CONTEXT(t.name << " (" << gg::type_name_string(t.type) << ")") {
      buf.resize(size_t(t.elements()));
      f.read_f32(t, buf.data());
      double sum = 0, abs_sum = 0;
      for (float v : buf) {
        sum += double(v);
        abs_sum += std::fabs(double(v));
      }
      const double want = g["sums"].at(t.name).get<double>();
      // The sums differ only by their order of addition (numpy's is pairwise).
      BOOST_TEST(std::fabs(sum - want) <= 1e-12 * abs_sum + 1e-30);
    }
  }
  for (const json& r : g["rows"]) {
    const std::string name = r["tensor"];
    const gg::TensorInfo* t = f.find_tensor(name);
    BOOST_REQUIRE_MESSAGE(t, name);
    BOOST_TEST(gg::type_name_string(t->type) == r["type"].get<std::string>());
    const std::vector<float> all = f.read_f32(*t);
    const std::vector<uint32_t> want = hex_bits(r["values"]);
    const size_t at = r["row"].get<size_t>() * size_t(t->ne[0]);
    for (size_t j = 0; j < want.size(); ++j)
      BOOST_TEST(bits(all.at(at + j)) == want[j], name << " row " << r["row"] << " value " << j);
  }
}

BOOST_AUTO_TEST_SUITE_END()
