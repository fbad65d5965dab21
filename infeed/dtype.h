// Element types a tensor of tpusim's infeed can hold, with their names as written in
// run configs, their .npy encodings and the float <-> bfloat16 conversion. bfloat16
// has no NumPy dtype, so its raw 16 bits are stored as "<u2". uint8/int8 are how raw
// images are fed.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <type_traits>

namespace tpusim::infeed {

enum class DType { kFloat32, kBFloat16, kInt32, kInt64, kUInt8, kInt8 };

// Every dtype, in the order configs list them.
inline constexpr DType kAllDTypes[] = {DType::kFloat32, DType::kBFloat16, DType::kInt32,
                                       DType::kInt64,   DType::kUInt8,    DType::kInt8};

// Bytes per element: 4, 2, 4, 8, 1, 1.
size_t DTypeSize(DType dtype);

// "float32", "bfloat16", "int32", "int64", "uint8", "int8".
std::string_view DTypeName(DType dtype);

// True for float32 and bfloat16.
bool IsFloating(DType dtype);

// Parses a config name. Throws Error naming `key` and the allowed names otherwise.
DType ParseDType(std::string_view name, std::string_view key);

// The .npy descr of `dtype`: "<f4", "<u2" (bfloat16 bits), "<i4", "<i8", "|u1", "|i1".
std::string NpyDescr(DType dtype);

// Rounds to the nearest bfloat16, ties to even; NaN stays a (quiet) NaN.
uint16_t FloatToBFloat16(float value);

// Exact widening of bfloat16 bits to float.
float BFloat16ToFloat(uint16_t bits);

// The C++ element type that holds one element of each dtype (bfloat16: its raw bits).
template <typename T>
constexpr bool IsElementTypeOf(DType dtype) {
  if constexpr (std::is_same_v<T, float>) return dtype == DType::kFloat32;
  if constexpr (std::is_same_v<T, uint16_t>) return dtype == DType::kBFloat16;
  if constexpr (std::is_same_v<T, int32_t>) return dtype == DType::kInt32;
  if constexpr (std::is_same_v<T, int64_t>) return dtype == DType::kInt64;
  if constexpr (std::is_same_v<T, uint8_t>) return dtype == DType::kUInt8;
  if constexpr (std::is_same_v<T, int8_t>) return dtype == DType::kInt8;
  return false;
}

}  // namespace tpusim::infeed
