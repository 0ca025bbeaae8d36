// Fuzz driver: a Hugging Face config.json (model/model_config.cpp). Input: the file's bytes.
#include "fuzz/fuzz_common.h"
#include "model/model_config.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string dir = fuzz::fresh_dir("model");
  fuzz::write_file(dir + "/config.json", std::string_view(reinterpret_cast<const char*>(data), size));
  fuzz::expect_user_error_or_success([&] {
    const hone::ModelConfig c = hone::load_model_config(dir);
    (void)c.num_parameters();
  });
  return 0;
}
