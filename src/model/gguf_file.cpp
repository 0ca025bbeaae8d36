// GGUF reader: the header, metadata and tensor table checked completely when the file is opened (every count bound
// by the bytes that could hold it before anything is reserved), values decoded from the mapping when asked for.
#include "model/gguf_file.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <limits>
#include <map>

#include "model/gguf_quants.h"
#include "runtime/error.h"

namespace hone::gguf {

struct GgufFile::Storage {
  std::string owned;
  void* map = nullptr;
  size_t map_size = 0;
  ~Storage() {
    if (map) munmap(map, map_size);
  }
};

struct GgufFile::Entry {
  std::string key;
  ValueType type = ValueType::u8;
  ValueType array_type = ValueType::u8;  // arrays only
  uint64_t count = 0;                    // arrays only: elements
  uint64_t pos = 0;                      // the value's first byte (an array's first element)
};

namespace {

constexpr uint64_t kMinKvBytes = 8 + 4 + 1;              // empty key, type, a one-byte value
constexpr uint64_t kMinTensorInfoBytes = 8 + 4 + 8 + 4 + 8;  // empty name, n_dims, one dim, type, offset
constexpr uint32_t kMaxDims = 4;

bool is_int(ValueType t) {
  switch (t) {
    case ValueType::u8: case ValueType::i8: case ValueType::u16: case ValueType::i16: case ValueType::u32:
    case ValueType::i32: case ValueType::u64: case ValueType::i64: return true;
    default: return false;
  }
}

// Bytes of a fixed-size value; 0 for strings and arrays.
uint64_t fixed_size(ValueType t) {
  switch (t) {
    case ValueType::u8: case ValueType::i8: case ValueType::boolean: return 1;
    case ValueType::u16: case ValueType::i16: return 2;
    case ValueType::u32: case ValueType::i32: case ValueType::f32: return 4;
    case ValueType::u64: case ValueType::i64: case ValueType::f64: return 8;
    default: return 0;
  }
}

bool known_value_type(uint32_t t) { return t <= uint32_t(ValueType::f64); }

// Sequential little-endian reads over the file's bytes; every read is bounds-checked and a short one is a
// UserError naming what was being read.
class Cursor {
 public:
  Cursor(const uint8_t* data, uint64_t size, const std::string& file, uint64_t pos = 0)
      : data_(data), size_(size), file_(file), pos_(pos) {}
  uint64_t pos() const { return pos_; }
  uint64_t left() const { return size_ - pos_; }

  void need(uint64_t n, const std::string& what) const {
    if (n > left())
      throw UserError(cat(file_, ": truncated file: ", what, " at byte ", pos_, " needs ", n, " bytes, ", left(),
                          " left"));
  }
  void skip(uint64_t n, const std::string& what) {
    need(n, what);
    pos_ += n;
  }
  template <typename T>
  T read(const std::string& what) {
    need(sizeof(T), what);
    T v;
    std::memcpy(&v, data_ + pos_, sizeof(T));
    pos_ += sizeof(T);
    return v;
  }
  // A whole string (length and bytes) lies ahead: the fast path of the long string arrays (a vocabulary), whose
  // failures then go through string() for the message.
  bool string_fits() const {
    if (left() < 8) return false;
    uint64_t n;
    std::memcpy(&n, data_ + pos_, 8);
    return n <= left() - 8;
  }
  std::string_view string_unchecked() {
    uint64_t n;
    std::memcpy(&n, data_ + pos_, 8);
    std::string_view s(reinterpret_cast<const char*>(data_ + pos_ + 8), size_t(n));
    pos_ += 8 + n;
    return s;
  }
  std::string_view string(const std::string& what) {
    const uint64_t n = read<uint64_t>(what + " (length)");
    if (n > left())
      throw UserError(cat(file_, ": absurd string length ", n, " for ", what, " at byte ", pos_ - 8, ": only ",
                          left(), " bytes left (truncated file?)"));
    std::string_view s(reinterpret_cast<const char*>(data_ + pos_), size_t(n));
    pos_ += n;
    return s;
  }

