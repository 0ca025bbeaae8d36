// Shared by the fuzz drivers (tests/fuzz/fuzz_*.cpp, built by mk/fuzz.mk with libFuzzer and ASan/UBSan).
// The rule every driver checks: an input ends in success or in a one-line hone::UserError. Any other exception
// (an internal check, a library's own error), a message over several lines, a crash, a sanitizer report, a hang
// or an allocation past libFuzzer's limit is a finding.
#pragma once

#include <unistd.h>

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <exception>
#include <filesystem>
#include <fstream>
#include <string>
#include <string_view>
#include <vector>

#include "runtime/error.h"

namespace fuzz {

// A private scratch folder per process (libFuzzer may run several jobs side by side), emptied per input.
inline const std::string& scratch() {
  static const std::string dir = [] {
    const char* base = std::getenv("TMPDIR");
    std::string d = std::string(base && *base ? base : "/tmp") + "/hone-fuzz-" + std::to_string(getpid());
    std::filesystem::create_directories(d);
    return d;
  }();
  static const struct Cleanup {
    ~Cleanup() {
      std::error_code ec;
      std::filesystem::remove_all(dir, ec);
    }
  } cleanup;
  return dir;
}

inline std::string fresh_dir(const std::string& name) {
  const std::string d = scratch() + "/" + name;
  std::error_code ec;
  std::filesystem::remove_all(d, ec);
  std::filesystem::create_directories(d);
  return d;
}

inline void write_file(const std::string& path, std::string_view bytes) {
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out.write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
}

// Splits at NUL bytes: drivers that take several inputs (a file and overrides, two files) read them this way.
inline std::vector<std::string> split_nul(const uint8_t* data, size_t size, size_t max_parts) {
  std::vector<std::string> parts(1);
  for (size_t i = 0; i < size; ++i) {
    if (data[i] == 0 && parts.size() < max_parts) parts.emplace_back();
    else parts.back() += static_cast<char>(data[i]);
  }
  return parts;
}

[[noreturn]] inline void finding(const char* what, const std::string& message) {
  std::fprintf(stderr, "\nFUZZ FINDING: %s: %s\n", what, message.c_str());
  std::abort();
}

// Runs one input through body: success or a one-line UserError pass; anything else aborts (a finding).
template <typename F>
void expect_user_error_or_success(F&& body) {
  try {
    body();
  } catch (const hone::UserError& e) {
    // One line, or several errors each of one line, "\nhone: error: " between them (a deck's every error at once).
    const std::string all = e.what(), sep = "\nhone: error: ";
    size_t at = 0;
    while (true) {
      const size_t next = all.find(sep, at);
      const std::string m = all.substr(at, next == std::string::npos ? std::string::npos : next - at);
      if (m.find('\n') != std::string::npos) finding("a user error over several lines", all);
      if (m.empty()) finding("an empty user error", all);
      if (next == std::string::npos) break;
      at = next + sep.size();
    }
  } catch (const hone::Error& e) {
    finding("an internal error (exit 1) instead of a user error", e.what());
  } catch (const std::exception& e) {
    finding("a library exception reached the top", e.what());
  } catch (...) {
    finding("an unknown exception", "");
  }
}

}  // namespace fuzz
