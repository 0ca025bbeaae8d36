// The [validation] keys and the metrics of one validation (see validation.h).
#include "rl/validation.h"

#include <algorithm>
#include <cstdio>
#include <filesystem>

#include "config/config.h"
#include "data/data_rng.h"
#include "io/step_output.h"
#include "runtime/error.h"
#include "runtime/log.h"

namespace hone::rl {

uint64_t ValidationSettings::stream_key() const {
  // "VALIDATE": mixed into the seed so that validation.seed = run.seed still draws apart from training.
  return data::mix_keys(seed, 0x56414C4944415445ull);
}

ValidationSettings read_validation_settings(const Config& c) {
  ValidationSettings v;
  v.every = c.get_int("validation.every");
  v.at_start = c.get_bool("validation.at_start");
  v.path = c.get_string("validation.path");
  v.seed = uint64_t(c.get_int("validation.seed"));
  v.max_samples = c.get_int("validation.max_samples");
  v.generations = c.get_int("validation.num_generations");
  const double t = c.get_float("validation.temperature");
  v.sampling.greedy = t == 0.0;
  v.sampling.temperature = t == 0.0 ? 1.0f : float(t);
  v.sampling.top_p = float(c.get_float("validation.top_p"));
  if (v.enabled() && !v.path.empty()) {
    std::error_code ec;
    HONE_USER_CHECK(std::filesystem::is_regular_file(v.path, ec), key_location(c, "validation.path"),
                    ": validation.path = \"", v.path, "\": ",
                    std::filesystem::is_directory(v.path, ec) ? "a folder, not a JSONL file" : "no such file");
    // Validating on the training prompts measures memorisation, not generalisation: allowed, said once.
    if (c.has_value("data.path") && c.get_string("data.task") == "jsonl") {
      const std::string data = c.get_string("data.path");
      if (std::filesystem::exists(data, ec) && std::filesystem::equivalent(data, v.path, ec))
        log_warn("validation.path is data.path (", v.path, "): the validation prompts are training prompts, so its "
                 "accuracy measures what was trained on, not generalisation");
    }
  }
  return v;
}

void ValidationTotals::add(const ValidationProblem& p) {
  sum[kProblems] += 1;
  sum[kSamples] += double(p.samples);
  sum[kCorrect] += double(p.correct);
  sum[kSolved] += p.correct > 0 ? 1 : 0;
  sum[kReward] += p.reward;
  sum[kTokens] += double(p.tokens);
  sum[kTruncated] += double(p.truncated);
  max_tokens = std::max(max_tokens, double(p.max_tokens));
}

void ValidationTotals::set_metrics(StepRow& row) const {
  const double n = sum[kSamples], problems = sum[kProblems];
  if (n > 0) {
    row.set("accuracy", sum[kCorrect] / n);
    row.set("pass_at_k", sum[kSolved] / problems);
    row.set("reward/mean", sum[kReward] / n);
    row.set("generated_tokens/mean", sum[kTokens] / n);
    row.set("generated_tokens/max", max_tokens);
    row.set("truncation_rate", sum[kTruncated] / n);
  }
  row.set("problems", problems);
  row.set("samples", n);
  row.set("prompts_too_long", sum[kTooLong]);
  row.set("time/validation", seconds);
  if (seconds > 0 && sum[kTokens] > 0) row.set("tokens_per_s/validation", sum[kTokens] / seconds);
}

std::string format_validation_line(const StepRow& row, int64_t k) {
  auto v = [&](const char* m) { return row.get(m).value_or(0.0); };
  char buf[320];
  if (v("samples") == 0) {
    std::snprintf(buf, sizeof buf, "validation at step %lld: no problem fits the length limit (%.0f left out)",
                  static_cast<long long>(row.step()), v("prompts_too_long"));
    return buf;
  }
  std::snprintf(buf, sizeof buf,
                "validation at step %lld: accuracy %.4f, pass@%lld %.4f, reward %.4f, %.1f tokens (max %.0f), "
                "truncated %.3f; %.0f problems x %lld in %.3f s",
                static_cast<long long>(row.step()), v("accuracy"), static_cast<long long>(k), v("pass_at_k"),
                v("reward/mean"), v("generated_tokens/mean"), v("generated_tokens/max"), v("truncation_rate"),
                v("problems"), static_cast<long long>(k), v("time/validation"));
  std::string s = buf;
  if (v("prompts_too_long") > 0) s += cat(" (", v("prompts_too_long"), " too long, left out)");
  return s;
}

}  // namespace hone::rl
