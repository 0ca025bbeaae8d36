// Where tests find the real models that `make deps` puts in the model cache (never committed).
#pragma once

#include <string>

namespace test {

std::string model_cache_dir();  // $HONE_MODEL_CACHE, else $HOME/.cache/hone
// The SmolLM2-135M-Instruct Q4_1 GGUF in the model cache; empty when it is absent.
std::string real_gguf_path();

}  // namespace test
