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

// The byte stream's blocks (base/synthetic_bytes.h) through the widest AES the CPU
// has (checked once): VAES, two blocks per 256-bit instruction, or AES-NI, one per
// 128-bit instruction, each with eight registers in flight to cover AESENC's latency;
// otherwise through the portable rounds. All three define the same bytes.
#if defined(__x86_64__) && defined(__GNUC__)
#define TPUSIM_AES_NI 1
#define TPUSIM_AES_TARGET __attribute__((target("aes")))
#define TPUSIM_VAES_TARGET __attribute__((target("aes,vaes,avx2")))

std::atomic<ByteKernels> chosen{ByteKernels::kWidest};

bool CpuHas(ByteKernels kernels) {
  static const bool aes = __builtin_cpu_supports("aes");
  static const bool vaes = aes && __builtin_cpu_supports("vaes") && __builtin_cpu_supports("avx2");
  switch (kernels) {
    case ByteKernels::kPortable:
      return true;
    case ByteKernels::kAesNi:
      return aes;
    case ByteKernels::kVaes:
      return vaes;
    case ByteKernels::kWidest:
      return true;
  }
  return false;
}

// The kernels in use: the one a test chose, else the widest this CPU has.
ByteKernels Kernels() {
  static const ByteKernels widest = CpuHas(ByteKernels::kVaes)    ? ByteKernels::kVaes
                                    : CpuHas(ByteKernels::kAesNi) ? ByteKernels::kAesNi
                                                                  : ByteKernels::kPortable;
  const ByteKernels k = chosen.load(std::memory_order_relaxed);
  return k == ByteKernels::kWidest ? widest : k;
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

// Two blocks per 256-bit register, block i in a lane's low 64 bits as in ArsBlocks.
struct VaesKeys {
  __m256i k[kSyntheticByteRounds + 1];
};

TPUSIM_VAES_TARGET inline VaesKeys LoadVaesKeys(const SyntheticRowBytes& bytes) {
  VaesKeys keys;
  for (int r = 0; r <= kSyntheticByteRounds; ++r) {
    keys.k[r] = _mm256_broadcastsi128_si256(
        _mm_loadu_si128(reinterpret_cast<const __m128i*>(bytes.round_keys[static_cast<size_t>(r)].data())));
  }
  return keys;
}

// StoreBFloat16Lanes for two blocks: unpacking interleaves within each 128-bit lane,
// so lo holds the first halves of both blocks and hi their second halves; the lane
// permutes put them back in block order.
TPUSIM_VAES_TARGET inline void StoreBFloat16Pair(__m256i pair, uint8_t* to) {
  const __m256i low = _mm256_and_si256(pair, _mm256_set1_epi8(0x7f));
  const __m256i high =
      _mm256_or_si256(_mm256_and_si256(pair, _mm256_set1_epi8(static_cast<char>(0x80))), _mm256_set1_epi8(0x3f));
  const __m256i lo = _mm256_unpacklo_epi8(low, high);
  const __m256i hi = _mm256_unpackhi_epi8(low, high);
  _mm256_storeu_si256(reinterpret_cast<__m256i*>(to), _mm256_permute2x128_si256(lo, hi, 0x20));
  _mm256_storeu_si256(reinterpret_cast<__m256i*>(to + 32), _mm256_permute2x128_si256(lo, hi, 0x31));
}

// count whole blocks from block first, 2 * kBlocksInFlight at a time; the last few
// through AES-NI.
template <bool kBFloat16>
TPUSIM_VAES_TARGET void WholeBlocksVaes(const SyntheticRowBytes& bytes, uint64_t first, int64_t count, void* out) {
  constexpr int64_t kBlocksPerRound = 2 * kBlocksInFlight;
  const VaesKeys keys = LoadVaesKeys(bytes);
  const __m256i two = _mm256_set_epi64x(0, 2, 0, 2);
  __m256i counter = _mm256_set_epi64x(0, static_cast<long long>(first + 1), 0, static_cast<long long>(first));
  auto* to = static_cast<uint8_t*>(out);
  int64_t b = 0;
  for (; b + kBlocksPerRound <= count; b += kBlocksPerRound) {
    __m256i s[kBlocksInFlight];
    for (int j = 0; j < kBlocksInFlight; ++j) {
      s[j] = _mm256_xor_si256(counter, keys.k[0]);
      counter = _mm256_add_epi64(counter, two);
    }
    for (int r = 1; r < kSyntheticByteRounds; ++r) {
      for (int j = 0; j < kBlocksInFlight; ++j) s[j] = _mm256_aesenc_epi128(s[j], keys.k[r]);
    }
    for (int j = 0; j < kBlocksInFlight; ++j) {
      const __m256i pair = _mm256_aesenclast_epi128(s[j], keys.k[kSyntheticByteRounds]);
      if constexpr (kBFloat16) {
        StoreBFloat16Pair(pair, to);
        to += 64;
      } else {
        _mm256_storeu_si256(reinterpret_cast<__m256i*>(to), pair);
        to += 32;
      }
    }
  }
  WholeBlocksAesNi<kBFloat16>(bytes, first + static_cast<uint64_t>(b), count - b, to);
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
  if (Kernels() != ByteKernels::kPortable) return BlockAesNi(bytes, i);
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
  const ByteKernels kernels = Kernels();
  if (kernels != ByteKernels::kPortable) {
    if (kernels == ByteKernels::kVaes) {
      WholeBlocksVaes<sizeof(T) == 2>(bytes, static_cast<uint64_t>(e / kBlock), whole, out);
    } else {
      WholeBlocksAesNi<sizeof(T) == 2>(bytes, static_cast<uint64_t>(e / kBlock), whole, out);
    }
    e += whole * kBlock;
    out += whole * kBlock;
  }
#endif
  while (end - e >= kBlock) partial(e + kBlock);
  if (e < end) partial(end);
}

}  // namespace

bool UseByteKernels(ByteKernels kernels) {
#ifdef TPUSIM_AES_NI
  if (!CpuHas(kernels)) return false;
  chosen.store(kernels);
  return true;
#else
  return kernels == ByteKernels::kPortable || kernels == ByteKernels::kWidest;
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
