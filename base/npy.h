// Reading and writing NumPy .npy files (format version 1.0, little-endian, C order).
// Used by the file input source, `tpusim gen-data` and `--params-out`, so that
// datasets and trained parameters can be inspected outside tpusim.
#pragma once

#include <cstddef>
#include <cstdint>
#include <istream>
#include <string>
#include <vector>

namespace tpusim {

// A dense array as stored in a .npy file. `descr` is the NumPy dtype string
// ("<f4", "<i4", "<i8", "<u2" for bfloat16 bits); `data` holds the raw bytes.
struct NpyArray {
  std::string descr;
  std::vector<int64_t> shape;
  std::vector<std::byte> data;

  int64_t num_elements() const;
};

// Reads `path`. Throws Error naming the file when it cannot be opened, the header
// is malformed (including a shape whose byte size overflows), the layout is
// Fortran order or the payload is shorter than the header announces; nothing is
// allocated for a payload that is not there.
NpyArray ReadNpy(const std::string& path);
// The same from a seekable stream; `path` names it in messages.
NpyArray ReadNpy(std::istream& in, const std::string& path);

// What follows the header: `kRaw` bytes as the shape and dtype announce, or a
// `kCompressed` payload (FEATURE.npy.zlib) of any non-zero length.
enum class NpyPayload { kRaw, kCompressed };

// Reads only the header of `path` (descr and shape), leaving the payload unread;
// fails as ReadNpy does, a truncated payload included.
NpyArray ReadNpyHeader(const std::string& path, NpyPayload payload = NpyPayload::kRaw);

// Writes `array` to `path` atomically (base/atomic_file.h). Throws Error naming the
// file when it cannot be written or when data.size() does not match shape and dtype.
// `label` names the file in messages (default: the path).
void WriteNpy(const std::string& path, const NpyArray& array, const std::string& label = "");

// Bytes per element of a NumPy dtype string; throws Error for unsupported ones.
size_t NpyItemSize(const std::string& descr);

}  // namespace tpusim
