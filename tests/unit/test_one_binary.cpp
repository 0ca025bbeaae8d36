// One binary that runs anywhere (doc/building.md, "One binary"; mk/bundle.sh):
//   * build/hone links directly only glibc, libgcc_s, MPI and the CUDA libraries, and everything `ldd` lists is one
//     of those or something MPI or a CUDA library links itself (HDF5, TOML++, PCRE2, utf8proc, OpenBLAS, libgomp
//     and libstdc++ are inside the executable);
//   * no ELF file of the bundle outside its own MPI needs a glibc newer than 2.34 (RHEL 9, Ubuntu 22.04), read
//     from the GLIBC_ versions of its dynamic symbols (objdump -T); the bundle's MPI records what it needs;
//   * the bundle carries no fabric library, and env.sh picks the machine's Open MPI when there is one (nothing of
//     the bundle's MPI on the paths then) and the bundle's otherwise, whose relocated launcher, plugins and PMIx run
//     two ranks without a warning.
#include <boost/test/unit_test.hpp>

#include <filesystem>
#include <fstream>
#include <map>
#include <regex>
#include <set>
#include <sstream>
#include <string>
#include <vector>

#include "common/paths.h"

namespace fs = std::filesystem;

namespace {

const char* const kGlibcFamily = R"(^(linux-vdso|ld-linux[a-z0-9_-]*|libc|libm|libdl|librt|libpthread|libutil|libresolv)\.so)";
const char* const kGccRuntime = R"(^libgcc_s\.so)";
const char* const kCuda = R"(^(libcuda|libcudart|libcublas|libcublasLt|libcudnn[a-z_]*|libnccl|libnvrtc|libnvJitLink)\.so)";
const char* const kFabric = R"(^(libibverbs|librdmacm|libfabric|libuc[mpst]|libpsm2|libpsm_infinipath|libefa)\.so)";

bool matches(const std::string& name, const char* re) { return std::regex_search(name, std::regex(re)); }

std::string output_of(const std::string& cmd) {
  std::string out;
  const int rc = test::run_command(cmd, &out);
  BOOST_TEST_REQUIRE(rc == 0, cmd << ": " << out);
  return out;
}

// `ldd file`: library name -> path ("not found" when the loader finds none).
std::map<std::string, std::string> ldd(const std::string& file) {
  std::map<std::string, std::string> libs;
  std::istringstream in(output_of("ldd " + file));
  for (std::string line; std::getline(in, line);) {
    std::istringstream w(line);
    std::string name, arrow, path;
    w >> name >> arrow >> path;
    if (name.empty() || name == "statically") continue;
    libs[fs::path(name).filename().string()] = arrow == "=>" ? (path == "not" ? "not found" : path) : name;
  }
  return libs;
}

std::vector<std::string> needed(const std::string& file) {
  std::vector<std::string> out;
  std::istringstream in(output_of("objdump -p " + file));
  for (std::string line; std::getline(in, line);) {
    std::istringstream w(line);
    std::string tag, lib;
    if (w >> tag >> lib && tag == "NEEDED") out.push_back(lib);
  }
  return out;
}

// The newest GLIBC_x.y[.z] version among a file's dynamic symbols ("" when none), compared as versions.
std::vector<int> version_of(const std::string& v) {
  std::vector<int> parts;
  std::istringstream in(v);
  for (std::string p; std::getline(in, p, '.');) parts.push_back(std::stoi(p));
  return parts;
}
std::string newest_glibc(const std::string& file) {
  std::string out;
  test::run_command("objdump -T " + file + " 2>/dev/null", &out);
  std::string best;
  const std::regex re(R"(\(?GLIBC_([0-9]+(\.[0-9]+)+)\)?)");
  for (std::sregex_iterator it(out.begin(), out.end(), re), end; it != end; ++it) {
    const std::string v = (*it)[1];
    if (best.empty() || version_of(v) > version_of(best)) best = v;
  }
  return best;
}

bool is_elf(const fs::path& p) {
  if (!fs::is_regular_file(p) || fs::is_symlink(p)) return false;
  std::ifstream in(p, std::ios::binary);
  char m[4] = {};
  in.read(m, 4);
  return in.gcount() == 4 && m[0] == 0x7f && m[1] == 'E' && m[2] == 'L' && m[3] == 'F';
}

std::string version_file() {
  std::ifstream in(test::source_dir() + "/VERSION");
  std::string v;
  in >> v;
  return v;
}

// A sanitizer build (make test SANITIZE=...) links the sanitizers' runtimes and libstdc++ dynamically by design: what
// these cases check is the release build.
boost::test_tools::assertion_result release_build(boost::unit_test::test_unit_id) {
#if defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_THREAD__)
  boost::test_tools::assertion_result r(false);
  r.message() << "skipped: a sanitizer build links its runtimes dynamically (these cases check the release build)";
  return r;
#else
  return true;
#endif
}

}  // namespace

