// The catalog of step metrics (see output_metrics.h). Adding a metric to the loop means adding a line here and to
// the table in doc/output.md.
#include "io/output_metrics.h"

namespace hone {

const std::vector<std::string>& step_phases() {
  static const std::vector<std::string> phases = {"generation", "reward", "logprob", "training", "refit", "total"};
  return phases;
}

namespace {

std::vector<MetricInfo> build_catalog() {
  std::vector<MetricInfo> c;
  for (const auto& p : step_phases())
    c.push_back({"time/" + p, "s", p == "total" ? "wall time of the whole step" : "wall time of the " + p + " phase"});
  c.push_back({"reward/mean", "1", "mean reward over the step's samples"});
  c.push_back({"reward/std", "1", "standard deviation of the rewards over the step's samples"});
  c.push_back({"reward/min", "1", "smallest reward of the step"});
  c.push_back({"reward/max", "1", "largest reward of the step"});
  c.push_back({"accuracy", "1", "fraction of samples whose answer is correct"});
  c.push_back({"advantages/mean", "1", "mean advantage over the step's samples"});
  c.push_back({"advantages/min", "1", "smallest advantage of the step"});
  c.push_back({"advantages/max", "1", "largest advantage of the step"});
  c.push_back({"loss", "1", "policy loss (with the KL term when loss.kl_coef > 0), mean over micro-batches"});
  c.push_back({"kl", "nats", "mean per-token KL divergence from the reference policy"});
  c.push_back({"entropy", "nats", "mean per-token entropy of the policy on the generated tokens"});
  c.push_back({"clip_fraction", "1", "fraction of trained tokens whose importance ratio was clipped"});
  c.push_back({"ratio/min", "1", "smallest importance ratio pi/pi_old on trained tokens"});
  c.push_back({"ratio/mean", "1", "mean importance ratio pi/pi_old on trained tokens"});
  c.push_back({"ratio/max", "1", "largest importance ratio pi/pi_old on trained tokens"});
  c.push_back({"token_mult_prob_error", "1",
               "exp(mean |training logprob - generation logprob|) over generated tokens; 1.0 means the engines agree"});
  c.push_back({"grad_norm", "1", "global L2 norm of the gradient before clipping"});
  c.push_back({"lr", "1", "learning rate used by this step's optimizer update"});
  c.push_back({"prompt_tokens", "tokens", "prompt tokens of the step, summed over all ranks"});
  c.push_back({"generated_tokens/mean", "tokens", "mean generated tokens per sample"});
  c.push_back({"generated_tokens/max", "tokens", "most generated tokens of one sample"});
  c.push_back({"truncation_rate", "1", "fraction of samples stopped by the length limit"});
  for (const auto& p : step_phases())
    c.push_back({"tokens_per_s/" + p, "tokens/s",
                 p == "generation" ? "generated tokens per second of the generation phase"
                 : p == "total"    ? "tokens processed per second of the whole step"
                                   : "tokens processed per second of the " + p + " phase"});
  c.push_back({"packing_efficiency", "1", "fraction of packed micro-batch token slots holding real tokens"});
  for (const auto& p : step_phases())
    c.push_back({"memory/peak_" + p, "bytes",
                 "peak device memory in use during " + (p == "total" ? std::string("the whole step")
                                                                     : "the " + p + " phase") + " (the largest rank's)"});
  return c;
}

}  // namespace

const std::vector<MetricInfo>& metric_catalog() {
  static const std::vector<MetricInfo> catalog = build_catalog();
  return catalog;
}

const MetricInfo* find_metric_info(const std::string& name) {
  for (const auto& m : metric_catalog())
    if (m.name == name) return &m;
  return nullptr;
}

const std::vector<MetricInfo>& validation_metric_catalog() {
  static const std::vector<MetricInfo> catalog = {
      {"accuracy", "1", "fraction of validation samples whose answer is correct (pass@1, averaged over the k samples of each problem)"},
      {"pass_at_k", "1", "fraction of validation problems with at least one correct answer among their k samples (k = validation.num_generations)"},
      {"reward/mean", "1", "mean reward over the validation samples"},
      {"generated_tokens/mean", "tokens", "mean generated tokens per validation sample"},
      {"generated_tokens/max", "tokens", "most generated tokens of one validation sample"},
      {"truncation_rate", "1", "fraction of validation samples stopped by the length limit"},
      {"problems", "1", "validation problems generated for (over all ranks)"},
      {"samples", "1", "validation samples (problems x k)"},
      {"prompts_too_long", "1", "validation problems left out because prompt + max_new_tokens exceeds the length limit"},
      {"time/validation", "s", "wall time of the validation (the slowest rank's); not part of any step's time"},
      {"tokens_per_s/validation", "tokens/s", "generated tokens per second of the validation"},
  };
  return catalog;
}

const MetricInfo* find_validation_metric_info(const std::string& name) {
  for (const auto& m : validation_metric_catalog())
    if (m.name == name) return &m;
  return nullptr;
}

bool valid_metric_name(const std::string& name) {
  if (name.empty()) return false;
  size_t start = 0;
  while (true) {
    size_t end = name.find('/', start);
    std::string seg = name.substr(start, end == std::string::npos ? std::string::npos : end - start);
    if (seg.empty() || seg == "." || seg == "..") return false;
    for (char ch : seg) {
      bool ok = (ch >= 'a' && ch <= 'z') || (ch >= 'A' && ch <= 'Z') || (ch >= '0' && ch <= '9') || ch == '_' ||
                ch == '.' || ch == '-';
      if (!ok) return false;
    }
    if (end == std::string::npos) return true;
    start = end + 1;
  }
}

}  // namespace hone
