// The inner loops of the synthetic generator (infeed/synthetic_source.h): one row of
// one feature at a time, element values exactly as SyntheticElementBits and the
// dtype's mapping define them, written without a branch per element so the compiler
// vectorises the hash (this file is built at -O3 with AVX2/AVX-512 clones).
#pragma once

#include <cstdint>

namespace tpusim::infeed::internal {

// out[i] = value of element first + i of the row whose SyntheticRowKey is row_key:
// float32  BitsToUnitFloat(bits), in [-1, 1)
void FillFloat32Row(uint64_t row_key, int64_t first, int64_t n, float* out);
// bfloat16 the float32 value rounded to nearest-even bfloat16 (raw bits)
void FillBFloat16Row(uint64_t row_key, int64_t first, int64_t n, uint16_t* out);
// int32/int64 bits % range
void FillInt32Row(uint64_t row_key, int64_t first, int64_t n, uint64_t range, int32_t* out);
void FillInt64Row(uint64_t row_key, int64_t first, int64_t n, uint64_t range, int64_t* out);
// uint8/int8 the top byte of bits (int8 reads the same byte as signed)
void FillByteRow(uint64_t row_key, int64_t first, int64_t n, uint8_t* out);

}  // namespace tpusim::infeed::internal
