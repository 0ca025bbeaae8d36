// The container recipes (jobs/Dockerfile for Docker, jobs/hone.def for Apptainer), linted without building them:
// both start from the same CUDA image, of the CUDA major version the docs state; their build steps are the same
// commands in the same order, each valid shell (bash -n); they are the steps of `make deps` (mk/deps.sh) and the
// build for the bundle's GPUs (the Makefile's BUNDLE_SM).
#include <boost/test/unit_test.hpp>

#include <fstream>
#include <regex>
#include <sstream>
#include <string>
#include <vector>

#include "../common/paths.h"

namespace {

std::string text(const std::string& rel) {
  std::ifstream in(test::source_dir() + "/" + rel);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

std::vector<std::string> lines(const std::string& s) {
  std::vector<std::string> v;
  std::istringstream in(s);
  for (std::string l; std::getline(in, l);) v.push_back(l);
  return v;
}

std::string trim(const std::string& s) {
  const size_t a = s.find_first_not_of(" \t"), b = s.find_last_not_of(" \t");
  return a == std::string::npos ? "" : s.substr(a, b - a + 1);
}

// The Dockerfile's base image and RUN commands.
std::pair<std::string, std::vector<std::string>> docker() {
  std::string image;
  std::vector<std::string> steps;
  for (const std::string& l : lines(text("jobs/Dockerfile"))) {
    if (l.rfind("FROM ", 0) == 0) image = trim(l.substr(5));
    if (l.rfind("RUN ", 0) == 0) steps.push_back(trim(l.substr(4)));
  }
  return {image, steps};
}

// The Apptainer definition's base image and %post commands (its environment lines aside).
std::pair<std::string, std::vector<std::string>> apptainer() {
  std::string image, section;
  std::vector<std::string> steps;
  for (const std::string& l : lines(text("jobs/hone.def"))) {
    if (l.rfind("From:", 0) == 0) image = trim(l.substr(5));
    if (l.rfind("%", 0) == 0) {
      section = trim(l);
      continue;
    }
    const std::string t = trim(l);
    if (section == "%post" && !t.empty() && t.rfind("export ", 0) != 0 && t.rfind("cd ", 0) != 0) steps.push_back(t);
  }
  return {image, steps};
}

}  // namespace

BOOST_AUTO_TEST_SUITE(containers)

BOOST_AUTO_TEST_CASE(docker_and_apptainer_build_the_same_way) {
  const auto [dimage, dsteps] = docker();
  const auto [aimage, asteps] = apptainer();
  BOOST_TEST(!dimage.empty());
  BOOST_TEST(dimage == aimage);
  BOOST_TEST(dsteps == asteps, boost::test_tools::per_element());
  BOOST_REQUIRE_EQUAL(dsteps.size(), 3u);
  for (const std::string& s : dsteps) {
    std::string out;
    BOOST_TEST(test::run_command("bash -n -c '" + std::regex_replace(s, std::regex("'"), "'\\''") + "'", &out) == 0,
               s << ": " << out);
  }
}

BOOST_AUTO_TEST_CASE(the_steps_are_make_deps_and_the_bundle_build) {
  const auto [image, steps] = docker();
  BOOST_TEST(steps[0] == "apt-get update && bash mk/deps.sh");
  std::smatch m;
  const std::string makefile = text("Makefile");
  BOOST_REQUIRE(std::regex_search(makefile, m, std::regex("\\nBUNDLE_SM := ([0-9a ]+)\\n")));
  BOOST_TEST(steps[1] == "make -j\"$(nproc)\" SMS=\"" + m[1].str() + "\"");
  // The image's CUDA major version is the one the docs and the job scripts name.
  BOOST_REQUIRE(std::regex_search(image, m, std::regex("^nvidia/cuda:([0-9]+)\\.[0-9.]+-cudnn-devel-")));
  const std::string major = m[1].str();
  BOOST_TEST(text("doc/building.md").find("CUDA " + major + " ") != std::string::npos);
  BOOST_TEST(text("jobs/hone-1node.sbatch").find("cuda/" + major + ".") != std::string::npos);
  BOOST_TEST(text("jobs/hone-multinode.sbatch").find("cuda/" + major + ".") != std::string::npos);
}

BOOST_AUTO_TEST_SUITE_END()
