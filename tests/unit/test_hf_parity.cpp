// The whole model against Hugging Face transformers (fp32, eager attention) on the tiny golden checkpoints in
// tests/data/hf/{llama,qwen2,qwen3,qwen3_moe} written by tools/hf_reference.py: logprobs and entropies of each
// golden sequence, and the gradient of L = sum_i c_i logprobs[i] (c_i = 1 + 0.1 (i mod 5)) for every parameter.
// hone runs all sequences packed in one batch; transformers ran them one by one. The mixture of experts also checks
// the load-balancing loss of each sequence and its gradient (hone runs those sequence by sequence, as the loss is
// taken over a forward's rows).
// Tolerances: |logprob diff| and |entropy diff| <= 1e-4 absolute; per-parameter gradient relative L2 error <= 1e-4;
// |aux loss diff| <= 1e-5.
#include <boost/test/unit_test.hpp>

#include <cmath>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <map>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "common/paths.h"
#include "io/hdf5_file.h"
#include "model/model_config.h"
#include "model/moe_feed_forward.h"
#include "model/packed_batch.h"
#include "model/transformer.h"
#include "model/weights.h"

namespace {

std::string golden_dir(const std::string& arch) { return test::source_dir() + "/tests/data/hf/" + arch; }

boost::test_tools::assertion_result has_goldens(const std::string& arch) {
  const std::string d = golden_dir(arch);
  for (const char* f : {"config.json", "model.safetensors", "sequences.jsonl", "reference.safetensors"}) {
    if (!std::filesystem::exists(d + "/" + f)) {
      boost::test_tools::assertion_result r(false);
      r.message() << "no Hugging Face golden " << d << "/" << f << " (written by tools/hf_reference.py goldens)";
      return r;
    }
  }
  return true;
}

// The reference file, read with a few lines of safetensors parsing: an 8-byte little-endian header length, a
// JSON header {name: {dtype, shape, data_offsets}}, then the data.
struct Reference {
  nlohmann::json header;
  std::vector<char> data;

