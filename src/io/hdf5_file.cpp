// Hdf5File: the HDF5 C API behind RAII handles, with errors turned into hone exceptions naming file and object.
#include "io/hdf5_file.h"

#include <hdf5.h>

#include <utility>

#include "io/atomic_file.h"
#include "runtime/error.h"

namespace hone {
namespace {

// Closes one HDF5 handle of any kind when it goes out of scope.
struct Handle {
  hid_t id;
  herr_t (*closer)(hid_t);
  Handle(hid_t i, herr_t (*c)(hid_t)) : id(i), closer(c) {}
  ~Handle() {
    if (id >= 0) closer(id);
  }
  Handle(const Handle&) = delete;
  Handle& operator=(const Handle&) = delete;
};

// HDF5 prints an error stack to stderr by default; hone reports errors itself.
void silence_hdf5() { H5Eset_auto2(H5E_DEFAULT, nullptr, nullptr); }

}  // namespace

Hdf5File::Hdf5File(const std::string& path, Mode mode) : path_(path) {
  silence_hdf5();
  switch (mode) {
    case Mode::create: {
      // Built in memory and written to path by close(): HDF5 never meets a full disk (h5out::create_memory_file).
      static int count = 0;
      const hid_t fapl = H5Pcreate(H5P_FILE_ACCESS);
      if (fapl >= 0 && H5Pset_fapl_core(fapl, size_t(1) << 20, /*backing_store=*/0) >= 0)
        file_ = H5Fcreate(cat("hone-memory-file-", ++count, ".h5").c_str(), H5F_ACC_TRUNC, H5P_DEFAULT, fapl);
      if (fapl >= 0) H5Pclose(fapl);
      in_memory_ = true;
      break;
    }
    case Mode::read: file_ = H5Fopen(path.c_str(), H5F_ACC_RDONLY, H5P_DEFAULT); break;
    case Mode::read_write: file_ = H5Fopen(path.c_str(), H5F_ACC_RDWR, H5P_DEFAULT); break;
  }
  if (file_ < 0) {
    throw UserError(cat("cannot ", mode == Mode::create ? "create" : "open", " HDF5 file '", path, "'"));
  }
}

Hdf5File::~Hdf5File() {
  try {
    close();
  } catch (const std::exception&) {  // a destructor cannot report it: call close() to see a failed write
  }
}

Hdf5File::Hdf5File(Hdf5File&& o) noexcept : path_(std::move(o.path_)), file_(o.file_), in_memory_(o.in_memory_) {
  o.file_ = -1;
}

Hdf5File& Hdf5File::operator=(Hdf5File&& o) noexcept {
  if (this != &o) {
    close();
    path_ = std::move(o.path_);
    file_ = o.file_;
    in_memory_ = o.in_memory_;
    o.file_ = -1;
  }
  return *this;
}

void Hdf5File::close() {
  if (file_ < 0) return;
  const hid_t f = hid_t(file_);
  file_ = -1;
  if (!in_memory_) {
    H5Fclose(f);
    return;
  }
  std::string image;
  const bool flushed = H5Fflush(f, H5F_SCOPE_GLOBAL) >= 0;
  const ssize_t n = flushed ? H5Fget_file_image(f, nullptr, 0) : -1;
  if (n >= 0) {
    image.resize(size_t(n));
    if (H5Fget_file_image(f, image.data(), size_t(n)) != n) image.clear();
  }
  H5Fclose(f);  // in memory: nothing to write, nothing to fail
  HONE_CHECK(n >= 0 && image.size() == size_t(n), "HDF5 could not give the image of ", path_);
  write_file_durable(path_, image);
}

void Hdf5File::flush() {
  HONE_CHECK(file_ >= 0, "HDF5 file is closed");
  HONE_CHECK(H5Fflush(hid_t(file_), H5F_SCOPE_GLOBAL) >= 0, "flushing ", path_, " failed");
}

void Hdf5File::write_1d(const std::string& name, int64_t type, const void* data, int64_t n) {
  HONE_CHECK(file_ >= 0, "HDF5 file is closed");
  HONE_CHECK(n >= 0, "negative dataset size");
  HONE_CHECK(!exists(name), "dataset '", name, "' already exists in ", path_);
  const hsize_t dims[1] = {hsize_t(n)};
  Handle space(H5Screate_simple(1, dims, nullptr), H5Sclose);
  Handle lcpl(H5Pcreate(H5P_LINK_CREATE), H5Pclose);
  H5Pset_create_intermediate_group(lcpl.id, 1);
  Handle ds(H5Dcreate2(hid_t(file_), name.c_str(), hid_t(type), space.id, lcpl.id, H5P_DEFAULT, H5P_DEFAULT),
            H5Dclose);
  HONE_CHECK(ds.id >= 0, "cannot create dataset '", name, "' in ", path_);
  if (n > 0) {
    HONE_CHECK(H5Dwrite(ds.id, hid_t(type), H5S_ALL, H5S_ALL, H5P_DEFAULT, data) >= 0, "writing dataset '", name,
               "' in ", path_, " failed");
  }
}

void Hdf5File::write_f32(const std::string& name, const float* data, int64_t n) {
  write_1d(name, int64_t(H5T_NATIVE_FLOAT), data, n);
}
void Hdf5File::write_i64(const std::string& name, const int64_t* data, int64_t n) {
  write_1d(name, int64_t(H5T_NATIVE_INT64), data, n);
}
void Hdf5File::write_i32(const std::string& name, const int32_t* data, int64_t n) {
  write_1d(name, int64_t(H5T_NATIVE_INT32), data, n);
}

bool Hdf5File::exists(const std::string& name) const {
  HONE_CHECK(file_ >= 0, "HDF5 file is closed");
  if (name == "/") return true;
  // Every prefix must exist for H5Lexists to answer without error.
  size_t pos = 0;
  while (true) {
    pos = name.find('/', pos + 1);
    const std::string prefix = name.substr(0, pos);
    if (!prefix.empty() && prefix != "/" && H5Lexists(hid_t(file_), prefix.c_str(), H5P_DEFAULT) <= 0) return false;
    if (pos == std::string::npos) return true;
  }
}

int64_t Hdf5File::size(const std::string& name) const {
  HONE_USER_CHECK(exists(name), "no dataset '", name, "' in ", path_);
  Handle ds(H5Dopen2(hid_t(file_), name.c_str(), H5P_DEFAULT), H5Dclose);
  HONE_USER_CHECK(ds.id >= 0, "'", name, "' in ", path_, " is not a dataset");
  Handle space(H5Dget_space(ds.id), H5Sclose);
  HONE_USER_CHECK(H5Sget_simple_extent_ndims(space.id) == 1, "dataset '", name, "' in ", path_, " is not 1-D");
  hsize_t dims[1] = {0};
  H5Sget_simple_extent_dims(space.id, dims, nullptr);
  return int64_t(dims[0]);
}

void Hdf5File::read_1d(const std::string& name, int64_t type, void* data, int64_t n) const {
  if (n == 0) return;
  Handle ds(H5Dopen2(hid_t(file_), name.c_str(), H5P_DEFAULT), H5Dclose);
  HONE_CHECK(H5Dread(ds.id, hid_t(type), H5S_ALL, H5S_ALL, H5P_DEFAULT, data) >= 0, "reading dataset '", name,
             "' in ", path_, " failed");
}

std::vector<float> Hdf5File::read_f32(const std::string& name) const {
  std::vector<float> v(size_t(size(name)));
  read_1d(name, int64_t(H5T_NATIVE_FLOAT), v.data(), int64_t(v.size()));
  return v;
}

std::vector<int64_t> Hdf5File::read_i64(const std::string& name) const {
  std::vector<int64_t> v(size_t(size(name)));
  read_1d(name, int64_t(H5T_NATIVE_INT64), v.data(), int64_t(v.size()));
  return v;
}

void Hdf5File::set_attribute(const std::string& object, const std::string& key, const std::string& value) {
  HONE_CHECK(file_ >= 0, "HDF5 file is closed");
  Handle type(H5Tcopy(H5T_C_S1), H5Tclose);
  H5Tset_size(type.id, H5T_VARIABLE);
  H5Tset_cset(type.id, H5T_CSET_UTF8);
  Handle space(H5Screate(H5S_SCALAR), H5Sclose);
  if (H5Aexists_by_name(hid_t(file_), object.c_str(), key.c_str(), H5P_DEFAULT) > 0)
    H5Adelete_by_name(hid_t(file_), object.c_str(), key.c_str(), H5P_DEFAULT);
  Handle attr(H5Acreate_by_name(hid_t(file_), object.c_str(), key.c_str(), type.id, space.id, H5P_DEFAULT,
                                H5P_DEFAULT, H5P_DEFAULT),
              H5Aclose);
  HONE_CHECK(attr.id >= 0, "cannot create attribute '", key, "' on '", object, "' in ", path_);
  const char* s = value.c_str();
  HONE_CHECK(H5Awrite(attr.id, type.id, &s) >= 0, "writing attribute '", key, "' failed");
}

std::string Hdf5File::attribute(const std::string& object, const std::string& key) const {
  HONE_CHECK(file_ >= 0, "HDF5 file is closed");
  HONE_USER_CHECK(H5Aexists_by_name(hid_t(file_), object.c_str(), key.c_str(), H5P_DEFAULT) > 0, "no attribute '",
                  key, "' on '", object, "' in ", path_);
  Handle attr(H5Aopen_by_name(hid_t(file_), object.c_str(), key.c_str(), H5P_DEFAULT, H5P_DEFAULT), H5Aclose);
  Handle type(H5Tcopy(H5T_C_S1), H5Tclose);
  H5Tset_size(type.id, H5T_VARIABLE);
  H5Tset_cset(type.id, H5T_CSET_UTF8);
  char* s = nullptr;
  HONE_CHECK(H5Aread(attr.id, type.id, &s) >= 0, "reading attribute '", key, "' failed");
  std::string out = s ? s : "";
  H5free_memory(s);
  return out;
}

}  // namespace hone
