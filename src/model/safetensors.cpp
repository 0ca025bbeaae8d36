// safetensors reader (mmap, full header validation) and atomic writer, single-file and sharded.
#include "model/safetensors.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <set>
#include <sstream>

#include <nlohmann/json.hpp>

#include "io/atomic_file.h"
#include "runtime/error.h"

namespace hone {

namespace fs = std::filesystem;
using json = nlohmann::json;

namespace {

constexpr uint64_t kMaxHeaderBytes = 100'000'000;  // the bound the reference implementation uses

struct DTypeSpelling {
  const char* name;
  int64_t itemsize;
  bool supported;
  DType dtype;
};

// Every dtype the format defines; hone holds the first five.
constexpr DTypeSpelling kDTypes[] = {
    {"F32", 4, true, DType::f32},      {"BF16", 2, true, DType::bf16},    {"F16", 2, true, DType::f16},
    {"I32", 4, true, DType::i32},      {"I64", 8, true, DType::i64},      {"F64", 8, false, DType::f32},
    {"U64", 8, false, DType::f32},     {"U32", 4, false, DType::f32},     {"I16", 2, false, DType::f32},
    {"U16", 2, false, DType::f32},     {"I8", 1, false, DType::f32},      {"U8", 1, false, DType::f32},
    {"BOOL", 1, false, DType::f32},    {"F8_E4M3", 1, false, DType::f32}, {"F8_E5M2", 1, false, DType::f32},
    {"F8_E8M0", 1, false, DType::f32},
};

const DTypeSpelling* find_dtype(const std::string& name) {
  for (const auto& d : kDTypes)
    if (name == d.name) return &d;
  return nullptr;
}

const char* dtype_spelling(DType t) {
  switch (t) {
    case DType::f32: return "F32";
    case DType::bf16: return "BF16";
    case DType::f16: return "F16";
    case DType::i32: return "I32";
    case DType::i64: return "I64";
  }
  return "?";
}

std::string errno_text() { return std::strerror(errno); }

// Parses and checks one header entry; `data_size` bounds the byte ranges.
SafetensorsTensorInfo parse_entry(const std::string& file, const std::string& name, const json& e, uint64_t data_size) {
  auto bad = [&](const std::string& msg) -> UserError {
    return UserError(cat(file, ": malformed safetensors header: tensor '", name, "': ", msg));
  };
  if (!e.is_object()) throw bad("entry is not an object");
  if (!e.contains("dtype") || !e["dtype"].is_string()) throw bad("missing string field 'dtype'");
  if (!e.contains("shape") || !e["shape"].is_array()) throw bad("missing list field 'shape'");
  if (!e.contains("data_offsets") || !e["data_offsets"].is_array() || e["data_offsets"].size() != 2)
    throw bad("missing field 'data_offsets' ([begin, end])");
  SafetensorsTensorInfo t;
  t.name = name;
  t.dtype_name = e["dtype"].get<std::string>();
  const DTypeSpelling* d = find_dtype(t.dtype_name);
  if (!d) throw bad(cat("unknown dtype '", t.dtype_name, "'"));
  t.supported = d->supported;
  t.dtype = d->dtype;
  // Bytes implied by the shape, saturated at 2^64 so that no product overflows.
  const unsigned __int128 kSaturated = (unsigned __int128)1 << 64;
  unsigned __int128 bytes = uint64_t(d->itemsize);
  for (const json& dim : e["shape"]) {
    if (!dim.is_number_unsigned()) throw bad(cat("shape entry ", dim.dump(), " is not a non-negative integer"));
    const uint64_t v = dim.get<uint64_t>();
    if (v > uint64_t(INT64_MAX)) throw bad("shape entry too large");
    t.shape.push_back(int64_t(v));
    bytes = std::min<unsigned __int128>(bytes * v, kSaturated);
  }
  for (const json& o : e["data_offsets"])
    if (!o.is_number_unsigned()) throw bad(cat("data offset ", o.dump(), " is not a non-negative integer"));
  const uint64_t begin = e["data_offsets"][0].get<uint64_t>(), end = e["data_offsets"][1].get<uint64_t>();
  if (begin > end) throw bad(cat("data_offsets [", begin, ", ", end, "] run backwards"));
  if (end > data_size)
    throw bad(cat("data_offsets [", begin, ", ", end, "] pass the end of the data (", data_size,
                  " bytes): the file is truncated or the header is wrong"));
  if (bytes != end - begin)
    throw bad(cat("shape ", e["shape"].dump(), " of ", t.dtype_name, " needs ",
                  bytes >= kSaturated ? std::string("2^64 bytes or more") : cat(uint64_t(bytes), " bytes"),
                  " but data_offsets cover ", end - begin));
  t.begin = int64_t(begin);
  t.end = int64_t(end);
  return t;
}

}  // namespace

int64_t SafetensorsTensorInfo::numel() const {
  int64_t n = 1;
  for (int64_t d : shape) n *= d;
  return n;
}

// ---- reading -------------------------------------------------------------------------------------------------

SafetensorsFile::SafetensorsFile(const std::string& path) : path_(path) {
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  HONE_USER_CHECK(fd >= 0, "cannot open ", path, ": ", errno_text());
  struct stat st;
  if (::fstat(fd, &st) != 0) {
    ::close(fd);
    throw UserError(cat("cannot stat ", path, ": ", errno_text()));
  }
  const uint64_t size = uint64_t(st.st_size);
  if (size < 8) {
    ::close(fd);
    throw UserError(cat(path, ": not a safetensors file: ", size, " bytes, shorter than the 8-byte header length"));
  }
  // Read-only: a writable private mapping would be charged in full against the commit limit, which fails for
  // large checkpoints on hosts that disable overcommit.
  void* m = ::mmap(nullptr, size, PROT_READ, MAP_PRIVATE, fd, 0);
  ::close(fd);
  HONE_USER_CHECK(m != MAP_FAILED, "cannot map ", path, ": ", errno_text());
  map_ = m;
  map_size_ = size;
  try {
    const auto* base = static_cast<const uint8_t*>(map_);
    uint64_t header_len = 0;
    for (int i = 7; i >= 0; --i) header_len = (header_len << 8) | base[i];  // little-endian
    HONE_USER_CHECK(header_len <= kMaxHeaderBytes, path, ": malformed safetensors file: header length ", header_len,
                    " is over the ", kMaxHeaderBytes, "-byte limit");
    HONE_USER_CHECK(header_len <= size - 8, path, ": malformed safetensors file: header length ", header_len,
                    " passes the end of the file (", size, " bytes): truncated or not a safetensors file");
    const std::string text(reinterpret_cast<const char*>(base + 8), size_t(header_len));
    json h;
    try {
      h = json::parse(text);
    } catch (const json::exception& e) {
      throw UserError(cat(path, ": malformed safetensors header: not valid JSON: ", e.what()));
    }
    HONE_USER_CHECK(h.is_object(), path, ": malformed safetensors header: not a JSON object");
    data_ = base + 8 + header_len;
    const uint64_t data_size = size - 8 - header_len;
    for (auto it = h.begin(); it != h.end(); ++it) {
      if (it.key() == "__metadata__") {
        HONE_USER_CHECK(it->is_object(), path, ": malformed safetensors header: __metadata__ is not an object");
        for (auto m2 = it->begin(); m2 != it->end(); ++m2) {
          HONE_USER_CHECK(m2->is_string(), path, ": malformed safetensors header: __metadata__ value of '", m2.key(),
                          "' is not a string");
          metadata_[m2.key()] = m2->get<std::string>();
        }
        continue;
      }
      tensors_.push_back(parse_entry(path, it.key(), *it, data_size));
    }
    // Byte ranges must not overlap (zero-size tensors occupy nothing).
    std::vector<const SafetensorsTensorInfo*> by_offset;
    for (const auto& t : tensors_)
      if (t.end > t.begin) by_offset.push_back(&t);
    std::sort(by_offset.begin(), by_offset.end(),
              [](const auto* a, const auto* b) { return a->begin < b->begin; });
    for (size_t i = 1; i < by_offset.size(); ++i)
      HONE_USER_CHECK(by_offset[i]->begin >= by_offset[i - 1]->end, path,
                      ": malformed safetensors header: tensors '", by_offset[i - 1]->name, "' and '",
                      by_offset[i]->name, "' overlap");
    for (size_t i = 0; i < tensors_.size(); ++i) index_[tensors_[i].name] = i;
  } catch (...) {
    ::munmap(map_, map_size_);
    map_ = nullptr;
    throw;
  }
}

SafetensorsFile::~SafetensorsFile() {
  if (map_) ::munmap(map_, map_size_);
}

const SafetensorsTensorInfo* SafetensorsFile::find(const std::string& name) const {
  auto it = index_.find(name);
  return it == index_.end() ? nullptr : &tensors_[it->second];
}

const SafetensorsTensorInfo& SafetensorsFile::info(const std::string& name) const {
  const SafetensorsTensorInfo* t = find(name);
  HONE_USER_CHECK(t, path_, ": no tensor named '", name, "'");
  return *t;
}

const uint8_t* SafetensorsFile::bytes(const SafetensorsTensorInfo& t) const { return data_ + t.begin; }

Tensor SafetensorsFile::view(const std::string& name) const {
  const SafetensorsTensorInfo& t = info(name);
  HONE_USER_CHECK(t.supported, path_, ": tensor '", name, "' has dtype ", t.dtype_name,
                  ", which hone does not hold (F32, BF16, F16, I32, I64)");
  return Tensor::view(const_cast<uint8_t*>(bytes(t)), t.shape, t.dtype);
}

void SafetensorsFile::read_f32(const std::string& name, float* dst) const {
  const SafetensorsTensorInfo& t = info(name);
  const uint8_t* src = bytes(t);
  const int64_t n = t.numel();
  // memcpy per element: the file gives no alignment guarantee.
  if (t.supported && t.dtype == DType::f32) {
    std::memcpy(dst, src, size_t(n) * 4);
  } else if (t.supported && (t.dtype == DType::bf16 || t.dtype == DType::f16)) {
    const bool bf = t.dtype == DType::bf16;
#pragma omp parallel for schedule(static) if (n > (1 << 18))
    for (int64_t i = 0; i < n; ++i) {
      uint16_t h;
      std::memcpy(&h, src + 2 * i, 2);
      dst[i] = bf ? bf16_to_f32(h) : f16_to_f32(h);
    }
  } else {
    throw UserError(cat(path_, ": tensor '", name, "' has dtype ", t.dtype_name, "; expected F32, BF16 or F16"));
  }
}

SafetensorsCheckpoint::SafetensorsCheckpoint(const std::string& dir) {
  const std::string single = dir + "/model.safetensors", index = dir + "/model.safetensors.index.json";
  if (fs::exists(single)) {
    files_.push_back(std::make_unique<SafetensorsFile>(single));
    for (const auto& t : files_[0]->tensors()) where_[t.name] = 0;
    return;
  }
  HONE_USER_CHECK(fs::exists(index), "no model.safetensors or model.safetensors.index.json in ", dir);
  sharded_ = true;
  std::ifstream in(index);
  HONE_USER_CHECK(in.good(), "cannot open ", index);
  std::stringstream ss;
  ss << in.rdbuf();
  json j;
  try {
    j = json::parse(ss.str());
  } catch (const json::exception& e) {
    throw UserError(cat(index, ": not valid JSON: ", e.what()));
  }
  HONE_USER_CHECK(j.is_object() && j.contains("weight_map") && j["weight_map"].is_object(), index,
                  ": missing object 'weight_map'");
  std::map<std::string, size_t> shard_index;
  for (auto it = j["weight_map"].begin(); it != j["weight_map"].end(); ++it) {
    HONE_USER_CHECK(it->is_string(), index, ": weight_map entry '", it.key(), "' is not a file name");
    const std::string shard = it->get<std::string>();
    HONE_USER_CHECK(!shard.empty() && shard.find('/') == std::string::npos && shard != "." && shard != "..", index,
                    ": weight_map entry '", it.key(), "' names '", shard, "', not a file in the folder");
    auto s = shard_index.find(shard);
    if (s == shard_index.end()) {
      const std::string path = dir + "/" + shard;
      HONE_USER_CHECK(fs::exists(path), index, ": shard ", shard, " is missing (", path, ")");
      files_.push_back(std::make_unique<SafetensorsFile>(path));
      s = shard_index.emplace(shard, files_.size() - 1).first;
    }
    HONE_USER_CHECK(files_[s->second]->find(it.key()), index, ": tensor '", it.key(), "' is not in its shard ", shard);
    where_[it.key()] = s->second;
  }
  // A tensor in a shard but not in the map would be silently skipped by transformers too; here it is an error.
  for (const auto& f : files_)
    for (const auto& t : f->tensors())
      HONE_USER_CHECK(where_.count(t.name) && files_[where_[t.name]].get() == f.get(), f->path(), ": tensor '",
                      t.name, "' is not listed for this shard in ", index);
}

std::vector<std::string> SafetensorsCheckpoint::names() const {
  std::vector<std::string> out;
  for (const auto& [name, i] : where_) out.push_back(name);
  return out;
}

const SafetensorsFile& SafetensorsCheckpoint::file_of(const std::string& name) const {
  auto it = where_.find(name);
  HONE_USER_CHECK(it != where_.end(), "checkpoint has no tensor named '", name, "'");
  return *files_[it->second];
}

// ---- writing -------------------------------------------------------------------------------------------------

namespace {

// A FILE* on a temporary name next to `path`, renamed over it by commit(); removed if never committed.
class AtomicFile {
 public:
  explicit AtomicFile(const std::string& path) : path_(path) {
    tmp_ = path + ".tmp." + std::to_string(::getpid());
    f_ = std::fopen(tmp_.c_str(), "wb");
    HONE_USER_CHECK(f_, "cannot create ", tmp_, ": ", errno_text());
  }
  ~AtomicFile() {
    if (f_) std::fclose(f_);
    if (!committed_) std::remove(tmp_.c_str());
  }
  void write(const void* p, size_t n) {
    if (n && std::fwrite(p, 1, n, f_) != n) throw UserError(cat("write to ", tmp_, " failed: ", errno_text()));
  }
  void commit() {
    const bool ok = std::fflush(f_) == 0 && ::fsync(::fileno(f_)) == 0;
    const int closed = std::fclose(f_);
    f_ = nullptr;
    HONE_USER_CHECK(ok && closed == 0, "write to ", tmp_, " failed: ", errno_text());
    HONE_USER_CHECK(std::rename(tmp_.c_str(), path_.c_str()) == 0, "cannot rename ", tmp_, " to ", path_, ": ",
                    errno_text());
    committed_ = true;
  }

