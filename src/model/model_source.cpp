// The model cache of GGUF conversions (see model_source.h).
#include "model/model_source.h"

#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <filesystem>

#include "model/gguf_file.h"
#include "model/gguf_import.h"
#include "runtime/error.h"
#include "runtime/log.h"

namespace hone {

namespace fs = std::filesystem;

bool is_gguf_path(const std::string& path) {
  if (path.size() < 5) return false;
  std::string ext = path.substr(path.size() - 5);
  std::transform(ext.begin(), ext.end(), ext.begin(), [](unsigned char ch) { return std::tolower(ch); });
  return ext == ".gguf";
}

std::string model_cache_dir() {
  if (const char* d = std::getenv("HONE_CACHE_DIR"); d && *d) return d;
  if (const char* d = std::getenv("XDG_CACHE_HOME"); d && *d) return (fs::path(d) / "hone").string();
  const char* home = std::getenv("HOME");
  HONE_USER_CHECK(home && *home, "no model cache: set HONE_CACHE_DIR (HOME is not set)");
  return (fs::path(home) / ".cache" / "hone").string();
}

std::string gguf_cache_folder(const std::string& gguf_path) {
  std::error_code ec;
  const fs::path abs = fs::weakly_canonical(fs::absolute(gguf_path, ec), ec);
  const uintmax_t size = fs::file_size(abs, ec);
  const auto mtime = fs::last_write_time(abs, ec).time_since_epoch().count();
  // FNV-1a over the path, size and modification time.
  uint64_t h = 14695981039346656037ull;
  auto add = [&](const std::string& s) {
    for (unsigned char ch : s) h = (h ^ ch) * 1099511628211ull;
    h = (h ^ 0xff) * 1099511628211ull;
  };
  add(abs.string());
  add(std::to_string(size));
  add(std::to_string(static_cast<long long>(mtime)));
  char key[17];
  std::snprintf(key, sizeof key, "%016llx", static_cast<unsigned long long>(h));
  return (fs::path(model_cache_dir()) / "gguf" / cat(abs.stem().string(), "-", key)).string();
}

std::string model_folder(const std::string& path) {
  if (!is_gguf_path(path)) return path;
  std::error_code ec;
  HONE_USER_CHECK(fs::is_regular_file(path, ec), "model.path = \"", path, "\": no such GGUF file");
  const std::string folder = gguf_cache_folder(path);
  if (fs::exists(fs::path(folder) / "config.json", ec)) return folder;

  const gguf::GgufFile file(path);
  const std::string tmp = cat(folder, ".tmp-", ::getpid());
  fs::remove_all(tmp, ec);
  log_info("converting ", path, " into ", folder, " (once; fp32 weights)");
  try {
    write_hf_folder_from_gguf(file, tmp, DType::f32);
  } catch (...) {
    fs::remove_all(tmp, ec);
    throw;
  }
  fs::rename(tmp, folder, ec);
  if (ec) {  // another process landed its copy first: use that one
    fs::remove_all(tmp, ec);
    HONE_USER_CHECK(fs::exists(fs::path(folder) / "config.json"), "cannot move the conversion of ", path, " to ",
                    folder);
  }
  return folder;
}

}  // namespace hone
