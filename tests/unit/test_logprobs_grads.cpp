// `hone logprobs --grad-output` on the golden checkpoints of tests/data/hf: the gradient of
// L = sum_i (1 + 0.1 * (i mod 5)) * logprobs[i] must match the one transformers computed (reference.safetensors,
// "grad.<name>"), tensor by tensor, whatever the batching.
#include <boost/test/unit_test.hpp>

#include <cmath>
#include <set>
#include <string>
#include <vector>

#include "common/compare.h"
#include "common/paths.h"
#include "model/safetensors.h"

namespace {

using test::rel_l2;

std::vector<float> read(const hone::SafetensorsFile& f, const std::string& name) {
  std::vector<float> v(size_t(f.info(name).numel()));
  f.read_f32(name, v.data());
  return v;
}

}  // namespace

BOOST_AUTO_TEST_SUITE(logprobs_grads)

BOOST_AUTO_TEST_CASE(gradients_match_transformers_on_the_golden_models) {
  for (const std::string arch : {"llama", "qwen2", "qwen3"}) {
    const std::string dir = test::source_dir() + "/tests/data/hf/" + arch;
    const hone::SafetensorsFile ref(dir + "/reference.safetensors");
    std::set<std::string> want_names;
    for (const auto& t : ref.tensors())
      if (t.name.rfind("grad.", 0) == 0) want_names.insert(t.name.substr(5));
    BOOST_TEST_REQUIRE(!want_names.empty());
    // 30 tokens per batch splits the three sequences (5, 17, 40 tokens) over batches: gradients must add up.
    for (int batch_tokens : {30, 4096}) {
      const std::string work = test::temp_dir("logprobs_grads_" + arch);
      const std::string grads = work + "/grads" + std::to_string(batch_tokens) + ".safetensors";
      std::string log;
      const int rc = test::run_command(test::hone_exe() + " logprobs --model " + dir + " --input " + dir +
                                           "/sequences.jsonl --output " + work + "/out.h5 --grad-output " + grads +
                                           " --batch-tokens " + std::to_string(batch_tokens),
                                       &log);
      BOOST_TEST_REQUIRE(rc == 0, log);
      const hone::SafetensorsFile got(grads);
      std::set<std::string> got_names;
      for (const auto& t : got.tensors()) {
        got_names.insert(t.name);
        BOOST_TEST(t.dtype_name == "F32");
      }
      BOOST_TEST((got_names == want_names), arch << ": gradient names differ from transformers' parameters");
      for (const std::string& name : want_names) {
        if (!got.find(name)) continue;
        BOOST_TEST_REQUIRE(got.info(name).shape == ref.info("grad." + name).shape, arch << " " << name);
        const double err = rel_l2(read(got, name), read(ref, "grad." + name));
        BOOST_TEST(err <= 1e-4, arch << " " << name << " batch_tokens " << batch_tokens << ": rel L2 " << err);
      }
    }
  }
}

BOOST_AUTO_TEST_SUITE_END()
