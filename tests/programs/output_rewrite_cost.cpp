// Measures what rewriting the whole output file after every step costs as the history grows (doc/output.md,
// "Cost"): writes steps with every catalog metric and reports the time of one rewrite (write, fsync, rename) at
// a few history lengths.
//
//   output_rewrite_cost <dir> [max_steps=10000]
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <set>
#include <string>

#include "io/output_metrics.h"
#include "io/step_output.h"

int main(int argc, char** argv) {
  if (argc < 2) {
    std::fprintf(stderr, "usage: %s <dir> [max_steps]\n", argv[0]);
    return 2;
  }
  const int64_t max_steps = argc > 2 ? std::atoll(argv[2]) : 10000;
  hone::StepOutputOptions o;
  o.dir = argv[1];
  o.run_name = "rewrite_cost";
  o.overwrite = true;
  o.sample_every = 10;
  o.deck_toml = std::string(4000, '#');
  hone::StepOutput out(o);
  const std::set<int64_t> report = {10, 100, 1000, 2000, 5000, 10000, 20000};
  std::printf("%8s %8s %12s %12s\n", "steps", "metrics", "rewrite_ms", "file_bytes");
  for (int64_t step = 1; step <= max_steps; ++step) {
    hone::StepRow row(step);
    int k = 0;
    for (const auto& m : hone::metric_catalog()) row.set(m.name, step * 0.001 + k++);
    for (int i = 0; i < 4 && out.sample_due(step); ++i)
      row.add_sample(std::string(300, 'p'), std::string(1500, 'c'), 0.5);
    const auto t0 = std::chrono::steady_clock::now();
    out.append(row);
    const double ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
    if (report.count(step))
      std::printf("%8lld %8zu %12.2f %12llu\n", static_cast<long long>(step), out.metric_names().size(), ms,
                  static_cast<unsigned long long>(std::filesystem::file_size(out.path())));
  }
  return 0;
}
