// The registry of GPU op checks and the one test case that runs all of them (see op_checks.h).
#include "op_checks.h"

#include <boost/test/unit_test.hpp>

#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <string>

#include "common/gpu.h"

namespace test {

static std::vector<OpCheck>& registry() {
  static std::vector<OpCheck> r;
  return r;
}

OpCheckRegistration::OpCheckRegistration(OpCheck c) { registry().push_back(std::move(c)); }

const std::vector<OpCheck>& op_checks() { return registry(); }

}  // namespace test

BOOST_AUTO_TEST_SUITE(gpu_ops)

// Every registered op over every shape; each (op, shape) is one assertion with its error and tolerance.
BOOST_AUTO_TEST_CASE(every_cuda_op_matches_its_cpu_twin, *boost::unit_test::precondition(test::needs_gpu)) {
  BOOST_TEST_REQUIRE(!test::op_checks().empty());
  std::mt19937_64 rng(20261122);
  // HONE_OP_CHECKS=text runs only the ops whose name contains it (a quick look at one op on a GPU machine).
  const char* only = std::getenv("HONE_OP_CHECKS");
  for (const auto& check : test::op_checks()) {
    if (only && check.name.find(only) == std::string::npos) continue;
    for (const auto& shape : check.shapes) {
      std::string s;
      for (size_t i = 0; i < shape.size(); ++i) s += (i ? "x" : "") + std::to_string(shape[i]);
      double err = INFINITY;
      try {
        err = check.run(shape, rng);
      } catch (const std::exception& e) {
        BOOST_ERROR(check.name << " [" << s << "] threw: " << e.what());
        continue;
      }
      std::printf("  %-32s %-20s rel_l2 %.3e (tolerance %.0e)\n", check.name.c_str(), s.c_str(), err, check.tolerance);
      BOOST_TEST(err <= check.tolerance, check.name << " [" << s << "]: relative L2 error " << err
                                                    << " above its tolerance " << check.tolerance);
    }
  }
}

BOOST_AUTO_TEST_SUITE_END()
