// The data-driven GPU op test: every CUDA op is compared with its fp32 CPU twin over a list of shapes.
// Each op family registers its checks in its own file (tests/gpu/check_<family>.cpp):
//
//   static const test::OpCheckRegistration reg{{"rmsnorm_forward", 1e-2, {{7, 33}, {64, 1024}}, &check_rmsnorm}};
//
// A check receives one shape and a seeded RNG, draws FRESH random inputs, poisons every GPU output with NaN before
// running the op (so an unwritten element fails), runs the CUDA op and the CPU op on the same inputs (the CPU
// gets the bf16-rounded values as fp32), and returns the worst relative L2 error over the op's outputs
// (||gpu - cpu|| / ||cpu||). NaN or Inf anywhere makes the error +Inf: NaN never passes.
#pragma once

#include <cstdint>
#include <functional>
#include <random>
#include <string>
#include <vector>

#include "common/compare.h"

namespace test {

using OpShape = std::vector<int64_t>;

struct OpCheck {
  std::string name;                // the op, e.g. "rmsnorm_backward"
  double tolerance;                // bf16 paths: <= 1e-2; fp32 paths: 1e-5 (relative L2)
  std::vector<OpShape> shapes;     // include odd sizes
  std::function<double(const OpShape&, std::mt19937_64&)> run;  // worst relative L2 error of this shape
};

struct OpCheckRegistration {
  explicit OpCheckRegistration(OpCheck c);
};

const std::vector<OpCheck>& op_checks();

// ||a - b|| / ||b|| over n values, +Inf if any value of a or b is not finite (b == 0 everywhere: ||a - b||).

}  // namespace test