 private:
  std::string path_, tmp_;
  std::FILE* f_ = nullptr;
  bool committed_ = false;
};

bool is_float(DType t) { return t == DType::f32 || t == DType::bf16 || t == DType::f16; }

void write_entry_bytes(AtomicFile& out, const SafetensorsEntry& e) {
  const Tensor& t = e.tensor;
  if (t.dtype() == e.dtype) {
    out.write(t.data(), t.nbytes());
    return;
  }
  // Convert in chunks so that a bf16 copy of a large model never exists in memory at once.
  constexpr int64_t kChunk = 1 << 20;
  Tensor buf = Tensor::empty({kChunk}, e.dtype);
  const int64_t n = t.numel();
  for (int64_t i = 0; i < n; i += kChunk) {
    const int64_t m = std::min(kChunk, n - i);
    Tensor src = Tensor::view(static_cast<char*>(t.data()) + size_t(i) * dtype_size(t.dtype()), {m}, t.dtype());
    Tensor dst = Tensor::view(buf.data(), {m}, e.dtype);
    if (t.dtype() == DType::f32 && e.dtype == DType::bf16) {  // the common case (saving for inference), unrolled
      const float* x = src.f32();
      uint16_t* y = dst.u16();
#pragma omp parallel for schedule(static) if (m > (1 << 18))
      for (int64_t k = 0; k < m; ++k) y[k] = f32_to_bf16(x[k]);
    } else {
      convert_copy(src, dst);
    }
    out.write(dst.data(), dst.nbytes());
  }
}

}  // namespace

void write_safetensors(const std::string& path, const std::vector<SafetensorsEntry>& entries,
                       const SafetensorsMetadata& metadata) {
  json h = json::object();
  if (!metadata.empty()) h["__metadata__"] = metadata;
  int64_t offset = 0;
  std::set<std::string> seen;
  for (const auto& e : entries) {
    HONE_CHECK(e.tensor.device() == Device::cpu, "write_safetensors: tensor '", e.name, "' is not on the host");
    HONE_CHECK(e.name != "__metadata__" && !e.name.empty(), "write_safetensors: bad tensor name '", e.name, "'");
    HONE_CHECK(seen.insert(e.name).second, "write_safetensors: tensor name '", e.name, "' given twice");
    HONE_CHECK(e.tensor.dtype() == e.dtype || (is_float(e.tensor.dtype()) && is_float(e.dtype)),
               "write_safetensors: cannot store ", dtype_name(e.tensor.dtype()), " tensor '", e.name, "' as ",
               dtype_name(e.dtype));
    const int64_t nbytes = e.tensor.numel() * int64_t(dtype_size(e.dtype));
    h[e.name] = {{"dtype", dtype_spelling(e.dtype)},
                 {"shape", e.tensor.shape()},
                 {"data_offsets", {offset, offset + nbytes}}};
    offset += nbytes;
  }
  std::string text = h.dump();
  text.append((8 - text.size() % 8) % 8, ' ');  // the data section starts 8-byte aligned
  uint8_t len[8];
  for (int i = 0; i < 8; ++i) len[i] = uint8_t(uint64_t(text.size()) >> (8 * i));
  AtomicFile out(path);
  out.write(len, 8);
  out.write(text.data(), text.size());
  for (const auto& e : entries) write_entry_bytes(out, e);
  out.commit();
}

std::vector<std::string> write_safetensors_checkpoint(const std::string& dir, const std::vector<SafetensorsEntry>& entries,
                                                      int64_t max_shard_bytes) {
  HONE_USER_CHECK(max_shard_bytes > 0, "max shard size must be positive (got ", max_shard_bytes, ")");
  std::error_code ec;
  fs::create_directories(dir, ec);
  HONE_USER_CHECK(fs::is_directory(dir), "cannot create folder ", dir, ": ", ec.message());
  const std::string single = dir + "/model.safetensors", index = dir + "/model.safetensors.index.json";

  std::vector<std::vector<SafetensorsEntry>> shards(1);
  int64_t shard_bytes = 0, total = 0;
  for (const auto& e : entries) {
    const int64_t n = e.tensor.numel() * int64_t(dtype_size(e.dtype));
    if (!shards.back().empty() && shard_bytes + n > max_shard_bytes) {
      shards.emplace_back();
      shard_bytes = 0;
    }
    shards.back().push_back(e);
    shard_bytes += n;
    total += n;
  }
  if (shards.size() == 1) {
    write_safetensors(single, entries);
    fs::remove(index, ec);  // a stale index from an earlier sharded save would mislead readers
    return {"model.safetensors"};
  }
  std::vector<std::string> written;
  json weight_map = json::object();
  char name[64];
  for (size_t s = 0; s < shards.size(); ++s) {
    std::snprintf(name, sizeof name, "model-%05zu-of-%05zu.safetensors", s + 1, shards.size());
    write_safetensors(dir + "/" + name, shards[s]);
    written.push_back(name);
    for (const auto& e : shards[s]) weight_map[e.name] = name;
  }
  json idx = {{"metadata", {{"total_size", total}}}, {"weight_map", weight_map}};
  write_file_atomic(index, idx.dump(2) + "\n");
  written.push_back("model.safetensors.index.json");
  fs::remove(single, ec);
  return written;
}

}  // namespace hone
