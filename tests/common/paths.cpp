// Test helpers: paths and running commands.
#include "common/paths.h"

#include <sys/wait.h>
#include <unistd.h>

#include <array>
#include <cstdio>
#include <cstdlib>
#include <filesystem>

namespace fs = std::filesystem;

namespace test {

static std::string env_or(const char* name, const std::string& fallback) {
  const char* v = std::getenv(name);
  return (v && *v) ? std::string(v) : fallback;
}

std::string source_dir() { return env_or("HONE_SOURCE_DIR", fs::current_path().string()); }
std::string build_dir() { return env_or("HONE_BUILD_DIR", source_dir() + "/build"); }
std::string hone_exe() { return build_dir() + "/hone"; }
std::string shared_dir() { return env_or("HONE_SHARED_DIR", source_dir() + "/../shared"); }

std::string temp_dir(const std::string& tag) {
  fs::path p = fs::path(build_dir()) / "test-tmp" / (tag + "-" + std::to_string(getpid()));
  fs::remove_all(p);
  fs::create_directories(p);
  return p.string();
}

boost::test_tools::assertion_result needs_shared(boost::unit_test::test_unit_id) {
  const std::string dir = shared_dir() + "/data/tokenizers";
  boost::test_tools::assertion_result r(fs::is_directory(dir));
  if (!r) r.message() << "skipped: " << dir << " not found (the real tokenizer files live in ../shared)";
  return r;
}

int run_command(const std::string& cmd, std::string* output) {
  std::string full = cmd + " 2>&1";
  FILE* p = popen(full.c_str(), "r");
  if (!p) return -1;
  std::array<char, 4096> buf;
  std::string out;
  size_t n;
  while ((n = fread(buf.data(), 1, buf.size(), p)) > 0) out.append(buf.data(), n);
  int st = pclose(p);
  if (output) *output = out;
  if (WIFEXITED(st)) return WEXITSTATUS(st);
  return 128 + (WIFSIGNALED(st) ? WTERMSIG(st) : 0);
}

}  // namespace test
