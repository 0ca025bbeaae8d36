// HDF5 C API helpers for the output file (see output_hdf5.h).
#include "io/output_hdf5.h"

#include <unistd.h>

#include <algorithm>

#include "runtime/error.h"

namespace hone::h5out {

Handle::Handle(hid_t id, Closer closer, const char* what) : id_(id), closer_(closer) {
  if (id < 0) throw Error(cat("HDF5: ", what, " failed"));
}

Handle& Handle::operator=(Handle&& o) noexcept {
  if (this != &o) {
    reset();
    id_ = o.id_;
    closer_ = o.closer_;
    o.id_ = -1;
  }
  return *this;
}

void Handle::reset() {
  if (id_ >= 0 && closer_) closer_(id_);
  id_ = -1;
}

void check(herr_t status, const char* what) {
  if (status < 0) throw Error(cat("HDF5: ", what, " failed"));
}

namespace {

Handle utf8_string_type() {
  Handle t(H5Tcopy(H5T_C_S1), H5Tclose, "H5Tcopy");
  check(H5Tset_size(t, H5T_VARIABLE), "H5Tset_size");
  check(H5Tset_cset(t, H5T_CSET_UTF8), "H5Tset_cset");
  return t;
}

Handle link_create_plist() {
  Handle lcpl(H5Pcreate(H5P_LINK_CREATE), H5Pclose, "H5Pcreate(link)");
  check(H5Pset_create_intermediate_group(lcpl, 1), "H5Pset_create_intermediate_group");
  return lcpl;
}

// A 1-D dataset of n elements, unlimited maximum size (chunked), ready for one H5Dwrite of the whole of it.
Handle create_1d(hid_t loc, const std::string& name, hid_t type, size_t n) {
  hsize_t dims[1] = {n}, maxdims[1] = {H5S_UNLIMITED};
  Handle space(H5Screate_simple(1, dims, maxdims), H5Sclose, "H5Screate_simple");
  Handle dcpl(H5Pcreate(H5P_DATASET_CREATE), H5Pclose, "H5Pcreate(dataset)");
  hsize_t chunk[1] = {std::clamp<hsize_t>(n, 64, 4096)};
  check(H5Pset_chunk(dcpl, 1, chunk), "H5Pset_chunk");
  Handle lcpl = link_create_plist();
  return Handle(H5Dcreate2(loc, name.c_str(), type, space, lcpl, dcpl, H5P_DEFAULT), H5Dclose,
                "H5Dcreate2");
}

template <typename T>
Handle write_numbers(hid_t loc, const std::string& name, const std::vector<T>& v, hid_t file_type, hid_t mem_type) {
  Handle d = create_1d(loc, name, file_type, v.size());
  if (!v.empty()) check(H5Dwrite(d, mem_type, H5S_ALL, H5S_ALL, H5P_DEFAULT, v.data()), "H5Dwrite");
  return d;
}

// Opens a 1-D dataset and returns it with its length.
Handle open_1d(hid_t loc, const std::string& name, size_t* n) {
  Handle d(H5Dopen2(loc, name.c_str(), H5P_DEFAULT), H5Dclose, "H5Dopen2");
  Handle space(H5Dget_space(d), H5Sclose, "H5Dget_space");
  HONE_CHECK(H5Sget_simple_extent_ndims(space) == 1, "dataset ", name, " is not 1-D");
  hsize_t dims[1] = {0};
  check(H5Sget_simple_extent_dims(space, dims, nullptr), "H5Sget_simple_extent_dims");
  *n = static_cast<size_t>(dims[0]);
  return d;
}

template <typename T>
std::vector<T> read_numbers(hid_t loc, const std::string& name, hid_t mem_type) {
  size_t n = 0;
  Handle d = open_1d(loc, name, &n);
  Handle ft(H5Dget_type(d), H5Tclose, "H5Dget_type");
  H5T_class_t cls = H5Tget_class(ft);
  if (cls != H5T_INTEGER && cls != H5T_FLOAT) throw Error(cat("HDF5: dataset ", name, " is not numeric"));
  std::vector<T> v(n);
  if (n > 0) check(H5Dread(d, mem_type, H5S_ALL, H5S_ALL, H5P_DEFAULT, v.data()), "H5Dread");
  return v;
}

herr_t collect_dataset(hid_t group, const char* name, const H5L_info_t* info, void* data) {
  if (info->type != H5L_TYPE_HARD) return 0;
  hid_t obj = H5Oopen(group, name, H5P_DEFAULT);
  if (obj < 0) return -1;
  if (H5Iget_type(obj) == H5I_DATASET) static_cast<std::vector<std::string>*>(data)->push_back(name);
  H5Oclose(obj);
  return 0;
}

}  // namespace

Handle file_access_plist() {
  Handle fapl(H5Pcreate(H5P_FILE_ACCESS), H5Pclose, "H5Pcreate(file access)");
#if H5_VERSION_GE(1, 10, 7)
  check(H5Pset_file_locking(fapl, 0, 1), "H5Pset_file_locking");
#endif
  return fapl;
}

Handle create_file(const std::string& path) {
  Handle fapl = file_access_plist();
  return Handle(H5Fcreate(path.c_str(), H5F_ACC_TRUNC, H5P_DEFAULT, fapl), H5Fclose, "H5Fcreate");
}

Handle create_memory_file() {
  static int count = 0;  // the core driver tells files apart by name
  Handle fapl = file_access_plist();
  check(H5Pset_fapl_core(fapl, size_t(1) << 20, /*backing_store=*/0), "H5Pset_fapl_core");
  const std::string name = cat("hone-memory-", ::getpid(), "-", ++count, ".h5");
  return Handle(H5Fcreate(name.c_str(), H5F_ACC_TRUNC, H5P_DEFAULT, fapl), H5Fclose, "H5Fcreate(memory)");
}

std::string file_image(Handle& f) {
  check(H5Fflush(f, H5F_SCOPE_GLOBAL), "H5Fflush(memory)");
  const ssize_t n = H5Fget_file_image(f, nullptr, 0);
  if (n < 0) throw Error("HDF5: H5Fget_file_image failed");
  std::string bytes(size_t(n), '\0');
  if (H5Fget_file_image(f, bytes.data(), size_t(n)) != n) throw Error("HDF5: H5Fget_file_image failed");
  check(H5Fclose(f.release()), "H5Fclose(memory)");
  return bytes;
}

std::optional<Handle> open_file_readonly(const std::string& path) {
  Handle fapl = file_access_plist();
  hid_t f = -1;
  H5E_BEGIN_TRY { f = H5Fopen(path.c_str(), H5F_ACC_RDONLY, fapl); }
  H5E_END_TRY;
  if (f < 0) return std::nullopt;
  return Handle(f, H5Fclose, "H5Fopen");
}

Handle create_group(hid_t loc, const std::string& name) {
  Handle lcpl = link_create_plist();
  return Handle(H5Gcreate2(loc, name.c_str(), lcpl, H5P_DEFAULT, H5P_DEFAULT), H5Gclose, "H5Gcreate2");
}

bool exists(hid_t loc, const std::string& path) {
  std::string sofar;
  size_t start = 0;
  while (start <= path.size()) {
    size_t end = path.find('/', start);
    sofar += (sofar.empty() ? "" : "/") + path.substr(start, end == std::string::npos ? std::string::npos : end - start);
    htri_t r = -1;
    H5E_BEGIN_TRY { r = H5Lexists(loc, sofar.c_str(), H5P_DEFAULT); }
    H5E_END_TRY;
    if (r <= 0) return false;
    if (end == std::string::npos) break;
    start = end + 1;
  }
  return true;
}

Handle write_doubles(hid_t loc, const std::string& name, const std::vector<double>& v) {
  return write_numbers(loc, name, v, H5T_IEEE_F64LE, H5T_NATIVE_DOUBLE);
}

Handle write_int64s(hid_t loc, const std::string& name, const std::vector<int64_t>& v) {
  return write_numbers(loc, name, v, H5T_STD_I64LE, H5T_NATIVE_INT64);
}

Handle write_strings(hid_t loc, const std::string& name, const std::vector<std::string>& v) {
  Handle t = utf8_string_type();
  Handle d = create_1d(loc, name, t, v.size());
  std::vector<const char*> ptrs;
  ptrs.reserve(v.size());
  for (const auto& s : v) ptrs.push_back(s.c_str());
  if (!v.empty()) check(H5Dwrite(d, t, H5S_ALL, H5S_ALL, H5P_DEFAULT, ptrs.data()), "H5Dwrite(strings)");
  return d;
}

std::vector<double> read_doubles(hid_t loc, const std::string& name) {
  return read_numbers<double>(loc, name, H5T_NATIVE_DOUBLE);
}

std::vector<int64_t> read_int64s(hid_t loc, const std::string& name) {
  return read_numbers<int64_t>(loc, name, H5T_NATIVE_INT64);
}

std::vector<std::string> read_strings(hid_t loc, const std::string& name) {
  size_t n = 0;
  Handle d = open_1d(loc, name, &n);
  Handle ft(H5Dget_type(d), H5Tclose, "H5Dget_type");
  if (H5Tget_class(ft) != H5T_STRING || H5Tis_variable_str(ft) <= 0)
    throw Error(cat("HDF5: dataset ", name, " is not variable-length strings"));
  Handle t = utf8_string_type();
  std::vector<char*> ptrs(n, nullptr);
  if (n > 0) check(H5Dread(d, t, H5S_ALL, H5S_ALL, H5P_DEFAULT, ptrs.data()), "H5Dread(strings)");
  std::vector<std::string> out;
  out.reserve(n);
  for (char* p : ptrs) {
    out.emplace_back(p ? p : "");
    if (p) H5free_memory(p);
  }
  return out;
}

void set_attr(hid_t obj, const std::string& name, const std::string& value) {
  Handle t = utf8_string_type();
  Handle space(H5Screate(H5S_SCALAR), H5Sclose, "H5Screate");
  Handle a(H5Acreate2(obj, name.c_str(), t, space, H5P_DEFAULT, H5P_DEFAULT), H5Aclose, "H5Acreate2");
  const char* p = value.c_str();
  check(H5Awrite(a, t, &p), "H5Awrite(string)");
}

void set_attr(hid_t obj, const std::string& name, int64_t value) {
  Handle space(H5Screate(H5S_SCALAR), H5Sclose, "H5Screate");
  Handle a(H5Acreate2(obj, name.c_str(), H5T_STD_I64LE, space, H5P_DEFAULT, H5P_DEFAULT), H5Aclose, "H5Acreate2");
  check(H5Awrite(a, H5T_NATIVE_INT64, &value), "H5Awrite(int64)");
}

std::optional<std::string> get_string_attr(hid_t obj, const std::string& name) {
  if (H5Aexists(obj, name.c_str()) <= 0) return std::nullopt;
  Handle a(H5Aopen(obj, name.c_str(), H5P_DEFAULT), H5Aclose, "H5Aopen");
  Handle ft(H5Aget_type(a), H5Tclose, "H5Aget_type");
  if (H5Tget_class(ft) != H5T_STRING || H5Tis_variable_str(ft) <= 0) return std::nullopt;
  Handle t = utf8_string_type();
  char* p = nullptr;
  check(H5Aread(a, t, &p), "H5Aread(string)");
  std::string s = p ? p : "";
  if (p) H5free_memory(p);
  return s;
}

std::vector<std::string> list_datasets(hid_t group) {
  std::vector<std::string> names;
  check(H5Lvisit(group, H5_INDEX_NAME, H5_ITER_INC, collect_dataset, &names), "H5Lvisit");
  std::sort(names.begin(), names.end());
  return names;
}

namespace {
herr_t collect_link(hid_t, const char* name, const H5L_info_t*, void* data) {
  static_cast<std::vector<std::string>*>(data)->push_back(name);
  return 0;
}
}  // namespace

std::vector<std::string> list_links(hid_t group) {
  std::vector<std::string> names;
  check(H5Literate(group, H5_INDEX_NAME, H5_ITER_INC, nullptr, collect_link, &names), "H5Literate");
  return names;
}

}  // namespace hone::h5out
