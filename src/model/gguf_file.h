// Reading GGUF files (ggml's single-file model format, versions 2 and 3): the header, the typed metadata and the
// tensor table, all validated before anything is used, and tensors dequantized to fp32 (model/gguf_quants.h).
// A damaged or hostile file is a one-line UserError "<file>: <problem>", never a crash or an allocation its counts
// ask for. Host-only.
//
// Tensor types: every type number ggml defines is listed with its byte size, so its range in the file is checked
// like any other (read_f32 refuses those hone cannot dequantize); a number ggml does not define is refused when
// the file is opened, since its tensor's size, and so the data layout, cannot be checked.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "model/gguf_quants.h"  // the type table (block_bytes, can_dequantize) goes with the files

namespace hone::gguf {

// "Q4_1"; "type 99" for a number ggml does not define.
std::string type_name_string(uint32_t type);

struct TensorInfo {
  std::string name;
  std::vector<uint64_t> ne;  // ggml order: ne[0] is the row length (fastest); the HF/PyTorch shape is ne reversed
  uint32_t type = 0;
  uint64_t offset = 0;  // absolute byte offset of the data in the file
  uint64_t nbytes = 0;
  uint64_t elements() const;
};

// Metadata value types as the file numbers them.
enum class ValueType : uint32_t {
  u8 = 0, i8 = 1, u16 = 2, i16 = 3, u32 = 4, i32 = 5, f32 = 6, boolean = 7, string = 8, array = 9, u64 = 10,
  i64 = 11, f64 = 12,
};
const char* value_type_name(ValueType t);

class GgufFile {
 public:
  explicit GgufFile(const std::string& path);  // opens, maps, validates; UserError "<path>: <problem>"
  static GgufFile from_bytes(std::string bytes, const std::string& name);  // same checks, for tests and the fuzzer
  GgufFile(GgufFile&&) noexcept;
  GgufFile& operator=(GgufFile&&) noexcept;
  ~GgufFile();

  uint32_t version() const { return version_; }
  const std::string& name() const { return name_; }  // the path (or name given)
  uint64_t alignment() const { return alignment_; }
  uint64_t data_offset() const { return data_offset_; }  // where the data section begins
  uint64_t size() const;                                  // bytes of the file

  std::vector<std::string> keys() const;  // metadata keys in file order
  bool has(std::string_view key) const;
  // The value's type (for an array: ValueType::array, with array_type the elements'); UserError when absent.
  ValueType value_type(std::string_view key) const;
  ValueType array_type(std::string_view key) const;
  uint64_t array_size(std::string_view key) const;

  // Typed getters: find_* return nullopt when the key is absent and throw UserError naming the key when its type
  // does not fit; get_* also throw when absent. Integers of any width and signedness are accepted by the int
  // getters (range-checked into int64); floats accept F32 and F64.
  std::optional<std::string> find_string(std::string_view key) const;
  std::optional<int64_t> find_int(std::string_view key) const;
  std::optional<double> find_float(std::string_view key) const;
  std::optional<bool> find_bool(std::string_view key) const;
  std::string get_string(std::string_view key) const;
  int64_t get_int(std::string_view key) const;
  double get_float(std::string_view key) const;
  bool get_bool(std::string_view key) const;
  std::vector<std::string> get_string_array(std::string_view key) const;  // throws when absent or not strings
  std::vector<int64_t> get_int_array(std::string_view key) const;        // any integer element type
  std::vector<float> get_float_array(std::string_view key) const;        // F32 elements (F64 ones rounded)

  const std::vector<TensorInfo>& tensors() const { return tensors_; }  // in file order
  const TensorInfo* find_tensor(std::string_view name) const;          // null when absent
  const uint8_t* tensor_bytes(const TensorInfo& t) const;              // the raw data (any alignment)

  // The tensor dequantized to fp32 (elements in ggml order); UserError naming the tensor and type when unsupported.
  void read_f32(const TensorInfo& t, float* out) const;
  std::vector<float> read_f32(const TensorInfo& t) const;

  struct Storage;  // the bytes: a read-only mapping or an owned string
  struct Entry;    // one metadata key and where its value lies

 private:
  GgufFile() = default;
  void parse();
  const Entry* entry(std::string_view key) const;
  const Entry& need(std::string_view key) const;

  std::string name_;
  std::unique_ptr<Storage> storage_;
  const uint8_t* data_ = nullptr;  // the file's bytes
  uint64_t size_ = 0;
  uint32_t version_ = 0;
  uint64_t alignment_ = 32;
  uint64_t data_offset_ = 0;
  std::vector<Entry> entries_;
  std::vector<TensorInfo> tensors_;
};

}  // namespace hone::gguf