  explicit Reference(const std::string& path) {
    std::ifstream f(path, std::ios::binary);
    uint64_t n = 0;
    f.read(reinterpret_cast<char*>(&n), 8);
    std::string h(n, '\0');
    f.read(h.data(), std::streamsize(n));
    header = nlohmann::json::parse(h);
    data.assign(std::istreambuf_iterator<char>(f), {});
  }
  bool contains(const std::string& name) const { return header.contains(name); }
  template <typename T>
  std::vector<T> get(const std::string& name, const char* dtype) const {
    const auto& e = header.at(name);
    BOOST_TEST_REQUIRE(e.at("dtype").get<std::string>() == dtype, name);
    const int64_t b = e.at("data_offsets")[0], end = e.at("data_offsets")[1];
    std::vector<T> v(size_t(end - b) / sizeof(T));
    std::memcpy(v.data(), data.data() + b, size_t(end - b));
    return v;
  }
};

std::vector<std::vector<int32_t>> read_sequences(const std::string& path) {
  std::ifstream f(path);
  std::vector<std::vector<int32_t>> seqs;
  for (std::string line; std::getline(f, line);)
    if (!line.empty()) seqs.push_back(nlohmann::json::parse(line).at("tokens").get<std::vector<int32_t>>());
  return seqs;
}

// Relative L2 error of every parameter's gradient in g against the reference's `prefix`<name>; returns the worst.
double worst_gradient_error(const hone::ModelWeights& g, const Reference& ref, const std::string& prefix) {
  double worst = 0;
  for (const auto& [name, t] : g.named_parameters()) {
    BOOST_TEST_REQUIRE(ref.contains(prefix + name), "no reference gradient " << prefix << name);
    const auto want = ref.get<float>(prefix + name, "F32");
    BOOST_TEST_REQUIRE(int64_t(want.size()) == t.numel(), name);
    double err = 0, norm = 0;
    for (int64_t i = 0; i < t.numel(); ++i) {
      err += std::pow(double(t.f32()[i]) - want[size_t(i)], 2);
      norm += std::pow(double(want[size_t(i)]), 2);
    }
    const double rel = std::sqrt(err / std::max(norm, 1e-30));
    worst = std::max(worst, rel);
    BOOST_TEST(rel <= 1e-4, prefix << name << ": relative L2 error " << rel);
  }
  return worst;
}

void check_parity(const std::string& arch) {
  const std::string dir = golden_dir(arch);
  const hone::ModelConfig c = hone::load_model_config(dir);
  hone::ModelWeights w = hone::allocate_weights(c);
  hone::load_weights(w, c, dir);
  const auto seqs = read_sequences(dir + "/sequences.jsonl");
  const Reference ref(dir + "/reference.safetensors");
  const auto want_lp = ref.get<float>("logprobs", "F32");
  const auto want_en = ref.get<float>("entropy", "F32");
  const auto offsets = ref.get<int64_t>("offsets", "I64");
  BOOST_TEST_REQUIRE(offsets.size() == seqs.size() + 1);

  hone::Transformer model(c, w);
  const hone::PackedBatch b = hone::PackedBatch::pack(seqs);
  model.forward(b, 1.f, true);
  std::vector<float> dlogprob(size_t(b.num_tokens()), 0.f);
  double max_lp = 0, max_en = 0;
  for (int s = 0; s < b.num_seqs(); ++s) {
    BOOST_TEST_REQUIRE(offsets[size_t(s) + 1] - offsets[size_t(s)] == b.seq_end(s) - b.seq_begin(s) - 1);
    for (int64_t i = offsets[size_t(s)]; i < offsets[size_t(s) + 1]; ++i) {
      const int row = b.seq_begin(s) + int(i - offsets[size_t(s)]);
      max_lp = std::max(max_lp, double(std::fabs(model.logprobs()[row] - want_lp[size_t(i)])));
      max_en = std::max(max_en, double(std::fabs(model.entropy()[row] - want_en[size_t(i)])));
      dlogprob[size_t(row)] = 1.f + 0.1f * float(i % 5);
    }
  }
  BOOST_TEST_MESSAGE(arch << ": " << want_lp.size() << " logprobs, max |logprob diff| " << max_lp
                          << ", max |entropy diff| " << max_en);
  BOOST_TEST(max_lp <= 1e-4);
  BOOST_TEST(max_en <= 1e-4);

  hone::ModelWeights g = hone::allocate_weights(c);
  model.backward(dlogprob.data(), nullptr, g);
  const double worst = worst_gradient_error(g, ref, "grad.");
  BOOST_TEST_MESSAGE(arch << ": " << g.named_parameters().size() << " parameter gradients, worst relative L2 error "
                          << worst);
}

// The mixture of experts' load-balancing loss of each golden sequence (a forward of its own) and the gradient of
// their sum: hone's backward with no logprob gradient and the loss's weight 1.
void check_aux_loss(const std::string& arch) {
  const std::string dir = golden_dir(arch);
  const hone::ModelConfig c = hone::load_model_config(dir);
  hone::ModelWeights w = hone::allocate_weights(c);
  hone::load_weights(w, c, dir);
  const auto seqs = read_sequences(dir + "/sequences.jsonl");
  const Reference ref(dir + "/reference.safetensors");
  const auto want_aux = ref.get<float>("aux_loss", "F32");
  BOOST_TEST_REQUIRE(want_aux.size() == seqs.size());
  hone::Transformer model(c, w);
  hone::MoeFeedForward<hone::CpuBackend>* moe = model.moe();
  BOOST_TEST_REQUIRE(moe != nullptr);
  hone::MoeRouting aux;
  aux.aux_loss_weight = 1.0;
  hone::ModelWeights g = hone::allocate_weights(c);
  double max_diff = 0;
  for (size_t s = 0; s < seqs.size(); ++s) {
    const hone::PackedBatch b = hone::PackedBatch::pack({seqs[s]});
    model.forward(b, 1.f, false, true, nullptr, aux);
    max_diff = std::max(max_diff, std::fabs(moe->aux_loss({}) - double(want_aux[s])));
    const std::vector<float> zero(size_t(b.num_tokens()), 0.f);
    model.backward(zero.data(), nullptr, g);
  }
  BOOST_TEST(max_diff <= 1e-5, "aux loss: max |diff| " << max_diff);
  const double worst = worst_gradient_error(g, ref, "aux_grad.");
  BOOST_TEST_MESSAGE(arch << ": aux loss max |diff| " << max_diff << ", worst gradient relative L2 error " << worst);
}

// `hone logprobs` on the golden sequences reproduces the reference file's logprobs, entropies and offsets.
void check_logprobs_command(const std::string& arch) {
  const std::string dir = golden_dir(arch);
  const std::string out = test::temp_dir("hf_parity_logprobs_" + arch) + "/out.h5";
  std::string log;
  // 30 tokens per batch: the 5- and 17-token sequences share a batch, the 40-token one runs alone
  const int rc = test::run_command(test::hone_exe() + " logprobs --model " + dir + " --input " + dir +
                                       "/sequences.jsonl --output " + out + " --batch-tokens 30",
                                   &log);
  BOOST_TEST_REQUIRE(rc == 0, log);
  const Reference ref(dir + "/reference.safetensors");
  hone::Hdf5File f(out, hone::Hdf5File::Mode::read);
  BOOST_TEST(f.read_i64("/offsets") == ref.get<int64_t>("offsets", "I64"));
  for (const char* name : {"logprobs", "entropy"}) {
    const auto got = f.read_f32(std::string("/") + name);
    const auto want = ref.get<float>(name, "F32");
    BOOST_TEST_REQUIRE(got.size() == want.size());
    double max_diff = 0;
    for (size_t i = 0; i < got.size(); ++i) max_diff = std::max(max_diff, double(std::fabs(got[i] - want[i])));
    BOOST_TEST(max_diff <= 1e-4, name << ": max |diff| " << max_diff);
  }
}

}  // namespace

BOOST_AUTO_TEST_SUITE(hf_parity)

BOOST_AUTO_TEST_CASE(logprobs_command_qwen2, *boost::unit_test::precondition([](auto) { return has_goldens("qwen2"); })) {
  check_logprobs_command("qwen2");
}

BOOST_AUTO_TEST_CASE(llama, *boost::unit_test::precondition([](auto) { return has_goldens("llama"); })) {
  check_parity("llama");
}
BOOST_AUTO_TEST_CASE(qwen2, *boost::unit_test::precondition([](auto) { return has_goldens("qwen2"); })) {
  check_parity("qwen2");
}
BOOST_AUTO_TEST_CASE(qwen3, *boost::unit_test::precondition([](auto) { return has_goldens("qwen3"); })) {
  check_parity("qwen3");
}
BOOST_AUTO_TEST_CASE(qwen3_moe, *boost::unit_test::precondition([](auto) { return has_goldens("qwen3_moe"); })) {
  check_parity("qwen3_moe");
}
BOOST_AUTO_TEST_CASE(qwen3_moe_aux_loss,
                     *boost::unit_test::precondition([](auto) { return has_goldens("qwen3_moe"); })) {
  check_aux_loss("qwen3_moe");
}

BOOST_AUTO_TEST_SUITE_END()