 private:
  const uint8_t* data_;
  uint64_t size_;
  const std::string& file_;
  uint64_t pos_;
};

// A key or name in a message: printable ASCII kept, anything else (a newline above all) escaped, long ones cut.
std::string printable(std::string_view s) {
  std::string out;
  for (size_t i = 0; i < s.size() && i < 120; ++i) {
    const unsigned char c = static_cast<unsigned char>(s[i]);
    if (c >= 0x20 && c < 0x7f && c != '\\') {
      out += char(c);
    } else {
      static const char* hex = "0123456789abcdef";
      out += "\\x";
      out += hex[c >> 4];
      out += hex[c & 15];
    }
  }
  if (s.size() > 120) out += "...";
  return out;
}

std::string quoted(std::string_view s) { return "'" + printable(s) + "'"; }

bool mul_overflows(uint64_t a, uint64_t b, uint64_t limit, uint64_t* out) {
  if (a != 0 && b > limit / a) return true;
  *out = a * b;
  return false;
}

}  // namespace

std::string type_name_string(uint32_t type) {
  const char* n = known_type_name(type);
  return n ? std::string(n) : cat("type ", type);
}

const char* value_type_name(ValueType t) {
  switch (t) {
    case ValueType::u8: return "UINT8";
    case ValueType::i8: return "INT8";
    case ValueType::u16: return "UINT16";
    case ValueType::i16: return "INT16";
    case ValueType::u32: return "UINT32";
    case ValueType::i32: return "INT32";
    case ValueType::f32: return "FLOAT32";
    case ValueType::boolean: return "BOOL";
    case ValueType::string: return "STRING";
    case ValueType::array: return "ARRAY";
    case ValueType::u64: return "UINT64";
    case ValueType::i64: return "INT64";
    case ValueType::f64: return "FLOAT64";
  }
  return "unknown";
}

uint64_t TensorInfo::elements() const {
  uint64_t n = 1;
  for (uint64_t d : ne) n *= d;
  return n;
}

GgufFile::GgufFile(GgufFile&&) noexcept = default;
GgufFile& GgufFile::operator=(GgufFile&&) noexcept = default;
GgufFile::~GgufFile() = default;

GgufFile::GgufFile(const std::string& path) : name_(path), storage_(std::make_unique<Storage>()) {
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) throw UserError(cat(path, ": cannot open: ", std::strerror(errno)));
  struct stat st {};
  if (fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
    ::close(fd);
    throw UserError(cat(path, ": not a regular file"));
  }
  if (st.st_size > 0) {
    void* m = mmap(nullptr, size_t(st.st_size), PROT_READ, MAP_PRIVATE, fd, 0);
    const int err = errno;
    ::close(fd);
    if (m == MAP_FAILED) throw UserError(cat(path, ": cannot map: ", std::strerror(err)));
    storage_->map = m;
    storage_->map_size = size_t(st.st_size);
    data_ = static_cast<const uint8_t*>(m);
    size_ = uint64_t(st.st_size);
  } else {
    ::close(fd);
    data_ = reinterpret_cast<const uint8_t*>(storage_->owned.data());
  }
  parse();
}

GgufFile GgufFile::from_bytes(std::string bytes, const std::string& name) {
  GgufFile f;
  f.name_ = name;
  f.storage_ = std::make_unique<Storage>();
  f.storage_->owned = std::move(bytes);
  f.data_ = reinterpret_cast<const uint8_t*>(f.storage_->owned.data());
  f.size_ = f.storage_->owned.size();
  f.parse();
  return f;
}

uint64_t GgufFile::size() const { return size_; }

