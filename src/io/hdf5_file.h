// Hdf5File: a small RAII wrapper over the HDF5 C API for hone's output files: create or open a file, write 1-D
// f32/i64/i32 datasets (parent groups created on the way), read them back, string attributes, flush.
// Host-only (never include from a header that a .cu file includes).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace hone {

class Hdf5File {
 public:
  enum class Mode { create, read, read_write };  // create truncates an existing file

  Hdf5File(const std::string& path, Mode mode);
  ~Hdf5File();
  Hdf5File(Hdf5File&& other) noexcept;
  Hdf5File& operator=(Hdf5File&& other) noexcept;
  Hdf5File(const Hdf5File&) = delete;
  Hdf5File& operator=(const Hdf5File&) = delete;

  const std::string& path() const { return path_; }

  // 1-D datasets by path ("/logprobs", "/steps/reward_mean"); an existing dataset of that name is an error.
  void write_f32(const std::string& name, const float* data, int64_t n);
  void write_i64(const std::string& name, const int64_t* data, int64_t n);
  void write_i32(const std::string& name, const int32_t* data, int64_t n);
  void write_f32(const std::string& name, const std::vector<float>& v) { write_f32(name, v.data(), int64_t(v.size())); }
  void write_i64(const std::string& name, const std::vector<int64_t>& v) { write_i64(name, v.data(), int64_t(v.size())); }

  // Whole 1-D datasets, converted to the requested type by HDF5.
  std::vector<float> read_f32(const std::string& name) const;
  std::vector<int64_t> read_i64(const std::string& name) const;
  bool exists(const std::string& name) const;  // a dataset or group at that path
  int64_t size(const std::string& name) const; // elements of a 1-D dataset

  // Variable-length string attributes on an object ("/" for the file).
  void set_attribute(const std::string& object, const std::string& key, const std::string& value);
  std::string attribute(const std::string& object, const std::string& key) const;

  void flush();
  // A created file is built in memory and written to path here (a failure is a UserError naming it, e.g. a full
  // disk); the destructor does it too, but cannot report a failure.
  void close();

 private:
  void write_1d(const std::string& name, int64_t type, const void* data, int64_t n);
  void read_1d(const std::string& name, int64_t type, void* data, int64_t n) const;

  std::string path_;
  int64_t file_ = -1;  // hid_t
  bool in_memory_ = false;
};

}  // namespace hone
