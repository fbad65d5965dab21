#include "infeed/internal/synthetic_rows.h"

#include <bit>

#include "base/synthetic.h"

// One clone per vector width, picked at load time: the 64-bit multiplies of Mix64
// are single instructions with AVX-512DQ and emulated with AVX2 otherwise.
#if defined(__x86_64__) && defined(__GNUC__) && !defined(__clang__)
#define TPUSIM_VECTOR_CLONES __attribute__((target_clones("arch=x86-64-v4", "arch=x86-64-v3", "default")))
#else
#define TPUSIM_VECTOR_CLONES
#endif

namespace tpusim::infeed::internal {
namespace {

// BitsToUnitFloat in float arithmetic: bits >> 40 has 24 bits, so the conversion and
// the power-of-two scale are exact and the result equals the double-based definition.
inline float UnitFloat(uint64_t bits) {
  return static_cast<float>(static_cast<uint32_t>(bits >> 40)) * 0x1p-23f - 1.0f;
}

// FloatToBFloat16 for values that cannot be NaN (UnitFloat's range), so the NaN
// branch is left out and the rounding vectorises.
inline uint16_t ToBFloat16(float value) {
  uint32_t bits = std::bit_cast<uint32_t>(value);
  return static_cast<uint16_t>((bits + 0x7fffu + ((bits >> 16) & 1u)) >> 16);
}

}  // namespace

TPUSIM_VECTOR_CLONES void FillFloat32Row(uint64_t row_key, int64_t first, int64_t n, float* out) {
  for (int64_t i = 0; i < n; ++i) out[i] = UnitFloat(SyntheticElementBits(row_key, first + i));
}

TPUSIM_VECTOR_CLONES void FillBFloat16Row(uint64_t row_key, int64_t first, int64_t n, uint16_t* out) {
  for (int64_t i = 0; i < n; ++i) out[i] = ToBFloat16(UnitFloat(SyntheticElementBits(row_key, first + i)));
}

void FillInt32Row(uint64_t row_key, int64_t first, int64_t n, uint64_t range, int32_t* out) {
  for (int64_t i = 0; i < n; ++i) {
    out[i] = static_cast<int32_t>(SyntheticElementBits(row_key, first + i) % range);
  }
}

void FillInt64Row(uint64_t row_key, int64_t first, int64_t n, uint64_t range, int64_t* out) {
  for (int64_t i = 0; i < n; ++i) {
    out[i] = static_cast<int64_t>(SyntheticElementBits(row_key, first + i) % range);
  }
}

TPUSIM_VECTOR_CLONES void FillByteRow(uint64_t row_key, int64_t first, int64_t n, uint8_t* out) {
  for (int64_t i = 0; i < n; ++i) out[i] = static_cast<uint8_t>(SyntheticElementBits(row_key, first + i) >> 56);
}

}  // namespace tpusim::infeed::internal