void GgufFile::parse() {
  auto bad = [&](const std::string& msg) { return UserError(cat(name_, ": ", msg)); };
  Cursor c(data_, size_, name_);

  if (size_ >= 4 && std::memcmp(data_, "GGUF", 4) != 0) {
    static const char* hex = "0123456789abcdef";
    std::string got;
    for (int i = 0; i < 4; ++i) got += cat(hex[data_[i] >> 4], hex[data_[i] & 15]);
    throw bad(cat("not a GGUF file: wrong magic 0x", got, " (expected 'GGUF', 0x47475546)"));
  }
  if (size_ < 24) throw bad(cat("file too short for a GGUF header (", size_, " bytes, the header takes 24)"));
  c.skip(4, "magic");
  version_ = c.read<uint32_t>("version");
  if (version_ == 1) throw bad("GGUF version 1 is not supported (hone reads versions 2 and 3)");
  if ((version_ & 0xffffu) == 0 && version_ != 0)
    throw bad(cat("big-endian GGUF file (version field 0x", std::hex, version_, std::dec,
                  " reads byte-swapped): hone reads little-endian files only"));
  if (version_ != 2 && version_ != 3)
    throw bad(cat("unsupported GGUF version ", version_, " (hone reads versions 2 and 3)"));
  const uint64_t n_tensors = c.read<uint64_t>("tensor count");
  const uint64_t n_kv = c.read<uint64_t>("metadata count");
  if (n_kv > c.left() / kMinKvBytes)
    throw bad(cat("absurd metadata count ", n_kv, ": the ", c.left(), " bytes left hold at most ",
                  c.left() / kMinKvBytes));

  // Metadata. Nothing is reserved from the counts: an Entry or TensorInfo takes more memory than the fewest bytes
  // that describe it, so the vectors grow only with what has actually been read.
  std::map<std::string, size_t, std::less<>> key_index;
  for (uint64_t i = 0; i < n_kv; ++i) {
    Entry e;
    e.key = std::string(c.string(cat("metadata key #", i)));
    const std::string what = cat("metadata key ", quoted(e.key));
    if (key_index.count(e.key)) throw bad(cat("duplicate ", what));
    const uint32_t type = c.read<uint32_t>(what + " (type)");
    if (!known_value_type(type)) throw bad(cat(what, ": unknown value type ", type));
    e.type = ValueType(type);
    if (e.type == ValueType::array) {
      const uint32_t at = c.read<uint32_t>(what + " (array type)");
      if (!known_value_type(at)) throw bad(cat(what, ": array of unknown value type ", at));
      if (ValueType(at) == ValueType::array) throw bad(cat(what, ": nested arrays are not supported"));
      e.array_type = ValueType(at);
      e.count = c.read<uint64_t>(what + " (array length)");
      const uint64_t min_elem = e.array_type == ValueType::string ? 8 : fixed_size(e.array_type);
      if (e.count > c.left() / min_elem)
        throw bad(cat(what, ": absurd array length ", e.count, ": the ", c.left(), " bytes left hold at most ",
                      c.left() / min_elem, " ", value_type_name(e.array_type), " elements"));
      e.pos = c.pos();
      if (e.array_type == ValueType::string) {
        for (uint64_t j = 0; j < e.count; ++j) {
          if (!c.string_fits()) c.string(cat(what, " element ", j));  // throws
          c.string_unchecked();
        }
      } else {
        if (e.array_type == ValueType::boolean)
          for (uint64_t j = 0; j < e.count; ++j)
            if (data_[e.pos + j] > 1) throw bad(cat(what, " element ", j, ": bool value ", int(data_[e.pos + j]), " is not 0 or 1"));
        c.skip(e.count * min_elem, what);
      }
    } else {
      e.pos = c.pos();
      if (e.type == ValueType::string) {
        c.string(what);
      } else {
        c.skip(fixed_size(e.type), what);
        if (e.type == ValueType::boolean && data_[e.pos] > 1)
          throw bad(cat(what, ": bool value ", int(data_[e.pos]), " is not 0 or 1"));
      }
    }
    key_index.emplace(e.key, entries_.size());
    entries_.push_back(std::move(e));
  }

  if (const Entry* a = entry("general.alignment")) {
    if (!is_int(a->type)) throw bad(cat("general.alignment is ", value_type_name(a->type), ", not an integer"));
    const int64_t v = get_int("general.alignment");
    if (v <= 0 || (v & (v - 1)) != 0) throw bad(cat("general.alignment ", v, " is not a power of two"));
    alignment_ = uint64_t(v);
  }

  // Tensor infos.
  if (n_tensors > c.left() / kMinTensorInfoBytes)
    throw bad(cat("absurd tensor count ", n_tensors, ": the ", c.left(), " bytes left hold at most ",
                  c.left() / kMinTensorInfoBytes, " tensor infos"));
  std::map<std::string, size_t, std::less<>> tensor_index;
  for (uint64_t i = 0; i < n_tensors; ++i) {
    TensorInfo t;
    t.name = std::string(c.string(cat("tensor name #", i)));
    const std::string what = cat("tensor ", quoted(t.name));
    if (tensor_index.count(t.name)) throw bad(cat("duplicate ", what));
    const uint32_t n_dims = c.read<uint32_t>(what + " (n_dims)");
    if (n_dims == 0 || n_dims > kMaxDims) throw bad(cat(what, ": n_dims ", n_dims, " (must be 1 to ", kMaxDims, ")"));
    uint64_t elements = 1;
    for (uint32_t d = 0; d < n_dims; ++d) {
      const uint64_t n = c.read<uint64_t>(cat(what, " (dimension ", d, ")"));
      if (n == 0) throw bad(cat(what, ": dimension ", d, " is 0"));
      if (mul_overflows(elements, n, uint64_t(std::numeric_limits<int64_t>::max()), &elements))
        throw bad(cat(what, ": element count overflows int64"));
      t.ne.push_back(n);
    }
    t.type = c.read<uint32_t>(what + " (type)");
    const int64_t be = block_elements(t.type), bb = block_bytes(t.type);
    if (be == 0) throw bad(cat(what, ": unknown tensor type ", t.type, " (its size cannot be checked)"));
    if (t.ne[0] % uint64_t(be) != 0)
      throw bad(cat(what, ": row length ", t.ne[0], " is not a multiple of ", type_name_string(t.type),
                    "'s block size ", be));
    if (mul_overflows(elements / uint64_t(be), uint64_t(bb), uint64_t(std::numeric_limits<int64_t>::max()),
                      &t.nbytes))
      throw bad(cat(what, ": byte size overflows int64"));
    t.offset = c.read<uint64_t>(what + " (offset)");
    if (t.offset % alignment_ != 0)
      throw bad(cat(what, ": data offset ", t.offset, " is not a multiple of the alignment ", alignment_));
    tensor_index.emplace(t.name, tensors_.size());
    tensors_.push_back(std::move(t));
  }

  // The data section starts at the next multiple of the alignment; offsets are relative to it.
  const uint64_t rem = c.pos() % alignment_;
  data_offset_ = c.pos() + (rem ? alignment_ - rem : 0);  // alignment_ < 2^63 and pos <= size: no overflow
  for (TensorInfo& t : tensors_) {
    const std::string what = cat("tensor ", quoted(t.name));
    if (data_offset_ > size_ || t.offset > size_ - data_offset_ || t.nbytes > size_ - data_offset_ - t.offset)
      throw bad(cat(what, ": data out of the file's range (", t.nbytes, " bytes at data offset ", t.offset,
                    ", data section at byte ", data_offset_, ", file size ", size_, "): truncated file?"));
    t.offset += data_offset_;
  }
  std::vector<const TensorInfo*> by_offset;
  by_offset.reserve(tensors_.size());
  for (const TensorInfo& t : tensors_) by_offset.push_back(&t);
  std::sort(by_offset.begin(), by_offset.end(),
            [](const TensorInfo* a, const TensorInfo* b) { return a->offset < b->offset; });
  for (size_t i = 1; i < by_offset.size(); ++i) {
    const TensorInfo& a = *by_offset[i - 1];
    const TensorInfo& b = *by_offset[i];
    if (b.offset < a.offset + a.nbytes)
      throw bad(cat("overlapping tensors ", quoted(a.name), " (bytes ", a.offset, " to ", a.offset + a.nbytes, ") and ",
                    quoted(b.name), " (from byte ", b.offset, ")"));
  }
}

