#include "infeed/internal/zlib_codec.h"

#include <zlib.h>

#include "base/error.h"

namespace tpusim::infeed::internal {

std::vector<std::byte> Deflate(std::span<const std::byte> raw) {
  uLongf size = compressBound(static_cast<uLong>(raw.size()));
  std::vector<std::byte> out(size);
  int rc = compress2(reinterpret_cast<Bytef*>(out.data()), &size, reinterpret_cast<const Bytef*>(raw.data()),
                     static_cast<uLong>(raw.size()), Z_BEST_SPEED);
  if (rc != Z_OK) Fail("zlib: compressing {} bytes failed (code {})", raw.size(), rc);
  out.resize(size);
  return out;
}

void Inflate(std::span<const std::byte> compressed, std::span<std::byte> out, std::string_view what) {
  z_stream stream{};
  if (inflateInit(&stream) != Z_OK) Fail("{}: zlib inflateInit failed", what);
  stream.next_in = reinterpret_cast<Bytef*>(const_cast<std::byte*>(compressed.data()));
  stream.avail_in = static_cast<uInt>(compressed.size());
  stream.next_out = reinterpret_cast<Bytef*>(out.data());
  stream.avail_out = static_cast<uInt>(out.size());
  int rc = inflate(&stream, Z_FINISH);
  const uLong produced = stream.total_out;
  inflateEnd(&stream);
  if (rc != Z_STREAM_END || produced != out.size()) {
    Fail("{}: corrupt zlib payload: inflated {} bytes (zlib code {}), the header needs {}", what, produced, rc,
         out.size());
  }
}

}  // namespace tpusim::infeed::internal
