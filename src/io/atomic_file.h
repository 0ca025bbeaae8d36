// Durable and atomic file writing: what the output file and the checkpoints rely on so that a crash or a kill at
// any moment leaves either the previous complete file or the new complete file, never a torn one.
//
//   write_file_atomic(path, text)                 temp sibling <path>.tmp-<pid>, fsync, rename over path, fsync folder
//   write_file_atomic_with(path, [](tmp){...})    the same when a library (HDF5) writes the temp file by its name
//   write_file_durable(path, text)                plain write + fsync (inside a folder that is renamed as a whole)
//
// I/O failures throw hone::UserError naming the path and the system's reason (disk full, permission, ...).
#pragma once

#include <functional>
#include <string>

namespace hone {

// The temporary sibling used by write_file_atomic*: "<path>.tmp-<pid>".
std::string atomic_temp_path(const std::string& path);

void write_file_atomic(const std::string& path, const std::string& content);
void write_file_atomic_with(const std::string& path, const std::function<void(const std::string& tmp_path)>& writer);
void write_file_durable(const std::string& path, const std::string& content);

// fsync of a file's data (opened read-only) and of a folder's entries (after a create, rename or unlink in it).
void fsync_path(const std::string& path);
void fsync_dir(const std::string& dir);

// rename(from, to) then fsync of to's folder (and from's folder when it differs).
void rename_durable(const std::string& from, const std::string& to);

// The whole content of a file; throws UserError when it cannot be read.
std::string read_file_text(const std::string& path);

}  // namespace hone