// --- metadata ---

const GgufFile::Entry* GgufFile::entry(std::string_view key) const {
  for (const Entry& e : entries_)
    if (e.key == key) return &e;
  return nullptr;
}

const GgufFile::Entry& GgufFile::need(std::string_view key) const {
  const Entry* e = entry(key);
  if (!e) throw UserError(cat(name_, ": metadata key ", quoted(key), " is missing"));
  return *e;
}

std::vector<std::string> GgufFile::keys() const {
  std::vector<std::string> out;
  out.reserve(entries_.size());
  for (const Entry& e : entries_) out.push_back(e.key);
  return out;
}

bool GgufFile::has(std::string_view key) const { return entry(key) != nullptr; }
ValueType GgufFile::value_type(std::string_view key) const { return need(key).type; }

ValueType GgufFile::array_type(std::string_view key) const {
  const Entry& e = need(key);
  if (e.type != ValueType::array) throw UserError(cat(name_, ": metadata key ", quoted(key), " is not an array"));
  return e.array_type;
}

uint64_t GgufFile::array_size(std::string_view key) const {
  const Entry& e = need(key);
  if (e.type != ValueType::array) throw UserError(cat(name_, ": metadata key ", quoted(key), " is not an array"));
  return e.count;
}

namespace {

template <typename T>
T load(const uint8_t* p) {
  T v;
  std::memcpy(&v, p, sizeof(T));
  return v;
}

// An integer value of any width at p; false when a UINT64 is past int64's range.
bool load_int(ValueType t, const uint8_t* p, int64_t* out) {
  switch (t) {
    case ValueType::u8: *out = load<uint8_t>(p); return true;
    case ValueType::i8: *out = load<int8_t>(p); return true;
    case ValueType::u16: *out = load<uint16_t>(p); return true;
    case ValueType::i16: *out = load<int16_t>(p); return true;
    case ValueType::u32: *out = load<uint32_t>(p); return true;
    case ValueType::i32: *out = load<int32_t>(p); return true;
    case ValueType::i64: *out = load<int64_t>(p); return true;
    case ValueType::u64: {
      const uint64_t v = load<uint64_t>(p);
      if (v > uint64_t(std::numeric_limits<int64_t>::max())) return false;
      *out = int64_t(v);
      return true;
    }
    default: return false;
  }
}

}  // namespace