BOOST_AUTO_TEST_SUITE(one_binary, *boost::unit_test::precondition(release_build))

BOOST_AUTO_TEST_CASE(hone_links_only_glibc_mpi_and_cuda) {
  const std::string hone = test::hone_exe();
  for (const std::string& lib : needed(hone)) {
    const bool ok = matches(lib, kGlibcFamily) || matches(lib, kGccRuntime) || matches(lib, kCuda) || lib == "libmpi.so.40";
    BOOST_TEST(ok, "build/hone links " << lib << " directly: link it statically (Makefile, STATIC_LIBS) or say in "
                                          "doc/building.md why it stays dynamic");
  }
  // Everything the loader brings: glibc, the GCC runtime, MPI and what it links, CUDA and what it links.
  const auto libs = ldd(hone);
  std::set<std::string> allowed;
  for (const auto& [name, path] : libs) {
    if (name == "libmpi.so.40") BOOST_TEST_REQUIRE(path != "not found", "libmpi.so.40 not found: cannot tell what it links");
    // A CUDA library the loader does not find here (a build machine without the toolkit's libraries on its path)
    // brings nothing either.
    if ((name == "libmpi.so.40" || matches(name, kCuda)) && path != "not found")
      for (const auto& [dep, p] : ldd(path)) allowed.insert(dep);
  }
  BOOST_TEST(libs.count("libmpi.so.40") == 1u);
  for (const auto& [name, path] : libs) {
    const bool ok = matches(name, kGlibcFamily) || matches(name, kGccRuntime) || matches(name, kCuda) ||
                    name == "libmpi.so.40" || allowed.count(name);
    BOOST_TEST(ok, "ldd build/hone lists " << name << " (" << path << "), neither glibc, MPI, CUDA nor theirs");
  }
  for (const char* inside : {"hdf5", "toml", "pcre2", "utf8proc", "openblas", "gfortran", "gomp", "curl", "stdc++"})
    for (const std::string& lib : needed(hone))
      BOOST_TEST(lib.find(inside) == std::string::npos, "build/hone links " << lib);
}

BOOST_AUTO_TEST_CASE(hone_needs_glibc_2_34_at_most) {
  const std::string v = newest_glibc(test::hone_exe());
  BOOST_TEST_MESSAGE("build/hone needs GLIBC_" << v);
  BOOST_TEST_REQUIRE(!v.empty());
  BOOST_TEST(version_of(v) <= version_of("2.34"), "build/hone needs GLIBC_" << v << " (> 2.34)");
  // The C++ runtime is inside: no GLIBCXX_ or CXXABI_ symbol comes from a shared libstdc++.
  std::string out;
  test::run_command("objdump -T " + test::hone_exe(), &out);
  BOOST_TEST(out.find("GLIBCXX_") == std::string::npos);
  BOOST_TEST(out.find("CXXABI_") == std::string::npos);
}

