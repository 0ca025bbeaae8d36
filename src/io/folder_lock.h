// The lock of a folder a run writes and deletes in (output.dir, checkpoint.dir): `<dir>/hone.lock`, held with
// flock(2) for as long as the run lives and naming its holder (host, pid, Slurm job id, start time). A second run
// on the same folder is refused with the holder's name; the kernel drops the lock when the holder ends, however it
// ends, so a lock left by a killed run is no lock. A Slurm requeue (the same SLURM_JOB_ID) that starts while the
// first copy still ends waits for it (up to kRequeueWaitS). Where the file system has no flock (an NFS mount without
// a lock manager), the file's content decides: a holder on this host whose pid is gone, or of this Slurm job, is
// taken over; any other holder refuses. doc/runtime.md, "One run per folder".
#pragma once

#include <string>

namespace hone {

class FolderLock {
 public:
  static constexpr double kRequeueWaitS = 120;

  // Creates dir when needed and takes its lock; throws UserError naming `key` (the deck key of the folder), the
  // folder and the holder when another run holds it.
  FolderLock(const std::string& dir, const std::string& key);
  ~FolderLock();
  FolderLock(const FolderLock&) = delete;
  FolderLock& operator=(const FolderLock&) = delete;

  const std::string& path() const { return path_; }

  // This process as a holder: "host <h>, pid <p>[, Slurm job <id>], since <iso time>".
  static std::string holder_text();

 private:
  std::string path_;
  int fd_ = -1;
};

}  // namespace hone
