// Reading hone's output file back with the plain HDF5 C API in tests (independent of io/output_hdf5.*).
#pragma once

#include <hdf5.h>

#include <cstdint>
#include <string>
#include <vector>

namespace test_h5 {

// An open file (read-only), closed at scope exit; id < 0 when HDF5 could not open it.
struct File {
  hid_t id = -1;
  explicit File(const std::string& path) {
    H5E_BEGIN_TRY { id = H5Fopen(path.c_str(), H5F_ACC_RDONLY, H5P_DEFAULT); }
    H5E_END_TRY;
  }
  ~File() {
    if (id >= 0) H5Fclose(id);
  }
  File(const File&) = delete;
  File& operator=(const File&) = delete;
};

inline bool link_exists(hid_t loc, const std::string& path) {
  htri_t r = -1;
  H5E_BEGIN_TRY { r = H5Lexists(loc, path.c_str(), H5P_DEFAULT); }
  H5E_END_TRY;
  return r > 0;
}

inline H5I_type_t object_type(hid_t loc, const std::string& path) {
  hid_t o = H5Oopen(loc, path.c_str(), H5P_DEFAULT);
  if (o < 0) return H5I_BADID;
  H5I_type_t t = H5Iget_type(o);
  H5Oclose(o);
  return t;
}

inline size_t length(hid_t loc, const std::string& path) {
  hid_t d = H5Dopen2(loc, path.c_str(), H5P_DEFAULT);
  hid_t s = H5Dget_space(d);
  hsize_t dims[1] = {0};
  H5Sget_simple_extent_dims(s, dims, nullptr);
  H5Sclose(s);
  H5Dclose(d);
  return dims[0];
}

template <typename T>
std::vector<T> read(hid_t loc, const std::string& path, hid_t mem_type) {
  std::vector<T> v(length(loc, path));
  hid_t d = H5Dopen2(loc, path.c_str(), H5P_DEFAULT);
  if (!v.empty()) H5Dread(d, mem_type, H5S_ALL, H5S_ALL, H5P_DEFAULT, v.data());
  H5Dclose(d);
  return v;
}
inline std::vector<double> doubles(hid_t loc, const std::string& p) { return read<double>(loc, p, H5T_NATIVE_DOUBLE); }
inline std::vector<int64_t> int64s(hid_t loc, const std::string& p) { return read<int64_t>(loc, p, H5T_NATIVE_INT64); }

inline hid_t vlen_utf8() {
  hid_t t = H5Tcopy(H5T_C_S1);
  H5Tset_size(t, H5T_VARIABLE);
  H5Tset_cset(t, H5T_CSET_UTF8);
  return t;
}

inline std::vector<std::string> strings(hid_t loc, const std::string& path) {
  std::vector<char*> ptrs(length(loc, path), nullptr);
  hid_t d = H5Dopen2(loc, path.c_str(), H5P_DEFAULT);
  hid_t t = vlen_utf8();
  if (!ptrs.empty()) H5Dread(d, t, H5S_ALL, H5S_ALL, H5P_DEFAULT, ptrs.data());
  std::vector<std::string> out;
  for (char* p : ptrs) {
    out.emplace_back(p ? p : "");
    if (p) H5free_memory(p);
  }
  H5Tclose(t);
  H5Dclose(d);
  return out;
}

// A string attribute of the object at `path` ("." for the root); "<missing>" when absent.
inline std::string string_attr(hid_t loc, const std::string& path, const std::string& name) {
  if (H5Aexists_by_name(loc, path.c_str(), name.c_str(), H5P_DEFAULT) <= 0) return "<missing>";
  hid_t a = H5Aopen_by_name(loc, path.c_str(), name.c_str(), H5P_DEFAULT, H5P_DEFAULT);
  hid_t t = vlen_utf8();
  char* p = nullptr;
  H5Aread(a, t, &p);
  std::string s = p ? p : "";
  if (p) H5free_memory(p);
  H5Tclose(t);
  H5Aclose(a);
  return s;
}

inline int64_t int_attr(hid_t loc, const std::string& path, const std::string& name) {
  hid_t a = H5Aopen_by_name(loc, path.c_str(), name.c_str(), H5P_DEFAULT, H5P_DEFAULT);
  int64_t v = -1;
  H5Aread(a, H5T_NATIVE_INT64, &v);
  H5Aclose(a);
  return v;
}

}  // namespace test_h5
