// GGUF dequantization: every type hone dequantizes against the values of the gguf Python package
// (tests/data/gguf/quants_golden.json, made by tools/gguf_golden.py), bit for bit, from aligned and unaligned
// bytes; the block sizes and names of the type table.
#include <boost/test/unit_test.hpp>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <fstream>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "common/paths.h"
#include "model/gguf_file.h"
#include "model/gguf_quants.h"

namespace gg = hone::gguf;

namespace {

std::vector<uint8_t> unhex(const std::string& s) {
  std::vector<uint8_t> out(s.size() / 2);
  for (size_t i = 0; i < out.size(); ++i) out[i] = uint8_t(std::stoul(s.substr(2 * i, 2), nullptr, 16));
  return out;
}

std::vector<uint32_t> unhex_f32_bits(const std::string& s) {
  const std::vector<uint8_t> b = unhex(s);
  std::vector<uint32_t> out(b.size() / 4);
  std::memcpy(out.data(), b.data(), b.size());
  return out;
}

nlohmann::json load_json(const std::string& rel) {
  std::ifstream in(test::source_dir() + "/" + rel);
  BOOST_REQUIRE_MESSAGE(in, "cannot read " << rel);
  return nlohmann::json::parse(in);
}

}  // namespace

BOOST_AUTO_TEST_SUITE(gguf_quants)

BOOST_AUTO_TEST_CASE(every_type_bitwise_equal_to_gguf_py) {
  const nlohmann::json g = load_json("tests/data/gguf/quants_golden.json");
  std::vector<std::string> seen;
  for (const auto& c : g["cases"]) {
    const std::string name = c["type"];
    const uint32_t type = c["id"];
    const int64_t n = c["elements"];
    BOOST_TEST_CONTEXT(name) {
      seen.push_back(name);
      BOOST_TEST(gg::type_name_string(type) == name);
      BOOST_REQUIRE(gg::can_dequantize(type));
      const std::vector<uint8_t> bytes = unhex(c["bytes"]);
      const std::vector<uint32_t> expected = unhex_f32_bits(c["expected"]);
      BOOST_REQUIRE_EQUAL(int64_t(expected.size()), n);
      BOOST_REQUIRE_EQUAL(int64_t(bytes.size()), n / gg::block_elements(type) * gg::block_bytes(type));
      // From the bytes as they are, and shifted by one byte (GGUF data is only as aligned as general.alignment).
      for (int shift : {0, 1}) {
        std::vector<uint8_t> buf(bytes.size() + 1);
        std::memcpy(buf.data() + shift, bytes.data(), bytes.size());
        std::vector<float> out(size_t(n), -1.0f);
        gg::dequantize(type, buf.data() + shift, out.data(), n);
        int64_t mismatches = 0;
        for (int64_t i = 0; i < n; ++i) {
          uint32_t bits;
          std::memcpy(&bits, &out[size_t(i)], 4);
          if (bits != expected[size_t(i)] && mismatches++ < 3)
            BOOST_ERROR(name << " element " << i << ": 0x" << std::hex << bits << " != 0x" << expected[size_t(i)]);
        }
        BOOST_TEST(mismatches == 0);
      }
    }
  }
  const std::vector<std::string> all = {"F32",  "F16",  "BF16", "Q4_0", "Q4_1", "Q5_0", "Q5_1",
                                        "Q8_0", "Q2_K", "Q3_K", "Q4_K", "Q5_K", "Q6_K", "Q8_K"};
  for (const std::string& t : all) BOOST_TEST((std::find(seen.begin(), seen.end(), t) != seen.end()), t);
}

BOOST_AUTO_TEST_CASE(type_table) {
  // Block sizes as ggml defines them (ggml-common.h), including types hone only lists.
  struct Row {
    uint32_t type;
    const char* name;
    int64_t elements, bytes;
    bool dequantizable;
  };
  const Row rows[] = {
      {0, "F32", 1, 4, true},        {1, "F16", 1, 2, true},        {2, "Q4_0", 32, 18, true},
      {3, "Q4_1", 32, 20, true},     {6, "Q5_0", 32, 22, true},     {7, "Q5_1", 32, 24, true},
      {8, "Q8_0", 32, 34, true},     {9, "Q8_1", 32, 40, false},    {10, "Q2_K", 256, 84, true},
      {11, "Q3_K", 256, 110, true},  {12, "Q4_K", 256, 144, true},  {13, "Q5_K", 256, 176, true},
      {14, "Q6_K", 256, 210, true},  {15, "Q8_K", 256, 292, true},  {20, "IQ4_NL", 32, 18, false},
      {28, "F64", 1, 8, false},      {30, "BF16", 1, 2, true},      {39, "MXFP4", 32, 17, false},
  };
  for (const Row& r : rows) {
    BOOST_TEST_CONTEXT(r.name) {
      BOOST_TEST(gg::type_name_string(r.type) == r.name);
      BOOST_TEST(gg::block_elements(r.type) == r.elements);
      BOOST_TEST(gg::block_bytes(r.type) == r.bytes);
      BOOST_TEST(gg::can_dequantize(r.type) == r.dequantizable);
    }
  }
  for (uint32_t unknown : {4u, 5u, 31u, 99u, 0xffffffffu}) {
    BOOST_TEST(gg::type_name_string(unknown) == "type " + std::to_string(unknown));
    BOOST_TEST(gg::block_elements(unknown) == 0);
    BOOST_TEST(gg::block_bytes(unknown) == 0);
    BOOST_TEST(!gg::can_dequantize(unknown));
  }
}

BOOST_AUTO_TEST_CASE(half_conversions_exact) {
  // Every fp16 bit pattern but NaNs: the conversion is exact, so float(half) converted back must give the bits.
  std::vector<uint16_t> halves;
  for (uint32_t h = 0; h < 65536; ++h)
    if ((h & 0x7c00) != 0x7c00 || (h & 0x3ff) == 0) halves.push_back(uint16_t(h));
  std::vector<float> out(halves.size());
  gg::dequantize(gg::kF16, halves.data(), out.data(), int64_t(halves.size()));
  BOOST_TEST(out[1] == 5.9604644775390625e-08f);  // the smallest subnormal, 2^-24
  BOOST_TEST(out[0x3c00] == 1.0f);
  BOOST_TEST(out[0x7bff] == 65504.0f);
  BOOST_TEST(std::isinf(out[0x7c00]));
  const size_t neg_zero = size_t(std::find(halves.begin(), halves.end(), uint16_t(0x8000)) - halves.begin());
  BOOST_TEST((out[neg_zero] == 0.0f && std::signbit(out[neg_zero])));
  // The positive finite halves are in increasing order, so must their floats be (subnormals included).
  for (uint32_t h = 1; h <= 0x7c00; ++h) BOOST_TEST_REQUIRE(out[h] > out[h - 1]);
}

BOOST_AUTO_TEST_SUITE_END()