std::optional<std::string> GgufFile::find_string(std::string_view key) const {
  const Entry* e = entry(key);
  if (!e) return std::nullopt;
  if (e->type != ValueType::string)
    throw UserError(cat(name_, ": metadata key ", quoted(key), " is ", value_type_name(e->type), ", not a string"));
  Cursor c(data_, size_, name_, e->pos);
  return std::string(c.string(std::string(key)));
}

std::optional<int64_t> GgufFile::find_int(std::string_view key) const {
  const Entry* e = entry(key);
  if (!e) return std::nullopt;
  if (!is_int(e->type))
    throw UserError(cat(name_, ": metadata key ", quoted(key), " is ", value_type_name(e->type), ", not an integer"));
  int64_t v = 0;
  if (!load_int(e->type, data_ + e->pos, &v))
    throw UserError(cat(name_, ": metadata key ", quoted(key), ": value ", load<uint64_t>(data_ + e->pos),
                        " does not fit in int64"));
  return v;
}

std::optional<double> GgufFile::find_float(std::string_view key) const {
  const Entry* e = entry(key);
  if (!e) return std::nullopt;
  if (e->type == ValueType::f32) return double(load<float>(data_ + e->pos));
  if (e->type == ValueType::f64) return load<double>(data_ + e->pos);
  throw UserError(cat(name_, ": metadata key ", quoted(key), " is ", value_type_name(e->type), ", not a float"));
}

