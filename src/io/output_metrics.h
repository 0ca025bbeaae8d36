// The catalog of step metrics hone writes to /steps in the output file: the unit and a one-line description of
// each. StepOutput takes a metric's unit and description from here unless the caller declares them itself;
// doc/output.md lists the same table for users.
#pragma once

#include <string>
#include <vector>

namespace hone {

struct MetricInfo {
  std::string name;         // e.g. "time/generation"; '/' makes nested groups under /steps
  std::string unit;         // "s", "bytes", "tokens", "tokens/s", "1" for dimensionless
  std::string description;
};

// The catalog entry for a metric name, or nullptr when the name is not in the catalog.
const MetricInfo* find_metric_info(const std::string& name);

// Every catalog entry, in the order of doc/output.md.
const std::vector<MetricInfo>& metric_catalog();

// The metrics of a validation (/validation in the output file), in the order of doc/output.md.
const std::vector<MetricInfo>& validation_metric_catalog();
const MetricInfo* find_validation_metric_info(const std::string& name);

// The phase names of one GRPO step, in order: generation, reward, logprob, training, refit, total.
const std::vector<std::string>& step_phases();

// Whether `name` is a valid metric name: segments of [A-Za-z0-9_.-] separated by single '/', no segment "." or "..".
bool valid_metric_name(const std::string& name);

}  // namespace hone
