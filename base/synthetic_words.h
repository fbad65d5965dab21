// The 32-bit words a float32 or integer feature's synthetic values come from
// (infeed/synthetic_source.h; byte and bfloat16 features use base/synthetic_bytes.h): one counter-based hash per word
// of a row, cheap enough that a generator filling image-sized rows runs near memory speed.
#pragma once

#include <cstdint>

namespace tpusim {

// One row's word sequence: a 32-bit hash of the word's index, keyed by the row's
// 64-bit key. Chris Wellons' lowbias32 (two multiplies; its constants from his hash
// prospector) of index + the key's low half, with the key's high half xored in between
// the rounds, so rows whose index windows overlap still hold unrelated words. Each
// round is a bijection: the words of a row are distinct for 2^32 indices. The two
// 32-bit multiplies are one AVX2 instruction per eight lanes each (a 64-bit multiply
// is emulated there).
struct SyntheticRowWords {
  uint32_t offset;
  uint32_t tweak;

  constexpr explicit SyntheticRowWords(uint64_t row_key)
      : offset(static_cast<uint32_t>(row_key)), tweak(static_cast<uint32_t>(row_key >> 32)) {}

  // Word is uint32_t, or a GCC/Clang vector of them (the same operators, lane by lane).
  template <typename Word>
  constexpr Word operator()(Word word) const {
    Word x = word + offset;
    x ^= x >> 16;
    x *= 0x7feb352du;
    x ^= tweak;
    x ^= x >> 15;
    x *= 0x846ca68bu;
    return x ^ (x >> 16);
  }
};

// A float32 element: the word's top 24 bits spread over [-1, 1) (exact in float).
constexpr float WordToUnitFloat(uint32_t word_bits) { return static_cast<float>(word_bits >> 8) * 0x1p-23f - 1.0f; }

// An int element in [0, range) for range <= 2^32: the word scaled by range (a
// multiply and a shift, so it vectorises, unlike a modulo).
constexpr uint32_t WordToRange(uint32_t word_bits, uint64_t range) {
  return static_cast<uint32_t>((static_cast<uint64_t>(word_bits) * range) >> 32);
}

}  // namespace tpusim
