// Output files that are either complete or absent. Every writer of tpusim (report,
// placement log, trace, parameters, datasets) writes PATH.tmp.<pid>, syncs it to
// disk and renames it over PATH, so a full disk or a crash never leaves a truncated
// file behind; on failure the temporary file is removed and the previous PATH, if
// any, is untouched. The checks below let a run refuse an unusable output path at
// setup, before the first step, instead of after all its work.
#pragma once

#include <cstddef>
#include <span>
#include <string>
#include <string_view>

namespace tpusim {

// One file being written. `label` names it in messages (e.g. "--report out.json").
// Not copyable; destroying it without Commit() removes the temporary file.
class AtomicFile {
 public:
  // Creates PATH.tmp.<pid>. Throws Error "<label>: cannot create ...: <reason>".
  AtomicFile(std::string path, std::string label);
  ~AtomicFile();
  AtomicFile(const AtomicFile&) = delete;
  AtomicFile& operator=(const AtomicFile&) = delete;

  // Appends bytes. Throws Error "<label>: write failed: <reason>" (e.g. no space).
  void Write(std::span<const std::byte> bytes);
  void Write(std::string_view text);
  // fsync, close and rename over the path. Throws Error naming the step that failed.
  void Commit();

 private:
  void Discard();

  std::string path_;
  std::string temp_path_;
  std::string label_;
  int fd_ = -1;
};

// Writes `text` to `path` atomically (AtomicFile). Throws Error as AtomicFile does.
void WriteFileAtomically(const std::string& path, const std::string& label, std::string_view text);

// Throws Error "<label>: ..." unless a file can be created at `path`: its folder
// exists and is writable (tested by creating and removing a temporary file there)
// and `path` is not a folder.
void CheckFileWritable(const std::string& path, const std::string& label);

// Throws Error "<label>: ..." unless `dir` is (or can be made as) a writable
// folder. Creates it when missing.
void CheckDirWritable(const std::string& dir, const std::string& label);

}  // namespace tpusim
