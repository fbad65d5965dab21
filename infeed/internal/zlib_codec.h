// zlib for compressed dataset shards (`tpusim gen-data --compress`): the payload of
// a .npy file deflated as one zlib stream.
#pragma once

#include <cstddef>
#include <span>
#include <string_view>
#include <vector>

namespace tpusim::infeed::internal {

// The zlib stream of `raw` at the fastest level (random data barely compresses; the
// point is the decode work a real pipeline does). Throws Error on zlib failure.
std::vector<std::byte> Deflate(std::span<const std::byte> raw);

// Inflates the zlib stream `compressed` into exactly out.size() bytes. Throws Error
// naming `what` when the stream is corrupt or holds a different number of bytes.
void Inflate(std::span<const std::byte> compressed, std::span<std::byte> out, std::string_view what);

}  // namespace tpusim::infeed::internal
