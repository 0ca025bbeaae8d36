// The GPU architectures of the bundle (doc/building.md, "Bundles"; mk/check-bundle-archs.sh): the check names an
// architecture whose machine code a binary lacks, and a missing PTX of the newest, on a kernel compiled here for
// two of them; and where this tree has made a bundle (make bundle: dist/), its hone and GPU suite carry the machine
// code of every architecture its env.sh names (HONE_GPU_ARCHS: the Makefile's BUNDLE_SM) and the PTX of the
// newest. The cases skip, saying so, without the CUDA toolkit's nvcc, without cuobjdump (make deps fetches it), or
// before make bundle.
#include <boost/test/unit_test.hpp>

#include <filesystem>
#include <fstream>
#include <regex>
#include <sstream>
#include <string>

#include "common/paths.h"

namespace fs = std::filesystem;

namespace {

std::string nvcc() {
  const char* home = std::getenv("CUDA_HOME");
  return std::string(home && *home ? home : "/usr/local/cuda") + "/bin/nvcc";
}

std::string script() { return "bash " + test::source_dir() + "/mk/check-bundle-archs.sh "; }

bool have_cuobjdump() { return test::run_command(script() + "--find") == 0; }

boost::test_tools::assertion_result toolkit_and_cuobjdump(boost::unit_test::test_unit_id) {
  boost::test_tools::assertion_result r(fs::exists(nvcc()) && have_cuobjdump());
  if (!fs::exists(nvcc()))
    r.message() << "skipped: no CUDA toolkit (" << nvcc() << ")";
  else if (!r)
    r.message() << "skipped: no cuobjdump (make deps fetches nvidia-cuda-cuobjdump from PyPI; it could not)";
  return r;
}

// The newest bundle make bundle wrote in this tree (dist/hone-<version>-linux-<arch>/), empty if none.
std::string bundle_dir() {
  std::string found;
  const fs::path dist = fs::path(test::source_dir()) / "dist";
  if (fs::is_directory(dist))
    for (const auto& e : fs::directory_iterator(dist))
      if (e.is_directory() && fs::exists(e.path() / "env.sh") && e.path().filename().string().rfind("hone-", 0) == 0)
        found = e.path().string();
  return found;
}

// The architectures a bundle says it carries (env.sh's HONE_GPU_ARCHS; empty: a CPU-only bundle).
std::string claimed_archs(const std::string& bundle) {
  std::ifstream in(bundle + "/env.sh");
  std::smatch m;
  for (std::string l; std::getline(in, l);)
    if (std::regex_match(l, m, std::regex("HONE_GPU_ARCHS=\"([0-9a ]*)\""))) return m[1].str();
  return "";
}

boost::test_tools::assertion_result bundle_built(boost::unit_test::test_unit_id) {
  const std::string b = bundle_dir();
  const bool cuda_bundle = !b.empty() && !claimed_archs(b).empty() && fs::exists(b + "/bin/gpu_tests");
  boost::test_tools::assertion_result r(cuda_bundle && have_cuobjdump());
  if (!cuda_bundle)
    r.message() << "skipped: no CUDA bundle in " << test::source_dir() << "/dist (make bundle writes one)";
  else if (!r)
    r.message() << "skipped: no cuobjdump (make deps fetches nvidia-cuda-cuobjdump from PyPI; it could not)";
  return r;
}

std::string text(const std::string& path) {
  std::ifstream in(path);
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

}  // namespace

BOOST_AUTO_TEST_SUITE(bundle_archs)

// A kernel with machine code for sm_80 and sm_90a and the PTX of sm_90a: the check passes for exactly those, and
// names what is missing or extra otherwise.
BOOST_AUTO_TEST_CASE(check_names_what_a_binary_lacks, *boost::unit_test::precondition(toolkit_and_cuobjdump)) {
  const std::string dir = test::temp_dir("bundle-archs");
  std::ofstream(dir + "/k.cu") << "__global__ void k(float* x) { x[threadIdx.x] += 1.f; }\n";
  std::string out;
  BOOST_REQUIRE_EQUAL(test::run_command(nvcc() + " -c " + dir + "/k.cu -o " + dir + "/k.o" +
                                            " -gencode=arch=compute_80,code=sm_80"
                                            " -gencode=arch=compute_90a,code=sm_90a"
                                            " -gencode=arch=compute_90a,code=compute_90a",
                                        &out),
                      0);
  const std::string k = dir + "/k.o";
  // A path relative to the caller's folder, as make bundle passes them.
  BOOST_TEST(test::run_command("cd " + dir + " && " + script() + "'80 90a' k.o", &out) == 0, out);
  BOOST_TEST(out.find("k.o (0.0 MB): sm_80 (1 cubins") != std::string::npos, out);
  BOOST_TEST(test::run_command(script() + "'80 90a' " + k, &out) == 0, out);
  BOOST_TEST(out.find("sm_80 (1 cubins") != std::string::npos, out);
  BOOST_TEST(out.find("sm_90a (1 cubins") != std::string::npos, out);
  BOOST_TEST(out.find("PTX sm_90a (1 files") != std::string::npos, out);

  BOOST_TEST(test::run_command(script() + "'80 86 90a' " + k, &out) == 1, out);
  BOOST_TEST(out.find("lacks sm_86 (built for: 80 86 90a)") != std::string::npos, out);
  // The newest is sm_100: no machine code of it, no PTX of it, and PTX of another architecture instead.
  BOOST_TEST(test::run_command(script() + "'80 90a 100' " + k, &out) == 1, out);
  BOOST_TEST(out.find("lacks sm_100, PTX of sm_100") != std::string::npos, out);
  BOOST_TEST(out.find("PTX of an architecture other than sm_100") != std::string::npos, out);
  BOOST_TEST(test::run_command(script() + "'90a' " + k, &out) == 1, out);
  BOOST_TEST(out.find("holds machine code for sm_80 besides 90a") != std::string::npos, out);
}

// The bundle's hone and GPU suite hold the machine code of every architecture its env.sh names and the PTX of the
// newest; a bundle of the Makefile's BUNDLE_SM (make bundle) names the five GPU generations.
BOOST_AUTO_TEST_CASE(bundle_holds_every_architecture, *boost::unit_test::precondition(bundle_built)) {
  const std::string b = bundle_dir(), archs = claimed_archs(b);
  std::smatch m;
  const std::string makefile = text(test::source_dir() + "/Makefile");
  BOOST_REQUIRE(std::regex_search(makefile, m, std::regex("\\nBUNDLE_SM := ([0-9a ]+)\\n")));
  if (archs != m[1].str())
    BOOST_TEST_MESSAGE(b << " is built for " << archs << ", not BUNDLE_SM (" << m[1].str() << "): a quick bundle");
  std::string out;
  const int rc = test::run_command(script() + "'" + archs + "' " + b + "/bin/hone " + b + "/bin/gpu_tests", &out);
  BOOST_TEST_MESSAGE("bundle architectures:\n" << out);
  BOOST_TEST(rc == 0, out);
}

BOOST_AUTO_TEST_SUITE_END()
