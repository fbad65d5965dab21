#include "infeed/internal/synthetic_rows.h"

#include <algorithm>
#include <atomic>

#include "base/synthetic_bytes.h"
#include "base/synthetic_words.h"

#if defined(__x86_64__) && defined(__GNUC__)
#include <immintrin.h>
#endif

// One clone per vector width, picked at load time.
#if defined(__x86_64__) && defined(__GNUC__) && !defined(__clang__)
#define TPUSIM_VECTOR_CLONES __attribute__((target_clones("arch=x86-64-v4", "arch=x86-64-v3", "default")))
#else
#define TPUSIM_VECTOR_CLONES
#endif

namespace tpusim::infeed::internal {
namespace {

// The byte stream's blocks (base/synthetic_bytes.h) through AES-NI where the CPU has it
// (checked once), eight blocks in flight to cover AESENC's latency; otherwise through
// the portable rounds, which define the same bytes.
#if defined(__x86_64__) && defined(__GNUC__)
#define TPUSIM_AES_NI 1
#define TPUSIM_AES_TARGET __attribute__((target("aes")))

std::atomic<bool> portable_only{false};

bool HasAesNi() {
  static const bool has = __builtin_cpu_supports("aes");
  return has && !portable_only.load(std::memory_order_relaxed);
}

constexpr int kBlocksInFlight = 8;

struct ArsKeys {
  __m128i k[kSyntheticByteRounds + 1];
};

TPUSIM_AES_TARGET inline ArsKeys LoadKeys(const SyntheticRowBytes& bytes) {
  ArsKeys keys;
  for (int r = 0; r <= kSyntheticByteRounds; ++r) {
    keys.k[r] = _mm_loadu_si128(reinterpret_cast<const __m128i*>(bytes.round_keys[static_cast<size_t>(r)].data()));
  }
  return keys;
}

// Blocks first .. first + M - 1 into s, round by round across the blocks.
template <int M>
TPUSIM_AES_TARGET inline void ArsBlocks(const ArsKeys& keys, uint64_t first, __m128i* s) {
  for (int j = 0; j < M; ++j) {
    s[j] = _mm_xor_si128(_mm_set_epi64x(0, static_cast<long long>(first + static_cast<uint64_t>(j))), keys.k[0]);
  }
  for (int r = 1; r < kSyntheticByteRounds; ++r) {
    for (int j = 0; j < M; ++j) s[j] = _mm_aesenc_si128(s[j], keys.k[r]);
  }
  for (int j = 0; j < M; ++j) s[j] = _mm_aesenclast_si128(s[j], keys.k[kSyntheticByteRounds]);
}

// ByteToBFloat16Bits of the 16 bytes of a block, built bytewise in 128-bit lanes
// (Zen 1 splits each 256-bit operation in two): element b's low byte is b & 0x7f,
// its high byte (b & 0x80) | 0x3f, and interleaving the two gives the elements in order.
TPUSIM_AES_TARGET inline void StoreBFloat16Lanes(__m128i block, uint8_t* to) {
  const __m128i low = _mm_and_si128(block, _mm_set1_epi8(0x7f));
  const __m128i high = _mm_or_si128(_mm_and_si128(block, _mm_set1_epi8(static_cast<char>(0x80))), _mm_set1_epi8(0x3f));
  _mm_storeu_si128(reinterpret_cast<__m128i*>(to), _mm_unpacklo_epi8(low, high));
  _mm_storeu_si128(reinterpret_cast<__m128i*>(to + 16), _mm_unpackhi_epi8(low, high));
}

// M blocks from block first, stored as they are or as bfloat16 bits.
template <bool kBFloat16, int M>
TPUSIM_AES_TARGET inline uint8_t* StoreBlocks(const ArsKeys& keys, uint64_t first, uint8_t* to) {
  __m128i s[M];
  ArsBlocks<M>(keys, first, s);
  for (int j = 0; j < M; ++j) {
    if constexpr (kBFloat16) {
      StoreBFloat16Lanes(s[j], to);
      to += 32;
    } else {
      _mm_storeu_si128(reinterpret_cast<__m128i*>(to), s[j]);
      to += 16;
    }
  }
  return to;
}

// count whole blocks from block first.
template <bool kBFloat16>
TPUSIM_AES_TARGET void WholeBlocksAesNi(const SyntheticRowBytes& bytes, uint64_t first, int64_t count, void* out) {
  const ArsKeys keys = LoadKeys(bytes);
  auto* to = static_cast<uint8_t*>(out);
  int64_t b = 0;
  for (; b + kBlocksInFlight <= count; b += kBlocksInFlight) {
    to = StoreBlocks<kBFloat16, kBlocksInFlight>(keys, first + static_cast<uint64_t>(b), to);
  }
  for (; b < count; ++b) to = StoreBlocks<kBFloat16, 1>(keys, first + static_cast<uint64_t>(b), to);
}

TPUSIM_AES_TARGET AesBlock BlockAesNi(const SyntheticRowBytes& bytes, uint64_t i) {
  __m128i s;
  ArsBlocks<1>(LoadKeys(bytes), i, &s);
  AesBlock block;
  _mm_storeu_si128(reinterpret_cast<__m128i*>(block.data()), s);
  return block;
}
#endif

AesBlock BlockAt(const SyntheticRowBytes& bytes, uint64_t i) {
#ifdef TPUSIM_AES_NI
  if (HasAesNi()) return BlockAesNi(bytes, i);
#endif
  return bytes.Block(i);
}

uint8_t AsByte(uint8_t b) { return b; }
uint16_t AsBFloat16(uint8_t b) { return ByteToBFloat16Bits(b); }

// Elements [first, first + n) of a row of the byte stream, each byte b stored as
// ToElement(b): the whole blocks through AES-NI where there is one, the partial
// blocks at either end (a slice that starts or ends inside a block) byte by byte.
template <typename T, T (*ToElement)(uint8_t)>
void FillFromBlocks(uint64_t row_key, int64_t first, int64_t n, T* out) {
  constexpr int64_t kBlock = sizeof(AesBlock);
  const SyntheticRowBytes bytes(row_key);
  const int64_t end = first + n;
  int64_t e = first;
  auto partial = [&](int64_t until) {
    const AesBlock block = BlockAt(bytes, static_cast<uint64_t>(e / kBlock));
    for (; e < until; ++e) *out++ = ToElement(block[static_cast<size_t>(e % kBlock)]);
  };
  if (e % kBlock != 0) partial(std::min(end, (e / kBlock + 1) * kBlock));
  const int64_t whole = (end - e) / kBlock;
#ifdef TPUSIM_AES_NI
  if (HasAesNi()) {
    WholeBlocksAesNi<sizeof(T) == 2>(bytes, static_cast<uint64_t>(e / kBlock), whole, out);
    e += whole * kBlock;
    out += whole * kBlock;
  }
#endif
  while (end - e >= kBlock) partial(e + kBlock);
  if (e < end) partial(end);
}

}  // namespace

bool UsePortableByteKernels(bool portable) {
#ifdef TPUSIM_AES_NI
  portable_only.store(portable);
  return true;
#else
  return portable;
#endif
}

TPUSIM_VECTOR_CLONES void FillFloat32Row(uint64_t row_key, int64_t first, int64_t n, float* out) {
  const SyntheticRowWords words(row_key);
  auto word = static_cast<uint32_t>(first);
  for (int64_t i = 0; i < n; ++i, ++word) out[i] = WordToUnitFloat(words(word));
}

void FillBFloat16Row(uint64_t row_key, int64_t first, int64_t n, uint16_t* out) {
  FillFromBlocks<uint16_t, AsBFloat16>(row_key, first, n, out);
}

void FillByteRow(uint64_t row_key, int64_t first, int64_t n, uint8_t* out) {
  FillFromBlocks<uint8_t, AsByte>(row_key, first, n, out);
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
