// Constructors of the individual synthetic tasks (internal to src/data; use make_synthetic_task()).
#pragma once

#include <memory>

#include "data/data_rng.h"
#include "data/synthetic_task.h"

namespace hone::data {

std::unique_ptr<SyntheticTask> make_arithmetic_task(const SyntheticTaskOptions& options);
std::unique_ptr<SyntheticTask> make_countdown_task(const SyntheticTaskOptions& options);
std::unique_ptr<SyntheticTask> make_sequence_task(const SyntheticTaskOptions& options);  // sort | reverse
std::unique_ptr<SyntheticTask> make_random_tokens_task(const SyntheticTaskOptions& options);  // benchmarks

// A random integer with a digit count in [min_digits, max_digits] (one-digit numbers include 0 unless nonzero).
int64_t random_operand(DataRng& rng, int min_digits, int max_digits, bool nonzero);

}  // namespace hone::data
