#include "infeed/dtype.h"

#include <bit>
#include <cmath>
#include <limits>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "base/error.h"
#include "infeed/tensor.h"

namespace tpusim::infeed {
namespace {

using ::testing::HasSubstr;

uint16_t Bf16OfBits(uint32_t float_bits) { return FloatToBFloat16(std::bit_cast<float>(float_bits)); }

struct DTypeFacts {
  DType dtype;
  size_t size;
  const char* name;
  const char* descr;
  bool floating;
};

TEST(DTypeTest, SizesNamesAndNpyDescrs) {
  const DTypeFacts facts[] = {
      {DType::kFloat32, 4, "float32", "<f4", true}, {DType::kBFloat16, 2, "bfloat16", "<u2", true},
      {DType::kInt32, 4, "int32", "<i4", false},    {DType::kInt64, 8, "int64", "<i8", false},
      {DType::kUInt8, 1, "uint8", "|u1", false},    {DType::kInt8, 1, "int8", "|i1", false}};
  ASSERT_EQ(std::size(facts), std::size(kAllDTypes));
  for (const DTypeFacts& f : facts) {
    EXPECT_EQ(DTypeSize(f.dtype), f.size) << f.name;
    EXPECT_EQ(DTypeName(f.dtype), f.name);
    EXPECT_EQ(NpyDescr(f.dtype), f.descr) << f.name;
    EXPECT_EQ(IsFloating(f.dtype), f.floating) << f.name;
    EXPECT_EQ(ParseDType(f.name, "k"), f.dtype);
  }
}

TEST(DTypeTest, ParseErrorNamesKeyValueAndAllowed) {
  try {
    ParseDType("float64", "input.features.x.dtype");
    FAIL() << "expected Error";
  } catch (const Error& e) {
    EXPECT_EQ(
        std::string(e.what()),
        "input.features.x.dtype: unknown dtype 'float64' (allowed: float32, bfloat16, int32, int64, uint8, int8)");
  }
}

TEST(DTypeTest, BFloat16RoundsToNearestEven) {
  EXPECT_EQ(FloatToBFloat16(1.0f), 0x3f80);
  EXPECT_EQ(FloatToBFloat16(-1.5f), 0xbfc0);
  EXPECT_EQ(Bf16OfBits(0x3f808000u), 0x3f80);  // tie, kept bit even: stays
  EXPECT_EQ(Bf16OfBits(0x3f818000u), 0x3f82);  // tie, kept bit odd: rounds up to even
  EXPECT_EQ(Bf16OfBits(0x3f808001u), 0x3f81);  // just above the tie: up
  EXPECT_EQ(Bf16OfBits(0x3f807fffu), 0x3f80);  // just below the tie: down
  EXPECT_EQ(Bf16OfBits(0x7f7fffffu), 0x7f80);  // max float rounds to +inf
  EXPECT_EQ(FloatToBFloat16(std::numeric_limits<float>::infinity()), 0x7f80);
}

TEST(DTypeTest, BFloat16KeepsNaNAndWidensExactly) {
  uint16_t nan = FloatToBFloat16(std::bit_cast<float>(0x7fffffffu));
  EXPECT_TRUE(std::isnan(BFloat16ToFloat(nan)));
  EXPECT_TRUE(std::isnan(BFloat16ToFloat(Bf16OfBits(0x7f800001u))));  // low-payload NaN stays NaN
  EXPECT_EQ(BFloat16ToFloat(0x3f80), 1.0f);
  EXPECT_EQ(BFloat16ToFloat(0xc040), -3.0f);
  for (uint32_t bits = 0; bits < 0x10000; bits += 37) {
    auto b = static_cast<uint16_t>(bits);
    float f = BFloat16ToFloat(b);
    if (!std::isnan(f)) {
      EXPECT_EQ(FloatToBFloat16(f), b);  // exact values round-trip
    }
  }
}

TEST(TensorTest, ShapeBytesTypedAccessAndExplicitCopy) {
  Tensor t(DType::kInt64, {2, 3});
  EXPECT_EQ(t.num_elements(), 6);
  EXPECT_EQ(t.num_bytes(), 48u);
  t.data<int64_t>()[5] = 42;
  EXPECT_THROW(t.data<float>(), Error);
  Tensor copy = t.Clone();
  EXPECT_EQ(copy, t);
  Tensor moved = std::move(t);
  EXPECT_EQ(moved.data<int64_t>()[5], 42);
  EXPECT_EQ(ShapeToString({100, 3}), "[100, 3]");
  EXPECT_EQ(ShapeToString({}), "[]");
  EXPECT_FALSE(std::is_copy_constructible_v<Tensor>);
}

TEST(TensorTest, BatchIsOrderedByNameAndNamesMissingTensors) {
  Batch batch;
  batch.Insert("z", Tensor(DType::kFloat32, {4}));
  batch.Insert("features.a", Tensor(DType::kInt32, {4, 2}));
  EXPECT_EQ(batch.begin()->first, "features.a");
  EXPECT_EQ(batch.num_bytes(), 16u + 32u);
  EXPECT_THROW(batch.Insert("z", Tensor(DType::kFloat32, {1})), Error);
  try {
    batch.at("y");
    FAIL() << "expected Error";
  } catch (const Error& e) {
    EXPECT_THAT(e.what(), HasSubstr("batch has no tensor 'y' (has: features.a, z)"));
  }
}

}  // namespace
}  // namespace tpusim::infeed
