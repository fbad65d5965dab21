#include "infeed/dtype.h"

#include <bit>

#include "base/error.h"

namespace tpusim::infeed {

size_t DTypeSize(DType dtype) {
  switch (dtype) {
    case DType::kFloat32:
      return 4;
    case DType::kBFloat16:
      return 2;
    case DType::kInt32:
      return 4;
    case DType::kInt64:
      return 8;
    case DType::kUInt8:
      return 1;
    case DType::kInt8:
      return 1;
  }
  return 0;
}

std::string_view DTypeName(DType dtype) {
  switch (dtype) {
    case DType::kFloat32:
      return "float32";
    case DType::kBFloat16:
      return "bfloat16";
    case DType::kInt32:
      return "int32";
    case DType::kInt64:
      return "int64";
    case DType::kUInt8:
      return "uint8";
    case DType::kInt8:
      return "int8";
  }
  return "?";
}

bool IsFloating(DType dtype) { return dtype == DType::kFloat32 || dtype == DType::kBFloat16; }

DType ParseDType(std::string_view name, std::string_view key) {
  for (DType d : kAllDTypes) {
    if (name == DTypeName(d)) return d;
  }
  Fail("{}: unknown dtype '{}' (allowed: float32, bfloat16, int32, int64, uint8, int8)", key, name);
}

std::string NpyDescr(DType dtype) {
  switch (dtype) {
    case DType::kFloat32:
      return "<f4";
    case DType::kBFloat16:
      return "<u2";
    case DType::kInt32:
      return "<i4";
    case DType::kInt64:
      return "<i8";
    case DType::kUInt8:
      return "|u1";
    case DType::kInt8:
      return "|i1";
  }
  return "?";
}

uint16_t FloatToBFloat16(float value) {
  uint32_t bits = std::bit_cast<uint32_t>(value);
  // Adding 0x7fff plus the lowest kept bit rounds to nearest with ties to even; NaN
  // must be special-cased because the carry could turn it into infinity.
  if ((bits & 0x7fffffffu) > 0x7f800000u) return static_cast<uint16_t>((bits >> 16) | 0x0040u);
  uint32_t rounding = 0x7fffu + ((bits >> 16) & 1u);
  return static_cast<uint16_t>((bits + rounding) >> 16);
}

float BFloat16ToFloat(uint16_t bits) { return std::bit_cast<float>(static_cast<uint32_t>(bits) << 16); }

}  // namespace tpusim::infeed
