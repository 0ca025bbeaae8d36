// Where tests find the real models that `make deps` puts in the model cache (never committed), and the Hugging
// Face folder of SmolLM2-135M-Instruct that `hone convert` makes from its GGUF once per test process.
#pragma once

#include <boost/test/unit_test.hpp>

#include <string>

namespace test {

std::string model_cache_dir();  // hone's model cache (model/model_source.h): $HONE_CACHE_DIR, ... ~/.cache/hone
// The SmolLM2-135M-Instruct Q4_1 GGUF in the model cache; empty when it is absent.
std::string real_gguf_path();
// Precondition of the cases that need it: BOOST_AUTO_TEST_CASE(x, *boost::unit_test::precondition(test::needs_real_model))
boost::test_tools::assertion_result needs_real_model(boost::unit_test::test_unit_id);
// `hone convert --model <real_gguf_path()>` into a folder under build/test-tmp, made on the first call.
std::string smollm2_folder();

}  // namespace test
