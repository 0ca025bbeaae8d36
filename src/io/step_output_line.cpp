// The per-step stdout line (see step_output_line.h).
#include "io/step_output_line.h"

#include <cmath>
#include <cstdio>
#include <vector>

#include "io/step_output.h"

namespace hone {

namespace {

struct Column {
  const char* title;
  const char* metric;
  const char* format;  // printf format of one double, width 9, after one space (a wide value never runs into its neighbour)
};

const std::vector<Column>& columns() {
  static const std::vector<Column> cols = {
      {"gen_s", "time/generation", "%9.3f"},    {"reward_s", "time/reward", "%9.3f"},
      {"logprob_s", "time/logprob", "%9.3f"},   {"train_s", "time/training", "%9.3f"},
      {"refit_s", "time/refit", "%9.3f"},       {"total_s", "time/total", "%9.3f"},
      {"reward", "reward/mean", "%9.4f"},       {"kl", "kl", "%9.3e"},
      {"gen_tok/s", "tokens_per_s/generation", "%9.1f"}, {"trn_tok/s", "tokens_per_s/training", "%9.1f"},
  };
  return cols;
}

}  // namespace

std::string step_line_header() {
  std::string s;
  char buf[32];
  std::snprintf(buf, sizeof buf, "%8s", "step");
  s += buf;
  for (const auto& c : columns()) {
    std::snprintf(buf, sizeof buf, " %9s", c.title);
    s += buf;
  }
  return s;
}

std::string format_step_line(const StepRow& row) {
  std::string s;
  char buf[64];
  std::snprintf(buf, sizeof buf, "%8lld", static_cast<long long>(row.step()));
  s += buf;
  for (const auto& c : columns()) {
    s += ' ';
    auto v = row.get(c.metric);
    if (v && !std::isnan(*v)) {
      std::snprintf(buf, sizeof buf, c.format, *v);
    } else {
      std::snprintf(buf, sizeof buf, "%9s", "-");
    }
    s += buf;
  }
  return s;
}

}  // namespace hone
