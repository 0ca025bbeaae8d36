// Tokenizer speed: single-threaded encode throughput on the parity corpus and the time to encode a rollout
// batch of 512 prompts, for both real tokenizer files. Compare with `tools/tokenizer_reference.py --bench`
// (HF tokenizers, single-threaded), which cuts the same prompts.
//
//   build/tests/programs/bench_tokenizer [TOKENIZERS_DIR]   (default ../shared/data/tokenizers)
#include <chrono>
#include <ctime>
#include <cstdio>
#include <fstream>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "tokenizer/tokenizer.h"
#include "tokenizer/utf8.h"

namespace {

constexpr size_t kBatch = 512, kPromptBytes = 440;  // as in tools/tokenizer_reference.py

// Single-threaded figures use the process's CPU time (like Python's time.process_time() on the reference side):
// on a shared machine wall-clock time mostly measures the other processes. The OpenMP batch uses wall time.
double cpu_seconds() {
  timespec t{};
  clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &t);
  return static_cast<double>(t.tv_sec) + 1e-9 * static_cast<double>(t.tv_nsec);
}

double seconds_since(std::chrono::steady_clock::time_point t0) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}

std::vector<std::string> read_corpus(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) throw std::runtime_error("cannot open " + path);
  std::vector<std::string> texts;
  std::string line;
  while (std::getline(in, line)) {
    if (line.empty()) continue;
    const auto e = nlohmann::json::parse(line);
    if (e.contains("text")) {
      texts.push_back(e.at("text").get<std::string>());
    } else {
      const std::string hex = e.at("hex").get<std::string>();
      std::string bytes;
      for (size_t i = 0; i + 1 < hex.size(); i += 2) bytes += static_cast<char>(std::stoi(hex.substr(i, 2), nullptr, 16));
      texts.push_back(bytes);
    }
  }
  return texts;
}

}  // namespace

int main(int argc, char** argv) {
  const std::string dir = argc > 1 ? argv[1] : "../shared/data/tokenizers";
  const auto texts = read_corpus("tests/data/tokenizer/corpus.jsonl");
  size_t bytes = 0;
  std::string blob;
  for (size_t i = 0; i < texts.size(); ++i) {
    bytes += texts[i].size();
    blob += (i ? "\n" : "") + texts[i];
  }
  // Prompts: byte slices of the joined corpus with invalid bytes repaired (the text the Python side cuts).
  const std::string repaired = hone::tok::utf8_lossy(blob);
  std::vector<std::string> prompts;
  const size_t step = (repaired.size() - kPromptBytes) / kBatch;
  for (size_t k = 0; k < kBatch; ++k) prompts.push_back(repaired.substr(k * step, kPromptBytes));
  std::printf("hone tokenizer, single-threaded; corpus %zu entries, %zu bytes\n", texts.size(), bytes);
  for (const char* name : {"qwen3", "llama3_1"}) {
    auto t0 = std::chrono::steady_clock::now();
    const auto tok = hone::load_tokenizer("hf", dir + "/" + name);
    const double load_s = seconds_since(t0);

    double first = 0, best = 1e9;
    size_t tokens = 0;
    for (int rep = 0; rep < 4; ++rep) {
      const double c0 = cpu_seconds();
      tokens = 0;
      for (const auto& t : texts) tokens += tok->encode(t).size();
      const double s = cpu_seconds() - c0;
      if (rep == 0) first = s;
      best = std::min(best, s);
    }
    double pbest = 1e9, bbest = 1e9;
    size_t ptokens = 0;
    for (int rep = 0; rep < 5; ++rep) {
      const double c0 = cpu_seconds();
      ptokens = 0;
      for (const auto& p : prompts) ptokens += tok->encode(p).size();
      pbest = std::min(pbest, cpu_seconds() - c0);
      t0 = std::chrono::steady_clock::now();
      const auto batch = tok->encode_batch(prompts);
      bbest = std::min(bbest, seconds_since(t0));
    }
    std::printf("%-9s load %.2f s wall | encode one by one (CPU time): first pass %.2f MB/s, best %.2f MB/s, %.0f tokens/s (%zu tokens)"
                " | rollout batch %zu prompts (%.0f tokens avg): %.2f ms CPU single-threaded, %.2f ms wall encode_batch (OpenMP)\n",
                name, load_s, bytes / first / 1e6, bytes / best / 1e6, tokens / best, tokens, prompts.size(),
                static_cast<double>(ptokens) / prompts.size(), pbest * 1e3, bbest * 1e3);
  }
  return 0;
}
