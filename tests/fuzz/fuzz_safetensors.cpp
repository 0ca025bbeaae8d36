// Fuzz driver: safetensors files and the sharded index (model/safetensors.cpp). Input: a first byte choosing the
// form (even: a single model.safetensors of the remaining bytes; odd: model.safetensors.index.json of the remaining
// bytes, with two small valid shards beside it), then the bytes. Every tensor listed is read back.
#include "fuzz/fuzz_common.h"
#include "model/safetensors.h"
#include "tensor/tensor.h"

namespace {

// Two shards the index may point at: a.safetensors holds "x" (2 x 3 f32), b.safetensors holds "y" (4 bf16).
void write_shards(const std::string& dir) {
  hone::Tensor x = hone::Tensor::empty({2, 3});
  for (int i = 0; i < 6; ++i) x.f32()[i] = float(i);
  hone::Tensor y = hone::Tensor::empty({4});
  for (int i = 0; i < 4; ++i) y.f32()[i] = float(-i);
  hone::write_safetensors(dir + "/a.safetensors", {hone::safetensors_entry("x", x)});
  hone::write_safetensors(dir + "/b.safetensors", {{"y", y, hone::DType::bf16}});
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size == 0) return 0;
  const std::string dir = fuzz::fresh_dir("st");
  const bool index = data[0] & 1;
  const std::string_view bytes(reinterpret_cast<const char*>(data + 1), size - 1);
  if (index) {
    write_shards(dir);
    fuzz::write_file(dir + "/model.safetensors.index.json", bytes);
  } else {
    fuzz::write_file(dir + "/model.safetensors", bytes);
  }
  fuzz::expect_user_error_or_success([&] {
    const hone::SafetensorsCheckpoint ck(dir);
    for (const std::string& name : ck.names()) {
      const hone::SafetensorsTensorInfo& t = ck.info(name);
      if (!t.supported || t.numel() > (int64_t(1) << 20)) continue;
      std::vector<float> out(static_cast<size_t>(t.numel()));
      ck.read_f32(name, out.data());
      if (t.numel() > 1) ck.read_f32(name, 1, t.numel() - 1, out.data());
    }
  });
  return 0;
}
