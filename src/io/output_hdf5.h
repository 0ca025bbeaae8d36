// Small HDF5 C API helpers for the output file (StepOutput): owned handles, 1-D datasets of float64, int64 and
// UTF-8 strings, scalar attributes, and a walk over the datasets below a group. Failures throw hone::Error
// naming the HDF5 call; the caller adds which file it was writing.
// Host-only header (includes hdf5.h): never include it from a header that a .cu file includes.
#pragma once

#include <hdf5.h>

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace hone::h5out {

// An HDF5 identifier closed by the right H5?close when the handle goes away.
class Handle {
 public:
  using Closer = herr_t (*)(hid_t);
  Handle() = default;
  Handle(hid_t id, Closer closer, const char* what);  // throws hone::Error when id < 0
  ~Handle() { reset(); }
  Handle(Handle&& o) noexcept : id_(o.id_), closer_(o.closer_) { o.id_ = -1; }
  Handle& operator=(Handle&& o) noexcept;
  Handle(const Handle&) = delete;
  Handle& operator=(const Handle&) = delete;
  hid_t get() const { return id_; }
  operator hid_t() const { return id_; }
  void reset();
  hid_t release() {  // gives up ownership (to close by hand and check the result)
    hid_t id = id_;
    id_ = -1;
    return id;
  }

 private:
  hid_t id_ = -1;
  Closer closer_ = nullptr;
};

void check(herr_t status, const char* what);  // throws hone::Error when status < 0

// File access properties: latest-compatible format off (readable by older HDF5), no file locking (hone never
// changes a file in place: it writes a private temporary file and renames it, so locks protect nothing and fail
// on file systems without flock).
Handle file_access_plist();

Handle create_file(const std::string& path);              // truncates
// A file built in memory (HDF5's core driver without a backing store) and its bytes: HDF5 never writes to the disk,
// so a full disk cannot fail inside the library (a failed H5Fclose once left the file open there and the library
// crashed at exit); hone writes the image itself (write_file_atomic), a failure one UserError naming the path.
Handle create_memory_file();
std::string file_image(Handle& f);  // flushes and closes f (which is then empty) and returns the file's bytes
std::optional<Handle> open_file_readonly(const std::string& path);  // nullopt when HDF5 cannot open it
Handle create_group(hid_t loc, const std::string& name);  // intermediate groups are created too
bool exists(hid_t loc, const std::string& path);          // every link along a '/' path exists

// 1-D chunked extendible datasets (intermediate groups created). Readers check the stored type is convertible.
Handle write_doubles(hid_t loc, const std::string& name, const std::vector<double>& v);
Handle write_int64s(hid_t loc, const std::string& name, const std::vector<int64_t>& v);
Handle write_strings(hid_t loc, const std::string& name, const std::vector<std::string>& v);  // vlen UTF-8
std::vector<double> read_doubles(hid_t loc, const std::string& name);
std::vector<int64_t> read_int64s(hid_t loc, const std::string& name);
std::vector<std::string> read_strings(hid_t loc, const std::string& name);

// Scalar attributes on an object (vlen UTF-8 strings; int64).
void set_attr(hid_t obj, const std::string& name, const std::string& value);
void set_attr(hid_t obj, const std::string& name, int64_t value);
std::optional<std::string> get_string_attr(hid_t obj, const std::string& name);

// The paths (relative to the group, '/'-separated) of every dataset below group, sorted.
std::vector<std::string> list_datasets(hid_t group);
// The names of the links directly in group (of any kind: external links are not followed), sorted.
std::vector<std::string> list_links(hid_t group);

}  // namespace hone::h5out
