// CRC-32C (Castagnoli, reflected polynomial 0x82F63B78), the checksum of
// TensorFlow's TFRecord framing, and TensorFlow's mask of it. Our own
// slicing-by-8 implementation: eight 256-entry tables built at compile time let
// the loop consume eight bytes per step. Check value: Crc32c("123456789") =
// 0xE3069283.
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>
#include <string_view>

namespace tpusim {

// CRC-32C of `bytes` continuing from `crc` (0 to start): Crc32c(b, Crc32c(a))
// equals the CRC of a followed by b. Pure; thread-safe.
uint32_t Crc32c(std::span<const std::byte> bytes, uint32_t crc = 0);
inline uint32_t Crc32c(std::string_view text, uint32_t crc = 0) {
  return Crc32c(std::as_bytes(std::span(text.data(), text.size())), crc);
}

// TensorFlow's masked CRC (tsl/lib/hash/crc32c.h): a CRC stored beside the data
// it covers is rotated and offset, so a CRC of bytes that themselves hold CRCs
// stays well distributed.
inline constexpr uint32_t kCrcMaskDelta = 0xa282ead8u;
inline constexpr uint32_t MaskCrc32c(uint32_t crc) { return ((crc >> 15) | (crc << 17)) + kCrcMaskDelta; }
inline constexpr uint32_t UnmaskCrc32c(uint32_t masked) {
  const uint32_t rot = masked - kCrcMaskDelta;
  return (rot >> 17) | (rot << 15);
}

}  // namespace tpusim
