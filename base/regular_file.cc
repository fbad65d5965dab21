#include "base/regular_file.h"

#include <sys/stat.h>

#include <cerrno>
#include <cstring>

#include "base/error.h"

namespace tpusim {
namespace {

// A path stat() cannot reach for a reason other than its absence (EACCES on a
// folder above it, ELOOP, ENAMETOOLONG): one line naming the cause, rather than
// letting a later open or std::filesystem call fail with less to say.
void RefuseUnreachable(const std::string& path, const std::string& label) {
  struct stat info {};
  if (::stat(path.c_str(), &info) == 0 || errno == ENOENT || errno == ENOTDIR) return;
  Fail("{}: cannot reach it: {}", label, std::strerror(errno));
}

}  // namespace

FileKind KindOf(const std::string& path) {
  struct stat info {};
  if (::stat(path.c_str(), &info) != 0) return FileKind::kMissing;
  switch (info.st_mode & S_IFMT) {
    case S_IFREG:
      return FileKind::kRegular;
    case S_IFDIR:
      return FileKind::kDirectory;
    case S_IFIFO:
      return FileKind::kFifo;
    case S_IFSOCK:
      return FileKind::kSocket;
    case S_IFCHR:
      return FileKind::kCharDevice;
    case S_IFBLK:
      return FileKind::kBlockDevice;
    default:
      return FileKind::kOther;
  }
}

const char* KindName(FileKind kind) {
  switch (kind) {
    case FileKind::kMissing:
      return "missing";
    case FileKind::kRegular:
      return "a regular file";
    case FileKind::kDirectory:
      return "a folder";
    case FileKind::kFifo:
      return "a FIFO";
    case FileKind::kSocket:
      return "a socket";
    case FileKind::kCharDevice:
      return "a character device";
    case FileKind::kBlockDevice:
      return "a block device";
    case FileKind::kOther:
      return "not a file";
  }
  return "not a file";
}

void RefuseNonRegularFile(const std::string& path) {
  const FileKind kind = KindOf(path);
  if (kind == FileKind::kMissing) RefuseUnreachable(path, path);
  if (kind == FileKind::kMissing || kind == FileKind::kRegular) return;
  Fail("{}: is {}, not a regular file", path, KindName(kind));
}

void RefuseSpecialFile(const std::string& path) {
  const FileKind kind = KindOf(path);
  if (kind == FileKind::kMissing) RefuseUnreachable(path, path);
  if (kind == FileKind::kMissing || kind == FileKind::kRegular || kind == FileKind::kDirectory) return;
  Fail("{}: is {}, not a regular file", path, KindName(kind));
}

void RefuseNonDirectory(const std::string& path, const std::string& label) {
  const std::string& name = label.empty() ? path : label;
  const FileKind kind = KindOf(path);
  if (kind == FileKind::kMissing) RefuseUnreachable(path, name);
  if (kind == FileKind::kMissing || kind == FileKind::kDirectory) return;
  Fail("{}: is {}, not a folder", name, KindName(kind));
}

}  // namespace tpusim