// The bundle of this build: glibc versions, no fabric library, env.sh's choice of MPI, and the bundle's own MPI
// running two ranks without a warning.
BOOST_AUTO_TEST_CASE(bundle_runs_on_glibc_2_34_and_never_shadows_the_sites_mpi) {
  const std::string dest = test::temp_dir("bundle") + "/hone";
  output_of("bash " + test::source_dir() + "/mk/bundle.sh " + test::hone_exe() + " " + version_file() + " " + dest);
  std::string mpi_need;
  std::ifstream(dest + "/mpi/GLIBC") >> mpi_need;
  BOOST_TEST_REQUIRE(!mpi_need.empty(), "the bundle's mpi/GLIBC is missing");
  std::string mpi_newest;
  int elves = 0;
  for (const auto& e : fs::recursive_directory_iterator(dest)) {
    const std::string rel = fs::relative(e.path(), dest).string();
    BOOST_TEST(!matches(e.path().filename().string(), kFabric), "the bundle holds the fabric library " << rel);
    if (!is_elf(e.path())) continue;
    ++elves;
    const std::string v = newest_glibc(e.path().string());
    if (v.empty()) continue;
    if (rel.rfind("mpi/", 0) == 0) {
      if (mpi_newest.empty() || version_of(v) > version_of(mpi_newest)) mpi_newest = v;
    } else {
      BOOST_TEST(version_of(v) <= version_of("2.34"), rel << " needs GLIBC_" << v << " (> 2.34)");
    }
  }
  BOOST_TEST_MESSAGE("bundle: " << elves << " ELF files; its own MPI needs glibc " << mpi_newest);
  BOOST_TEST(mpi_need == mpi_newest);

  // This machine has an Open MPI: env.sh keeps it, and puts nothing of the bundle's MPI on the paths.
  const std::string show = "source " + dest + "/env.sh; echo \"mode=$HONE_MPI_MODE\"; echo \"ld=$LD_LIBRARY_PATH\"; "
                           "echo \"path=$PATH\"; echo \"opal=${OPAL_PREFIX:-}\"";
  const std::string clean = "env -i PATH=/usr/bin:/bin HOME=$HOME bash -c ";
  std::string site = output_of(clean + "'" + show + "'");
  BOOST_TEST(site.find("mode=site\n") != std::string::npos, site);
  BOOST_TEST(site.find("ld=" + dest + "/lib\n") != std::string::npos, site);
  BOOST_TEST(site.find(dest + "/mpi") == std::string::npos, site);
  BOOST_TEST(site.find("opal=\n") != std::string::npos, site);
  // Forced to the bundle's: its libraries first, its prefix for plugins and PMIx.
  std::string own = output_of(clean + "'HONE_MPI=bundled; " + show + "; echo \"pmix=$PMIX_MCA_mca_base_component_path\"'");
  BOOST_TEST(own.find("mode=bundled\n") != std::string::npos, own);
  BOOST_TEST(own.find("ld=" + dest + "/mpi/lib:") != std::string::npos, own);
  BOOST_TEST(own.find("path=" + dest + "/mpi/bin:") != std::string::npos, own);
  BOOST_TEST(own.find("opal=" + dest + "/mpi/usr\n") != std::string::npos, own);
  BOOST_TEST(own.find("pmix=" + dest + "/mpi/usr/lib/") != std::string::npos, own);

  // The bundle's own MPI runs two ranks of the bundle's hone, with its launcher, and says nothing of PMIx, dlopen
  // or components it could not load.
  std::string out;
  const int rc = test::run_command(
      clean + "'HONE_MPI=bundled; source " + dest + "/env.sh; timeout 120 mpirun -np 2 --oversubscribe "
              "--allow-run-as-root hone ranks'", &out);
  BOOST_TEST(rc == 0, out);
  BOOST_TEST(out.find("2 ranks: dp 2 x ") != std::string::npos, out);
  for (const char* bad : {"PMIX", "pmix", "dlopen", "mca_base_component", "undefined symbol", "WARNING", "Warning"})
    BOOST_TEST(out.find(bad) == std::string::npos, "'" << bad << "' in: " << out);
}

BOOST_AUTO_TEST_SUITE_END()
