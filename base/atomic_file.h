// Output files that are either complete or absent. Every writer of tpusim (report,
// placement log, trace, parameters, datasets) writes PATH.tmp.<pid>, syncs it to
// disk and renames it over PATH, so a full disk or a crash never leaves a truncated
// file behind; on failure the temporary file is removed and the previous PATH, if
// any, is untouched. What is not a regular file is never renamed over: a symbolic
// link is followed and its target replaced (the link stays a link); a character
// device (a copy of /dev/null, a terminal) or a FIFO with a reader is written in
// place, every write checked (a /dev/full fails with ENOSPC); a folder, a socket or
// a block device is refused. The checks below let a run refuse an unusable output
// path at setup, before the first step, instead of after all its work.
#pragma once

#include <cstddef>
#include <span>
#include <string>
#include <string_view>

namespace tpusim {

// One file being written. `label` names it in messages (e.g. "--report out.json").
// Not copyable; destroying it without Commit() removes the temporary file (a
// device or FIFO written in place is only closed).
class AtomicFile {
 public:
  // Creates PATH.tmp.<pid> next to PATH (next to the final target when PATH is a
  // symbolic link), or opens a character device or FIFO in place. Throws Error
  // "<label>: cannot create ...: <reason>", "<label>: is a folder; give a file path",
  // "<label>: is a FIFO with no reader ..." or "<label>: is a socket ...".
  AtomicFile(std::string path, std::string label);
  ~AtomicFile();
  AtomicFile(const AtomicFile&) = delete;
  AtomicFile& operator=(const AtomicFile&) = delete;

  // Appends bytes. Throws Error "<label>: write failed: <reason> (<ERRNO>...)"
  // (e.g. No space left on device (ENOSPC)).
  void Write(std::span<const std::byte> bytes);
  void Write(std::string_view text);
  // fsync, close and rename over the path (in place: close). Throws Error naming
  // the step that failed.
  void Commit();

 private:
  void OpenInPlace();
  void Discard();

  std::string path_;  // what is replaced: the final target of a symbolic link
  std::string temp_path_;
  std::string label_;
  bool in_place_ = false;
  int fd_ = -1;
};

// Writes `text` to `path` atomically (AtomicFile). Throws Error as AtomicFile does.
void WriteFileAtomically(const std::string& path, const std::string& label, std::string_view text);

// Whether `path` (symbolic links followed) is written in place: a character device
// or a FIFO. --params-out given one writes every array into it.
bool WritesInPlace(const std::string& path);

// Throws Error "<label>: ..." unless a file can be written at `path`: a character
// device that opens for writing; a FIFO (not opened here: a reader would see the
// end of its input); else a file whose folder (the link target's, for a symbolic
// link) exists and is writable (tested by creating and removing a temporary file
// there) and that is not a folder, a socket or a block device.
void CheckFileWritable(const std::string& path, const std::string& label);

// Throws Error "<label>: ..." unless `dir` is (or can be made as) a writable
// folder, or is written in place (WritesInPlace). Creates it when missing.
void CheckDirWritable(const std::string& dir, const std::string& label);

// Throws Error "<label>: ..." unless `dir` is (or can be made as) a writable
// folder: "is a FIFO, not a folder" (likewise a regular file, a device, a
// socket), "cannot reach it: Too many levels of symbolic links", "cannot create
// the folder: Read-only file system", or the failed creation of a probe file in
// it. Creates it when missing.
void CheckFolderWritable(const std::string& dir, const std::string& label);

}  // namespace tpusim
