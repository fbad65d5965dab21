#include "infeed/internal/synthetic_rows.h"

#include <bit>
#include <cstring>

#include "base/synthetic_words.h"

// One clone per vector width, picked at load time.
#if defined(__x86_64__) && defined(__GNUC__) && !defined(__clang__)
#define TPUSIM_VECTOR_CLONES __attribute__((target_clones("arch=x86-64-v4", "arch=x86-64-v3", "default")))
#else
#define TPUSIM_VECTOR_CLONES
#endif

namespace tpusim::infeed::internal {
namespace {

static_assert(std::endian::native == std::endian::little,
              "the byte kernel stores a word's bytes as they lie in memory, lowest first");

// Byte k of a word, lowest first: element 4w + k of a byte or bfloat16 row.
constexpr uint32_t ByteOf(uint32_t word_bits, int k) { return (word_bits >> (8 * k)) & 0xffu; }

// The raw bits of a bfloat16 element: ByteToUnitFloat is exact in bfloat16, so its
// float's top half is the value (no rounding).
constexpr uint16_t BFloat16Bits(uint32_t byte_bits) {
  return static_cast<uint16_t>(std::bit_cast<uint32_t>(ByteToUnitFloat(byte_bits)) >> 16);
}

uint8_t ByteElement(const SyntheticRowWords& words, int64_t element) {
  return static_cast<uint8_t>(ByteOf(words(static_cast<uint32_t>(element / 4)), static_cast<int>(element % 4)));
}

// bfloat16 elements in blocks of 32 from eight words: element 32b + 16h + 2j + q is
// byte 2h + q of word 8b + j, so a block is two vectors of eight 32-bit lanes, each
// lane two elements (bytes 0, 1 of its word, then bytes 2, 3), with no shuffle across
// lanes.
constexpr int kBFloat16Block = 32;

uint16_t BFloat16Element(const SyntheticRowWords& words, int64_t element) {
  const int64_t block = element / kBFloat16Block, at = element % kBFloat16Block;
  const auto word = static_cast<uint32_t>(8 * block + (at % 16) / 2);
  return BFloat16Bits(ByteOf(words(word), static_cast<int>(2 * (at / 16) + at % 2)));
}

typedef uint32_t U32x8 __attribute__((vector_size(32)));
typedef int32_t I32x8 __attribute__((vector_size(32)));
typedef float F32x8 __attribute__((vector_size(32)));
typedef uint8_t U8x32 __attribute__((vector_size(32)));
typedef uint16_t U16x16 __attribute__((vector_size(32)));

// Byte k of each lane, zero-extended: a mask or a shift for the outer bytes, one
// byte shuffle within each 16-byte half for the inner ones (spreading the work over
// the vector ports).
template <int K>
inline I32x8 ByteOfLanes(U32x8 bits) {
  if constexpr (K == 0) return reinterpret_cast<I32x8>(bits & 0xffu);
  if constexpr (K == 3) return reinterpret_cast<I32x8>(bits >> 24);
  constexpr uint8_t Z = 32;  // an index into the zero vector
  const U8x32 mask = {K,      Z,      Z,      Z,      4 + K,  Z,      Z,      Z,      8 + K,  Z,      Z,
                      Z,      12 + K, Z,      Z,      Z,      16 + K, Z,      Z,      Z,      20 + K, Z,
                      Z,      Z,      24 + K, Z,      Z,      Z,      28 + K, Z,      Z,      Z};
  return reinterpret_cast<I32x8>(__builtin_shuffle(reinterpret_cast<U8x32>(bits), U8x32{}, mask));
}

// ByteToUnitFloat of byte k of each lane.
template <int K>
inline U16x16 UnitFloatsOfByte(U32x8 bits) {
  return reinterpret_cast<U16x16>(__builtin_convertvector(ByteOfLanes<K>(bits), F32x8) * 0x1p-7f - 1.0f);
}

// Lane by lane the top halves of two float vectors' lanes: a's low, b's high.
inline U16x16 TopHalves(U16x16 a, U16x16 b) {
  return __builtin_shuffle(a, b, U16x16{1, 17, 3, 19, 5, 21, 7, 23, 9, 25, 11, 27, 13, 29, 15, 31});
}

// One block: two lanes' worth of elements per word, low element in the low half.
inline void FillBFloat16Block(const SyntheticRowWords& words, uint32_t first_word, uint16_t* out) {
  const U32x8 bits = words(U32x8{0, 1, 2, 3, 4, 5, 6, 7} + first_word);
  const U16x16 low = TopHalves(UnitFloatsOfByte<0>(bits), UnitFloatsOfByte<1>(bits));
  const U16x16 high = TopHalves(UnitFloatsOfByte<2>(bits), UnitFloatsOfByte<3>(bits));
  std::memcpy(out, &low, sizeof(low));
  std::memcpy(out + 16, &high, sizeof(high));
}

// A byte row: the elements before the first whole word and after the last one one at
// a time, the whole words in between stored as they are (byte k of word w is element
// 4w + k).
inline void FillBytes(uint64_t row_key, int64_t first, int64_t n, uint8_t* out) {
  const SyntheticRowWords words(row_key);
  const int64_t end = first + n;
  int64_t e = first;
  for (; e < end && e % 4 != 0; ++e) *out++ = ByteElement(words, e);
  auto word = static_cast<uint32_t>(e / 4);
  for (; e + 4 <= end; e += 4, ++word, out += 4) {
    const uint32_t bits = words(word);
    std::memcpy(out, &bits, 4);
  }
  for (; e < end; ++e) *out++ = ByteElement(words, e);
}

}  // namespace

float Float32Element(uint64_t row_key, int64_t element) {
  return WordToUnitFloat(SyntheticRowWords(row_key)(static_cast<uint32_t>(element)));
}

float BFloat16ElementAsFloat(uint64_t row_key, int64_t element) {
  return std::bit_cast<float>(static_cast<uint32_t>(BFloat16Element(SyntheticRowWords(row_key), element)) << 16);
}

TPUSIM_VECTOR_CLONES void FillFloat32Row(uint64_t row_key, int64_t first, int64_t n, float* out) {
  const SyntheticRowWords words(row_key);
  auto word = static_cast<uint32_t>(first);
  for (int64_t i = 0; i < n; ++i, ++word) out[i] = WordToUnitFloat(words(word));
}

TPUSIM_VECTOR_CLONES void FillBFloat16Row(uint64_t row_key, int64_t first, int64_t n, uint16_t* out) {
  const SyntheticRowWords words(row_key);
  const int64_t end = first + n;
  int64_t e = first;
  for (; e < end && e % kBFloat16Block != 0; ++e) *out++ = BFloat16Element(words, e);
  auto word = static_cast<uint32_t>(e / kBFloat16Block * 8);
#pragma GCC unroll 2
  for (; e + kBFloat16Block <= end; e += kBFloat16Block, word += 8, out += kBFloat16Block) {
    FillBFloat16Block(words, word, out);
  }
  for (; e < end; ++e) *out++ = BFloat16Element(words, e);
}

TPUSIM_VECTOR_CLONES void FillByteRow(uint64_t row_key, int64_t first, int64_t n, uint8_t* out) {
  FillBytes(row_key, first, n, out);
}

TPUSIM_VECTOR_CLONES void FillInt32Row(uint64_t row_key, int64_t first, int64_t n, uint64_t range, int32_t* out) {
  const SyntheticRowWords words(row_key);
  auto word = static_cast<uint32_t>(first);
  for (int64_t i = 0; i < n; ++i, ++word) out[i] = static_cast<int32_t>(WordToRange(words(word), range));
}

TPUSIM_VECTOR_CLONES void FillInt64Row(uint64_t row_key, int64_t first, int64_t n, uint64_t range, int64_t* out) {
  const SyntheticRowWords words(row_key);
  auto word = static_cast<uint32_t>(first);
  for (int64_t i = 0; i < n; ++i, ++word) out[i] = WordToRange(words(word), range);
}

}  // namespace tpusim::infeed::internal
