// The inner loops of the synthetic generator (infeed/synthetic_source.h): one row of
// one feature at a time, elements [first, first + n) exactly as the row's words
// (base/synthetic_words.h) or bytes (base/synthetic_bytes.h) and the dtype's mapping
// define them: word kernels written without a branch per element so the compiler
// vectorises the hash (this file is built at -O3 with AVX2/AVX-512 clones), byte
// kernels through VAES or AES-NI when the CPU has them. A row may start or end inside a word or
// a block (a partitioned slice, one element for the verifier).
#pragma once

#include <cstdint>

namespace tpusim::infeed::internal {

// out[i] = value of element first + i of the row whose SyntheticRowKey is row_key:
// float32  WordToUnitFloat(W(e)), in [-1, 1)
void FillFloat32Row(uint64_t row_key, int64_t first, int64_t n, float* out);
// bfloat16 ByteToBFloat16Bits(B(e)) (raw bits), B(e) = byte e % 16 of block e / 16
void FillBFloat16Row(uint64_t row_key, int64_t first, int64_t n, uint16_t* out);
// int32/int64 WordToRange(W(e), range), range <= 2^31
void FillInt32Row(uint64_t row_key, int64_t first, int64_t n, uint64_t range, int32_t* out);
void FillInt64Row(uint64_t row_key, int64_t first, int64_t n, uint64_t range, int64_t* out);
// uint8/int8 B(e) (int8 reads the same byte as signed)
void FillByteRow(uint64_t row_key, int64_t first, int64_t n, uint8_t* out);

// The byte kernels: the portable AES rounds, AES-NI (one block per instruction), VAES
// with AVX2 (two), or the widest of these the CPU has (the default).
enum class ByteKernels { kPortable, kAesNi, kVaes, kWidest };

// Tests: the byte kernels through the given path (every path defines the same bytes).
// Returns false, changing nothing, when this CPU lacks the instructions.
bool UseByteKernels(ByteKernels kernels);

}  // namespace tpusim::infeed::internal
