// Reading and writing safetensors files (https://github.com/huggingface/safetensors: an 8-byte little-endian
// header length, a JSON header naming each tensor's dtype, shape and byte range, then the raw bytes), single-file
// and sharded with a model.safetensors.index.json. Reading memory-maps the file and hands out zero-copy views;
// the header is validated completely first, so a damaged file is a UserError naming it, never a crash.
// Host-only.
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "tensor/tensor.h"

namespace hone {

using SafetensorsMetadata = std::map<std::string, std::string>;

// One tensor as the header describes it. dtype_name is the file's spelling ("F32", "BF16", ...); `dtype` is only
// meaningful when `supported` (F32, BF16, F16, I32, I64): other valid safetensors dtypes can be listed but not viewed.
struct SafetensorsTensorInfo {
  std::string name;
  std::string dtype_name;
  bool supported = false;
  DType dtype = DType::f32;
  std::vector<int64_t> shape;
  int64_t begin = 0, end = 0;  // byte range within the data section
  int64_t numel() const;
};

// A read-only, memory-mapped safetensors file. Views it returns point into the mapping: they are valid while this
// object lives and must only be read (the mapping is read-only; copy out with convert_copy or read_f32).
class SafetensorsFile {
 public:
  explicit SafetensorsFile(const std::string& path);  // maps and validates; UserError naming the file on failure
  ~SafetensorsFile();
  SafetensorsFile(const SafetensorsFile&) = delete;
  SafetensorsFile& operator=(const SafetensorsFile&) = delete;

  const std::string& path() const { return path_; }
  const std::vector<SafetensorsTensorInfo>& tensors() const { return tensors_; }  // in header (name) order
  const SafetensorsMetadata& metadata() const { return metadata_; }
  const SafetensorsTensorInfo* find(const std::string& name) const;  // null when absent
  const SafetensorsTensorInfo& info(const std::string& name) const;  // UserError when absent
  const uint8_t* bytes(const SafetensorsTensorInfo& t) const;        // start of its bytes (may be unaligned)
  // Zero-copy view in the file's dtype (UserError for a dtype hone cannot hold).
  Tensor view(const std::string& name) const;
  // A copy converted to f32 (from F32, BF16 or F16), written to dst (numel must match).
  void read_f32(const std::string& name, float* dst) const;
  // Elements [begin, begin + count) of the tensor (row-major) converted to f32: only that byte range of the mapping
  // is touched, so a tensor-parallel rank reading its slices of a large file pages in little more than them.
  void read_f32(const std::string& name, int64_t begin, int64_t count, float* dst) const;

 private:
  std::string path_;
  void* map_ = nullptr;
  size_t map_size_ = 0;
  const uint8_t* data_ = nullptr;  // start of the data section
  std::vector<SafetensorsTensorInfo> tensors_;
  std::map<std::string, size_t> index_;
  SafetensorsMetadata metadata_;
};

// A checkpoint folder: <dir>/model.safetensors, or the shards listed in <dir>/model.safetensors.index.json
// (every shard is opened and checked; a missing shard is a UserError naming it).
class SafetensorsCheckpoint {
 public:
  explicit SafetensorsCheckpoint(const std::string& dir);
  std::vector<std::string> names() const;  // sorted
  bool contains(const std::string& name) const { return where_.count(name) != 0; }
  const SafetensorsFile& file_of(const std::string& name) const;  // UserError naming the tensor when absent
  const SafetensorsTensorInfo& info(const std::string& name) const { return file_of(name).info(name); }
  Tensor view(const std::string& name) const { return file_of(name).view(name); }
  void read_f32(const std::string& name, float* dst) const { file_of(name).read_f32(name, dst); }
  void read_f32(const std::string& name, int64_t begin, int64_t count, float* dst) const {
    file_of(name).read_f32(name, begin, count, dst);
  }
  const std::vector<std::unique_ptr<SafetensorsFile>>& files() const { return files_; }
  bool sharded() const { return sharded_; }

 private:
  std::vector<std::unique_ptr<SafetensorsFile>> files_;
  std::map<std::string, size_t> where_;  // tensor name -> index in files_
  bool sharded_ = false;
};

// A tensor to write: host `tensor` stored under `name` as `dtype` (converted on the way when it differs from
// tensor.dtype(); conversions among f32, bf16 and f16 only).
struct SafetensorsEntry {
  std::string name;
  Tensor tensor;
  DType dtype;
};
inline SafetensorsEntry safetensors_entry(std::string name, const Tensor& t) { return {std::move(name), t, t.dtype()}; }

// A tensor declared before its data is at hand: its name, shape and the dtype it is stored as.
struct SafetensorsSlot {
  std::string name;
  std::vector<int64_t> shape;
  DType dtype;
  int64_t nbytes() const;
};

// One file written incrementally: the header when constructed (every byte range follows from the declared shapes),
// then each tensor's bytes as write() is handed it, in the declared order, so that only the tensor being written
// needs to exist in memory. commit() renames the finished temporary over `path`; destroyed uncommitted, the
// temporary is removed. write_safetensors is this with every tensor at hand (the bytes are the same).
class SafetensorsFileWriter {
 public:
  SafetensorsFileWriter(const std::string& path, std::vector<SafetensorsSlot> slots,
                        const SafetensorsMetadata& metadata = {{"format", "pt"}});
  ~SafetensorsFileWriter();
  SafetensorsFileWriter(const SafetensorsFileWriter&) = delete;
  SafetensorsFileWriter& operator=(const SafetensorsFileWriter&) = delete;

  // The next declared tensor's data: a host tensor of the slot's shape, in the slot's dtype or (converted on the
  // way) another of f32, bf16 and f16 when the slot's is one of them.
  void write(const Tensor& t);
  bool complete() const;  // every declared tensor written
  void commit();          // Error unless complete()

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

// A checkpoint folder written incrementally, byte for byte what write_safetensors_checkpoint writes for the same
// tensors (the same shard split, file names and index): the split and every header follow from the declared shapes,
// so the tensors can be handed over one at a time (e.g. gathered from tensor-parallel shards, parallel/shard_io.h).
class SafetensorsCheckpointWriter {
 public:
  // Creates dir; UserError when it cannot, or when max_shard_bytes is not positive.
  SafetensorsCheckpointWriter(const std::string& dir, std::vector<SafetensorsSlot> slots, int64_t max_shard_bytes);
  ~SafetensorsCheckpointWriter();

  void write(const Tensor& t);  // the next declared tensor, as SafetensorsFileWriter::write
  // After the last tensor: the last file committed, the index written (sharded) and the other form's stale files
  // removed. Returns the file names written (without dir), index last.
  std::vector<std::string> finish();

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

// Writes one file atomically (a temporary file in the same folder, then rename). Tensors are laid out in the
// order given; names must be unique. metadata defaults to {"format": "pt"} as transformers expects.
void write_safetensors(const std::string& path, const std::vector<SafetensorsEntry>& entries,
                       const SafetensorsMetadata& metadata = {{"format", "pt"}});

// Writes <dir>/model.safetensors when everything fits in max_shard_bytes, otherwise shards
// <dir>/model-00001-of-0000N.safetensors (tensors in the given order, a new shard when the next tensor would pass
// the limit; a single larger tensor gets a shard of its own) and <dir>/model.safetensors.index.json with
// metadata.total_size and weight_map. Returns the file names written (without dir), index last.
std::vector<std::string> write_safetensors_checkpoint(const std::string& dir, const std::vector<SafetensorsEntry>& entries,
                                                      int64_t max_shard_bytes);

}  // namespace hone
