// Fuzz driver: GGUF files (model/gguf_file.cpp, model/gguf_quants.cpp). Input: the file's bytes. When it opens,
// every metadata value is read through the getters its type fits and every tensor of a type hone dequantizes
// (up to 2^20 elements) is dequantized.
#include "fuzz/fuzz_common.h"
#include "model/gguf_file.h"
#include "model/gguf_quants.h"

namespace gg = hone::gguf;

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  fuzz::expect_user_error_or_success([&] {
    const gg::GgufFile f =
        gg::GgufFile::from_bytes(std::string(reinterpret_cast<const char*>(data), size), "fuzz.gguf");
    for (const std::string& k : f.keys()) {
      // Each getter either fits the type or throws a UserError: try them all, each on its own.
      fuzz::expect_user_error_or_success([&] { f.find_string(k); });
      fuzz::expect_user_error_or_success([&] { f.find_int(k); });
      fuzz::expect_user_error_or_success([&] { f.find_float(k); });
      fuzz::expect_user_error_or_success([&] { f.find_bool(k); });
      fuzz::expect_user_error_or_success([&] { f.get_string_array(k); });
      fuzz::expect_user_error_or_success([&] { f.get_int_array(k); });
      fuzz::expect_user_error_or_success([&] { f.get_float_array(k); });
    }
    std::vector<float> out;
    for (const gg::TensorInfo& t : f.tensors()) {
      if (t.elements() > (uint64_t(1) << 20)) continue;
      fuzz::expect_user_error_or_success([&] {
        out.resize(size_t(t.elements()));
        f.read_f32(t, out.data());
      });
    }
  });
  return 0;
}
