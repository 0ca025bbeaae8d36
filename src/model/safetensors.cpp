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
#include "io/json_nesting.h"
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
    check_json_nesting(text, cat(path, ": malformed safetensors header"));
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
  read_f32(name, 0, info(name).numel(), dst);
}

void SafetensorsFile::read_f32(const std::string& name, int64_t begin, int64_t count, float* dst) const {
  const SafetensorsTensorInfo& t = info(name);
  HONE_CHECK(begin >= 0 && count >= 0 && begin + count <= t.numel(), path_, ": elements [", begin, ", ",
             begin + count, ") of tensor '", name, "' pass its ", t.numel());
  if (count == 0) return;  // an empty tensor: dst may be null (memcpy's arguments never may)
  // memcpy per element: the file gives no alignment guarantee.
  if (t.supported && t.dtype == DType::f32) {
    std::memcpy(dst, bytes(t) + 4 * begin, size_t(count) * 4);
  } else if (t.supported && (t.dtype == DType::bf16 || t.dtype == DType::f16)) {
    const uint8_t* src = bytes(t) + 2 * begin;
    const bool bf = t.dtype == DType::bf16;
#pragma omp parallel for schedule(static) if (count > (1 << 18))
    for (int64_t i = 0; i < count; ++i) {
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
  check_json_nesting(ss.str(), index);
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

void write_tensor_bytes(AtomicFile& out, const Tensor& t, DType dtype) {
  if (t.dtype() == dtype) {
    out.write(t.data(), t.nbytes());
    return;
  }
  // Convert in chunks so that a bf16 copy of a large model never exists in memory at once.
  constexpr int64_t kChunk = 1 << 20;
  Tensor buf = Tensor::empty({kChunk}, dtype);
  const int64_t n = t.numel();
  for (int64_t i = 0; i < n; i += kChunk) {
    const int64_t m = std::min(kChunk, n - i);
    Tensor src = Tensor::view(static_cast<char*>(t.data()) + size_t(i) * dtype_size(t.dtype()), {m}, t.dtype());
    Tensor dst = Tensor::view(buf.data(), {m}, dtype);
    if (t.dtype() == DType::f32 && dtype == DType::bf16) {  // the common case (saving for inference), unrolled
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

// The checks on a tensor to be stored as `dtype` under `name`, before any byte is written.
void check_storable(const std::string& name, const Tensor& t, DType dtype) {
  HONE_CHECK(t.device() == Device::cpu, "write_safetensors: tensor '", name, "' is not on the host");
  HONE_CHECK(t.dtype() == dtype || (is_float(t.dtype()) && is_float(dtype)), "write_safetensors: cannot store ",
             dtype_name(t.dtype()), " tensor '", name, "' as ", dtype_name(dtype));
}

// The header (JSON padded to a multiple of 8 bytes) preceded by its 8-byte little-endian length.
std::string header_bytes(const std::vector<SafetensorsSlot>& slots, const SafetensorsMetadata& metadata) {
  json h = json::object();
  if (!metadata.empty()) h["__metadata__"] = metadata;
  int64_t offset = 0;
  std::set<std::string> seen;
  for (const auto& e : slots) {
    HONE_CHECK(e.name != "__metadata__" && !e.name.empty(), "write_safetensors: bad tensor name '", e.name, "'");
    HONE_CHECK(seen.insert(e.name).second, "write_safetensors: tensor name '", e.name, "' given twice");
    const int64_t nbytes = e.nbytes();
    h[e.name] = {{"dtype", dtype_spelling(e.dtype)}, {"shape", e.shape}, {"data_offsets", {offset, offset + nbytes}}};
    offset += nbytes;
  }
  std::string text = h.dump();
  text.append((8 - text.size() % 8) % 8, ' ');  // the data section starts 8-byte aligned
  std::string out(8, '\0');
  for (int i = 0; i < 8; ++i) out[size_t(i)] = char(uint8_t(uint64_t(text.size()) >> (8 * i)));
  return out + text;
}

std::vector<SafetensorsSlot> slots_of(const std::vector<SafetensorsEntry>& entries) {
  std::vector<SafetensorsSlot> slots;
  for (const auto& e : entries) {
    check_storable(e.name, e.tensor, e.dtype);
    slots.push_back({e.name, e.tensor.shape(), e.dtype});
  }
  return slots;
}

}  // namespace

int64_t SafetensorsSlot::nbytes() const {
  int64_t n = int64_t(dtype_size(dtype));
  for (int64_t d : shape) n *= d;
  return n;
}

struct SafetensorsFileWriter::Impl {
  std::vector<SafetensorsSlot> slots;
  std::string header;  // built (and the names checked) before the file is created
  AtomicFile out;
  size_t next = 0;
  Impl(const std::string& path, std::vector<SafetensorsSlot> s, const SafetensorsMetadata& metadata)
      : slots(std::move(s)), header(header_bytes(slots, metadata)), out(path) {}
};

SafetensorsFileWriter::SafetensorsFileWriter(const std::string& path, std::vector<SafetensorsSlot> slots,
                                             const SafetensorsMetadata& metadata)
    : impl_(std::make_unique<Impl>(path, std::move(slots), metadata)) {
  impl_->out.write(impl_->header.data(), impl_->header.size());
}

SafetensorsFileWriter::~SafetensorsFileWriter() = default;

void SafetensorsFileWriter::write(const Tensor& t) {
  HONE_CHECK(!complete(), "write_safetensors: more tensors than the ", impl_->slots.size(), " declared");
  const SafetensorsSlot& s = impl_->slots[impl_->next];
  check_storable(s.name, t, s.dtype);
  HONE_CHECK(t.shape() == s.shape, "write_safetensors: tensor '", s.name, "' has shape ", t.shape_string(),
             ", declared ", Tensor::view(nullptr, s.shape, s.dtype).shape_string());
  write_tensor_bytes(impl_->out, t, s.dtype);
  ++impl_->next;
}

bool SafetensorsFileWriter::complete() const { return impl_->next == impl_->slots.size(); }

void SafetensorsFileWriter::commit() {
  HONE_CHECK(complete(), "write_safetensors: ", impl_->next, " of ", impl_->slots.size(), " tensors written");
  impl_->out.commit();
}

struct SafetensorsCheckpointWriter::Impl {
  std::string dir;
  std::vector<std::vector<SafetensorsSlot>> shards;  // the split, fixed by the declared sizes
  std::vector<std::string> names;                    // each shard's file name
  int64_t total = 0;
  size_t shard = 0;                                  // the shard being written
  std::unique_ptr<SafetensorsFileWriter> file;       // its writer
};

SafetensorsCheckpointWriter::SafetensorsCheckpointWriter(const std::string& dir, std::vector<SafetensorsSlot> slots,
                                                         int64_t max_shard_bytes)
    : impl_(std::make_unique<Impl>()) {
  HONE_USER_CHECK(max_shard_bytes > 0, "max shard size must be positive (got ", max_shard_bytes, ")");
  std::error_code ec;
  fs::create_directories(dir, ec);
  HONE_USER_CHECK(fs::is_directory(dir), "cannot create folder ", dir, ": ", ec.message());
  Impl& m = *impl_;
  m.dir = dir;
  // Tensors in the given order, a new shard when the next tensor would pass the limit (a single larger tensor gets
  // a shard of its own).
  m.shards.resize(1);
  int64_t shard_bytes = 0;
  for (auto& s : slots) {
    const int64_t n = s.nbytes();
    if (!m.shards.back().empty() && shard_bytes + n > max_shard_bytes) {
      m.shards.emplace_back();
      shard_bytes = 0;
    }
    m.shards.back().push_back(std::move(s));
    shard_bytes += n;
    m.total += n;
  }
  char name[64];
  for (size_t s = 0; s < m.shards.size(); ++s) {
    if (m.shards.size() == 1) {
      m.names.push_back("model.safetensors");
    } else {
      std::snprintf(name, sizeof name, "model-%05zu-of-%05zu.safetensors", s + 1, m.shards.size());
      m.names.push_back(name);
    }
  }
  m.file = std::make_unique<SafetensorsFileWriter>(dir + "/" + m.names[0], m.shards[0]);
}

SafetensorsCheckpointWriter::~SafetensorsCheckpointWriter() = default;

void SafetensorsCheckpointWriter::write(const Tensor& t) {
  Impl& m = *impl_;
  HONE_CHECK(m.file, "write_safetensors_checkpoint: more tensors than declared");
  m.file->write(t);
  if (!m.file->complete()) return;
  m.file->commit();
  m.file.reset();
  if (++m.shard < m.shards.size())
    m.file = std::make_unique<SafetensorsFileWriter>(m.dir + "/" + m.names[m.shard], m.shards[m.shard]);
}

std::vector<std::string> SafetensorsCheckpointWriter::finish() {
  Impl& m = *impl_;
  if (m.file && m.file->complete()) {  // only a checkpoint of no tensors: its one file was never written to
    m.file->commit();
    m.file.reset();
    ++m.shard;
  }
  HONE_CHECK(m.shard == m.shards.size(), "write_safetensors_checkpoint: finished with shard ", m.shard + 1, " of ",
             m.shards.size(), " incomplete");
  const std::string single = m.dir + "/model.safetensors", index = m.dir + "/model.safetensors.index.json";
  std::error_code ec;
  if (m.shards.size() == 1) {
    fs::remove(index, ec);  // a stale index from an earlier sharded save would mislead readers
    return m.names;
  }
  json weight_map = json::object();
  for (size_t s = 0; s < m.shards.size(); ++s)
    for (const auto& e : m.shards[s]) weight_map[e.name] = m.names[s];
  json idx = {{"metadata", {{"total_size", m.total}}}, {"weight_map", weight_map}};
  write_file_atomic(index, idx.dump(2) + "\n");
  fs::remove(single, ec);
  std::vector<std::string> written = m.names;
  written.push_back("model.safetensors.index.json");
  return written;
}

void write_safetensors(const std::string& path, const std::vector<SafetensorsEntry>& entries,
                       const SafetensorsMetadata& metadata) {
  SafetensorsFileWriter out(path, slots_of(entries), metadata);
  for (const auto& e : entries) out.write(e.tensor);
  out.commit();
}

std::vector<std::string> write_safetensors_checkpoint(const std::string& dir, const std::vector<SafetensorsEntry>& entries,
                                                      int64_t max_shard_bytes) {
  std::vector<SafetensorsSlot> slots = slots_of(entries);
  SafetensorsCheckpointWriter out(dir, std::move(slots), max_shard_bytes);
  for (const auto& e : entries) out.write(e.tensor);
  return out.finish();
}

}  // namespace hone
