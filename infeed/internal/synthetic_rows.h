// The inner loops of the synthetic generator (infeed/synthetic_source.h): one row of
// one feature at a time, elements [first, first + n) exactly as the row's words
// (base/synthetic_words.h) and the dtype's mapping define them, written without a
// branch per element so the compiler vectorises the hash (this file is built at -O3
// with AVX2/AVX-512 clones). A row may start or end inside a word (a partitioned
// slice, one element for the verifier).
#pragma once

#include <cstdint>

namespace tpusim::infeed::internal {

// out[i] = value of element first + i of the row whose SyntheticRowKey is row_key:
// float32  WordToUnitFloat(W(e)), in [-1, 1)
void FillFloat32Row(uint64_t row_key, int64_t first, int64_t n, float* out);
// bfloat16 ByteToUnitFloat of byte 2h + q of W(8i + j) for e = 32i + 16h + 2j + q (raw bits)
void FillBFloat16Row(uint64_t row_key, int64_t first, int64_t n, uint16_t* out);
// int32/int64 WordToRange(W(e), range), range <= 2^31
void FillInt32Row(uint64_t row_key, int64_t first, int64_t n, uint64_t range, int32_t* out);
void FillInt64Row(uint64_t row_key, int64_t first, int64_t n, uint64_t range, int64_t* out);
// uint8/int8 byte e % 4 of W(e / 4) (int8 reads the same byte as signed)
void FillByteRow(uint64_t row_key, int64_t first, int64_t n, uint8_t* out);

// One float element's value as the teacher reads it: float32, and bfloat16 widened.
float Float32Element(uint64_t row_key, int64_t element);
float BFloat16ElementAsFloat(uint64_t row_key, int64_t element);

}  // namespace tpusim::infeed::internal
