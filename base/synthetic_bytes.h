// The byte stream a uint8, int8 or bfloat16 feature's synthetic values come from
// (infeed/synthetic_source.h): block i of a row (bytes 16i .. 16i + 15) is ARS-3 of
// the counter i keyed by the row's 64-bit key -- three AES rounds, the counter-based
// generator of Salmon et al., "Parallel random numbers: as easy as 1, 2, 3" (SC 2011),
// with two rounds fewer than their ARS-5. AES-NI runs two rounds per cycle per core,
// so the row kernels (infeed/internal/synthetic_rows.h) fill bytes faster than a
// multiply-based hash can; this file is the portable definition they follow.
#pragma once

#include <array>
#include <cstdint>

namespace tpusim {

// 16 bytes: the AES state, byte j at row j % 4, column j / 4 (the AES-NI layout).
using AesBlock = std::array<uint8_t, 16>;

// One AES encryption round (SubBytes, ShiftRows, MixColumns, then the round key
// xored in), the operation of x86 AESENC; the last round omits MixColumns (AESENCLAST).
AesBlock AesRound(const AesBlock& state, const AesBlock& round_key);
AesBlock AesLastRound(const AesBlock& state, const AesBlock& round_key);

// ARS round keys, each the row key's block plus r times Weyl's increments (64-bit
// lanes, little-endian): k_0 = (row key, 0) and k_r = k_0 + r * (0x9E3779B97F4A7C15,
// 0xBB67AE8584CAA73B), as ARS defines its key schedule.
inline constexpr int kSyntheticByteRounds = 3;
inline constexpr uint64_t kArsWeylLow = 0x9E3779B97F4A7C15ULL;
inline constexpr uint64_t kArsWeylHigh = 0xBB67AE8584CAA73BULL;

struct SyntheticRowBytes {
  std::array<AesBlock, kSyntheticByteRounds + 1> round_keys;

  explicit SyntheticRowBytes(uint64_t row_key);

  // Block i of the row: the counter (i, 0) xored with k_0, AESENC with k_1 and k_2,
  // AESENCLAST with k_3.
  AesBlock Block(uint64_t i) const;
};

// A bfloat16 element's raw bits from one byte b of the stream: sign b >> 7, exponent
// -1, mantissa the low 7 bits, so 256 values +-[0.5, 1) in steps of 2^-8, with integer
// operations only (no conversion).
constexpr uint16_t ByteToBFloat16Bits(uint32_t b) {
  return static_cast<uint16_t>(((b << 8) & 0x8000u) | 0x3f00u | (b & 0x7fu));
}

}  // namespace tpusim
