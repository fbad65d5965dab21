// What a path is before tpusim opens it. Every reader of an input (run configs,
// topology files, dataset.yaml, .npy shards) checks here first, so a FIFO, socket,
// device or folder in place of a file is one line naming the path and what it is
// ("x.npy: is a FIFO, not a regular file") instead of a read that blocks forever
// (open() of a FIFO waits for a writer) or a misleading "no such file". The checks
// use stat(), which never opens the path, so they cannot block.
#pragma once

#include <string>

namespace tpusim {

enum class FileKind { kMissing, kRegular, kDirectory, kFifo, kSocket, kCharDevice, kBlockDevice, kOther };

// What `path` is, symbolic links followed (a dangling link is kMissing, as is a
// path stat() cannot reach). Never opens the path. Thread-safe.
FileKind KindOf(const std::string& path);

// "a FIFO", "a socket", "a character device", "a block device", "a folder", ...
const char* KindName(FileKind kind);

// Throws Error "<path>: is a FIFO, not a regular file" (likewise a socket, a
// device, a folder) when `path` exists and is not a regular file, and
// "<path>: cannot reach it: Permission denied" (likewise a symlink loop, a name
// too long) when stat() fails for a reason other than absence. A missing path
// returns: each reader says "missing" in its own words.
void RefuseNonRegularFile(const std::string& path);

// Same for paths that may also be a name or a folder (a topology name, a CONFIG
// that may be either): only FIFOs, sockets and devices are refused.
void RefuseSpecialFile(const std::string& path);

// Throws Error "<label>: is a FIFO, not a folder" when `path` exists and is not a
// folder (or cannot be reached, as above); a missing path returns. `label` names
// the path in the message (the path itself when empty).
void RefuseNonDirectory(const std::string& path, const std::string& label = {});

}  // namespace tpusim
