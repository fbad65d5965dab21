// The lock on a checkpoint root: the run that writes a checkpoint.dir holds
// ROOT/LOCK for as long as it runs, so a second run saving into the same folder
// refuses at set-up instead of overwriting the first one's saves. The file holds
// the holder's pid and host (for the second run's message) and is locked with
// flock(), which the kernel drops when the holder dies however it dies; a clean
// release removes the file. A LOCK left by a process that died (killed, or
// brought down by MPI_Abort) names a pid no longer alive on this host: it is
// stale, and the next run takes it over and says so.
#pragma once

#include <cstdint>
#include <optional>
#include <string>

namespace tpusim::checkpoint {

// Who holds (or held) a lock: what its LOCK file says.
struct LockHolder {
  int64_t pid = 0;
  std::string host;
};

// ROOT/LOCK, held from Take() until destruction. Not copyable; movable.
class DirLock {
 public:
  // Takes the lock of the checkpoint root `dir` (which must exist). Throws Error
  // "<label>: in use by the run of pid P on host H (it holds DIR/LOCK) ..." when
  // a live run holds it, or when its LOCK file names a process on another host
  // (which this host cannot ask), and "<label>: ..." naming the LOCK file when it
  // cannot be made or is not a regular file. A LOCK of a pid that is no longer
  // alive on this host is taken over: stale() then names that holder.
  static DirLock Take(const std::string& dir, const std::string& label);
  ~DirLock();
  DirLock(DirLock&& other) noexcept;
  DirLock& operator=(DirLock&& other) noexcept;
  DirLock(const DirLock&) = delete;
  DirLock& operator=(const DirLock&) = delete;

  // The dead holder whose lock was taken over, if any.
  const std::optional<LockHolder>& stale() const { return stale_; }
  const std::string& path() const { return path_; }

 private:
  DirLock(std::string path, int fd, std::optional<LockHolder> stale);
  // Removes the LOCK file and drops the flock; nothing once released.
  void Release() noexcept;

  std::string path_;
  int fd_ = -1;
  std::optional<LockHolder> stale_;
};

}  // namespace tpusim::checkpoint