std::optional<bool> GgufFile::find_bool(std::string_view key) const {
  const Entry* e = entry(key);
  if (!e) return std::nullopt;
  if (e->type != ValueType::boolean)
    throw UserError(cat(name_, ": metadata key ", quoted(key), " is ", value_type_name(e->type), ", not a bool"));
  return data_[e->pos] != 0;
}

std::string GgufFile::get_string(std::string_view key) const {
  need(key);
  return *find_string(key);
}
int64_t GgufFile::get_int(std::string_view key) const {
  need(key);
  return *find_int(key);
}
double GgufFile::get_float(std::string_view key) const {
  need(key);
  return *find_float(key);
}
bool GgufFile::get_bool(std::string_view key) const {
  need(key);
  return *find_bool(key);
}

std::vector<std::string> GgufFile::get_string_array(std::string_view key) const {
  const Entry& e = need(key);
  if (e.type != ValueType::array || e.array_type != ValueType::string)
    throw UserError(cat(name_, ": metadata key ", quoted(key), " is not an array of strings"));
  std::vector<std::string> out;
  out.reserve(size_t(e.count));  // bounded by the file's size when it was opened
  Cursor c(data_, size_, name_, e.pos);
  for (uint64_t i = 0; i < e.count; ++i) out.emplace_back(c.string_unchecked());  // checked when opened
  return out;
}

std::vector<int64_t> GgufFile::get_int_array(std::string_view key) const {
  const Entry& e = need(key);
  if (e.type != ValueType::array || !is_int(e.array_type))
    throw UserError(cat(name_, ": metadata key ", quoted(key), " is not an array of integers"));
  const uint64_t w = fixed_size(e.array_type);
  std::vector<int64_t> out(size_t(e.count));
  for (uint64_t i = 0; i < e.count; ++i)
    if (!load_int(e.array_type, data_ + e.pos + i * w, &out[size_t(i)]))
      throw UserError(cat(name_, ": metadata key ", quoted(key), " element ", i, " does not fit in int64"));
  return out;
}

std::vector<float> GgufFile::get_float_array(std::string_view key) const {
  const Entry& e = need(key);
  if (e.type != ValueType::array || (e.array_type != ValueType::f32 && e.array_type != ValueType::f64))
    throw UserError(cat(name_, ": metadata key ", quoted(key), " is not an array of floats"));
  std::vector<float> out(size_t(e.count));
  for (uint64_t i = 0; i < e.count; ++i)
    out[size_t(i)] = e.array_type == ValueType::f32 ? load<float>(data_ + e.pos + 4 * i)
                                                    : float(load<double>(data_ + e.pos + 8 * i));
  return out;
}

// --- tensors ---

const TensorInfo* GgufFile::find_tensor(std::string_view name) const {
  for (const TensorInfo& t : tensors_)
    if (t.name == name) return &t;
  return nullptr;
}

const uint8_t* GgufFile::tensor_bytes(const TensorInfo& t) const {
  HONE_CHECK(t.offset <= size_ && t.nbytes <= size_ - t.offset, "tensor ", t.name, " is not of ", name_);
  return data_ + t.offset;
}

void GgufFile::read_f32(const TensorInfo& t, float* out) const {
  if (!can_dequantize(t.type))
    throw UserError(cat(name_, ": tensor ", quoted(t.name), " has type ", type_name_string(t.type),
                        ", which hone cannot dequantize"));
  const uint64_t n = t.elements();
  HONE_CHECK(n / uint64_t(block_elements(t.type)) * uint64_t(block_bytes(t.type)) == t.nbytes, "tensor ", t.name,
             ": size does not match its shape");
  dequantize(t.type, tensor_bytes(t), out, int64_t(n));
}

std::vector<float> GgufFile::read_f32(const TensorInfo& t) const {
  if (!can_dequantize(t.type)) read_f32(t, nullptr);  // the UserError naming the type, before allocating
  std::vector<float> out(size_t(t.elements()));
  read_f32(t, out.data());
  return out;
}

}  // namespace hone::gguf
