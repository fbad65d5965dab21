#include "infeed/synthetic_source.h"

#include <cmath>
#include <cstring>
#include <numeric>
#include <string_view>
#include <vector>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "base/error.h"
#include "base/synthetic.h"
#include "base/synthetic_bytes.h"
#include "infeed/internal/synthetic_rows.h"

namespace tpusim::infeed {
namespace {

using ::testing::HasSubstr;

// Example ids [first, first + n).
std::vector<int64_t> ConsecutiveIds(int64_t first, int64_t n) {
  std::vector<int64_t> ids(static_cast<size_t>(n));
  std::iota(ids.begin(), ids.end(), first);
  return ids;
}

std::vector<FeatureSpec> SyntheticFeatures() {
  return {{"x", DType::kFloat32, {3, 4}},
          {"h", DType::kBFloat16, {5}},
          {"ids", DType::kInt32, {2}},
          {"big", DType::kInt64, {}}};
}

SyntheticData SyntheticSourceData(LabelKind label = LabelKind::kNone, uint64_t seed = 7) {
  return SyntheticData(seed, SyntheticFeatures(), {label, "label"});
}

// Bytes of rows [row, row + n) of a [rows, ...] tensor.
std::vector<std::byte> Rows(const Tensor& t, int64_t row, int64_t n) {
  size_t row_bytes = t.num_bytes() / static_cast<size_t>(t.shape()[0]);
  auto begin = t.bytes().begin() + static_cast<ptrdiff_t>(static_cast<size_t>(row) * row_bytes);
  return {begin, begin + static_cast<ptrdiff_t>(static_cast<size_t>(n) * row_bytes)};
}

// The documented values (infeed/synthetic_source.h), written out here independently
// of the row kernels: word w of a row is lowbias32 of w + the low half of the row key,
// its high half xored in after the first multiply; byte e is byte e % 16 of ARS-3 of
// the counter e / 16 (the key schedule spelled out here, the AES rounds from
// base/synthetic_bytes.h, which tests/base checks against FIPS-197 and AES-NI).
uint64_t RowKey(uint64_t seed, int64_t id, std::string_view feature) {
  return SyntheticRowKey(SyntheticFeatureSeed(seed, FeatureKey(feature)), id);
}
uint32_t Word(uint64_t seed, int64_t id, std::string_view feature, int64_t w) {
  const uint64_t key = RowKey(seed, id, feature);
  uint32_t x = static_cast<uint32_t>(w) + static_cast<uint32_t>(key);
  x = (x ^ (x >> 16)) * 0x7feb352du;
  x ^= static_cast<uint32_t>(key >> 32);
  x = (x ^ (x >> 15)) * 0x846ca68bu;
  return x ^ (x >> 16);
}
AesBlock Lanes(uint64_t low, uint64_t high) {
  AesBlock block;
  std::memcpy(block.data(), &low, 8);
  std::memcpy(block.data() + 8, &high, 8);
  return block;
}
uint8_t ByteValue(uint64_t seed, int64_t id, std::string_view f, int64_t e) {
  const uint64_t key = RowKey(seed, id, f);
  auto round_key = [key](uint64_t r) { return Lanes(key + r * 0x9E3779B97F4A7C15ULL, r * 0xBB67AE8584CAA73BULL); };
  AesBlock state = Lanes(static_cast<uint64_t>(e / 16) ^ key, 0);
  state = AesLastRound(AesRound(AesRound(state, round_key(1)), round_key(2)), round_key(3));
  return state[static_cast<size_t>(e % 16)];
}
float Float32Value(uint64_t seed, int64_t id, std::string_view f, int64_t e) {
  return static_cast<float>(static_cast<double>(Word(seed, id, f, e) >> 8) / (1 << 23) - 1.0);
}
// bfloat16: the byte's top bit is the sign, 0.5 + its low 7 bits / 256 the magnitude.
uint16_t BFloat16Value(uint64_t seed, int64_t id, std::string_view f, int64_t e) {
  const uint8_t byte = ByteValue(seed, id, f, e);
  const double magnitude = 0.5 + (byte & 0x7f) / 256.0;
  const auto value = static_cast<float>(byte & 0x80 ? -magnitude : magnitude);
  const uint16_t bits = FloatToBFloat16(value);
  EXPECT_EQ(BFloat16ToFloat(bits), value);  // exact in bfloat16
  return bits;
}
int64_t IntValue(uint64_t seed, int64_t id, std::string_view f, int64_t e, uint64_t range) {
  return static_cast<int64_t>(static_cast<uint64_t>(Word(seed, id, f, e)) * range >> 32);
}

TEST(SyntheticDataTest, ValuesFollowTheDocumentedFormulas) {
  SyntheticData data = SyntheticSourceData();
  Batch b = data.Generate(100, 2);
  EXPECT_EQ(b.at("x").data<float>()[12 + 6], Float32Value(7, 101, "x", 6));
  EXPECT_EQ(b.at("h").data<uint16_t>()[4], BFloat16Value(7, 100, "h", 4));
  EXPECT_EQ(b.at("h").data<uint16_t>()[5 + 3], BFloat16Value(7, 101, "h", 3));
  EXPECT_EQ(b.at("ids").data<int32_t>()[3], IntValue(7, 101, "ids", 1, 1000));
  EXPECT_EQ(b.at("big").data<int64_t>()[0], IntValue(7, 100, "big", 0, 1000));
  EXPECT_EQ(data.ExpectedValue("x", 101, 6), Float32Value(7, 101, "x", 6));
  EXPECT_EQ(data.ExpectedValue("h", 101, 3), BFloat16ToFloat(BFloat16Value(7, 101, "h", 3)));
  for (float v : b.at("x").data<float>()) EXPECT_TRUE(v >= -1.0f && v < 1.0f);
}

TEST(SyntheticDataTest, ByteFeaturesHoldTheStreamBytes) {
  SyntheticData data(7, {{"img", DType::kUInt8, {4, 3}}, {"s", DType::kInt8, {5}}}, {});
  Batch b = data.Generate(20, 3);
  EXPECT_EQ(b.at("img").data<uint8_t>()[2 * 12 + 11], ByteValue(7, 22, "img", 11));
  EXPECT_EQ(b.at("s").data<int8_t>()[5 + 3], static_cast<int8_t>(ByteValue(7, 21, "s", 3)));
  EXPECT_EQ(data.ExpectedValue("s", 21, 3), static_cast<int8_t>(ByteValue(7, 21, "s", 3)));
  EXPECT_TRUE(data.Verify(b, 20).ok);
  Batch bad = b.Clone();
  bad.at("img").bytes()[13] ^= std::byte{1};
  EXPECT_THAT(data.Verify(bad, 20).message, HasSubstr("tensor 'img' row 1 (example 21) element 1"));
}

// The row kernels against the element-wise definition, at lengths that exercise
// every vector width's main loop and tail, whole rows and rows that start or end
// inside a word (a partitioned slice or one element of the verifier); the byte
// kernels through each path: VAES and AES-NI (where the CPU has them) and the
// portable rounds.
class SyntheticKernelTest : public testing::TestWithParam<internal::ByteKernels> {
 protected:
  void SetUp() override {
    if (!internal::UseByteKernels(GetParam())) GTEST_SKIP() << "this CPU lacks these instructions";
  }
  void TearDown() override { internal::UseByteKernels(internal::ByteKernels::kWidest); }
};

INSTANTIATE_TEST_SUITE_P(ByteKernels, SyntheticKernelTest,
                         testing::Values(internal::ByteKernels::kVaes, internal::ByteKernels::kAesNi,
                                         internal::ByteKernels::kPortable),
                         [](const testing::TestParamInfo<internal::ByteKernels>& p) {
                           switch (p.param) {
                             case internal::ByteKernels::kVaes:
                               return "Vaes";
                             case internal::ByteKernels::kAesNi:
                               return "AesNi";
                             default:
                               return "Portable";
                           }
                         });

TEST_P(SyntheticKernelTest, WholeRowsEqualTheElementwiseDefinition) {
  for (int64_t n : {1, 7, 8, 15, 16, 17, 63, 64, 65, 127, 128, 129, 143, 255, 256, 257, 513, 1000}) {
    SyntheticData data(5,
                       {{"f", DType::kFloat32, {n}},
                        {"h", DType::kBFloat16, {n}},
                        {"u", DType::kUInt8, {n}},
                        {"i", DType::kInt32, {n}},
                        {"l", DType::kInt64, {n}}},
                       {}, 77);
    Batch b = data.Generate(3, 2);
    for (int64_t j = 0; j < n; ++j) {
      const auto k = static_cast<size_t>(n + j);  // row 1 = example 4
      EXPECT_EQ(b.at("f").data<float>()[k], Float32Value(5, 4, "f", j));
      EXPECT_EQ(b.at("h").data<uint16_t>()[k], BFloat16Value(5, 4, "h", j));
      EXPECT_EQ(b.at("u").data<uint8_t>()[k], ByteValue(5, 4, "u", j));
      EXPECT_EQ(b.at("i").data<int32_t>()[k], IntValue(5, 4, "i", j, 77));
      EXPECT_EQ(b.at("l").data<int64_t>()[k], IntValue(5, 4, "l", j, 77));
      EXPECT_EQ(data.ExpectedValue("u", 4, j), ByteValue(5, 4, "u", j));
      EXPECT_EQ(data.ExpectedValue("h", 4, j), BFloat16ToFloat(BFloat16Value(5, 4, "h", j)));
    }
  }
}

// A long slice that starts and ends inside a 16-byte block, whole blocks between
// (the VAES kernel's sixteen-block loop, the AES-NI kernel's eight-block loop and
// their single blocks), in uint8 and bfloat16.
TEST_P(SyntheticKernelTest, LongSlicesAcrossBlocksVerify) {
  SyntheticData data(5, {{"u", DType::kUInt8, {2, 300}}, {"h", DType::kBFloat16, {2, 300}}}, {});
  constexpr int64_t kCol = 5, kWidth = 290;
  Tensor u(DType::kUInt8, {1, 1, kWidth}), h(DType::kBFloat16, {1, 1, kWidth});
  for (int64_t j = 0; j < kWidth; ++j) {
    u.data<uint8_t>()[static_cast<size_t>(j)] = ByteValue(5, 3, "u", 300 + kCol + j);
    h.data<uint16_t>()[static_cast<size_t>(j)] = BFloat16Value(5, 3, "h", 300 + kCol + j);
  }
  std::vector<int64_t> begin{0, 1, kCol};
  EXPECT_TRUE(data.VerifySlice("u", u, 3, begin).ok);
  EXPECT_TRUE(data.VerifySlice("h", h, 3, begin).ok);
  u.data<uint8_t>()[kWidth - 1] ^= 1;
  EXPECT_FALSE(data.VerifySlice("u", u, 3, begin).ok);
}

// Slices that start and end inside a word or block: the bytes of a [1, 9] piece of a
// [3, 9] uint8 feature at every column offset, and a bfloat16 one at an odd offset.
TEST(SyntheticDataTest, SlicesInsideABlockVerify) {
  SyntheticData data(5, {{"u", DType::kUInt8, {3, 9}}, {"h", DType::kBFloat16, {7}}}, {});
  for (int64_t col = 0; col < 9; ++col) {
    for (int64_t width = 1; col + width <= 9; ++width) {
      Tensor piece(DType::kUInt8, {1, 1, width});
      for (int64_t j = 0; j < width; ++j)
        piece.data<uint8_t>()[static_cast<size_t>(j)] = ByteValue(5, 12, "u", 9 + col + j);
      std::vector<int64_t> begin{2, 1, col};
      EXPECT_TRUE(data.VerifySlice("u", piece, 10, begin).ok) << col << " " << width;
      piece.data<uint8_t>()[0] ^= 1;
      EXPECT_FALSE(data.VerifySlice("u", piece, 10, begin).ok) << col << " " << width;
    }
  }
  Tensor h(DType::kBFloat16, {1, 3});
  for (int64_t j = 0; j < 3; ++j) h.data<uint16_t>()[static_cast<size_t>(j)] = BFloat16Value(5, 10, "h", 3 + j);
  std::vector<int64_t> begin{0, 3};
  EXPECT_TRUE(data.VerifySlice("h", h, 10, begin).ok);
}

TEST(SyntheticDataTest, PureAcrossRangesOrdersAndFeatureLists) {
  SyntheticData data = SyntheticSourceData(LabelKind::kRegression);
  Batch wide = data.Generate(40, 32);
  Batch narrow = data.Generate(50, 5);
  std::vector<FeatureSpec> features = SyntheticFeatures();
  std::vector<FeatureSpec> reversed(features.rbegin(), features.rend());
  SyntheticData reordered(7, reversed, {LabelKind::kNone, "label"});
  Batch other = reordered.Generate(50, 5);
  for (const FeatureSpec& spec : SyntheticFeatures()) {
    EXPECT_EQ(Rows(wide.at(spec.name), 10, 5), Rows(narrow.at(spec.name), 0, 5)) << spec.name;
    EXPECT_EQ(Rows(other.at(spec.name), 0, 5), Rows(narrow.at(spec.name), 0, 5)) << spec.name;
  }
  EXPECT_EQ(Rows(wide.at("label"), 10, 5), Rows(narrow.at("label"), 0, 5));
  EXPECT_NE(SyntheticSourceData(LabelKind::kNone, 8).Generate(50, 5).at("x"), narrow.at("x"));
}

TEST(SyntheticDataTest, VerifyAcceptsGoodDataAndCatchesAFlippedByte) {
  SyntheticData data = SyntheticSourceData(LabelKind::kLogistic);
  Batch b = data.Generate(1000, 8);
  EXPECT_TRUE(data.Verify(b, 1000).ok);
  EXPECT_FALSE(data.Verify(b, 1001).ok);
  for (const char* name : {"x", "h", "ids", "big", "label"}) {
    Batch bad = b.Clone();
    bad.at(name).bytes()[bad.at(name).num_bytes() - 3] ^= std::byte{0x10};
    VerifyResult r = data.Verify(bad, 1000);
    EXPECT_FALSE(r.ok) << name;
    EXPECT_THAT(r.message, HasSubstr(std::string("tensor '") + name + "' row 7 (example 1007)"));
  }
}

TEST(SyntheticDataTest, VerifyByExampleIdsAndSlices) {
  SyntheticData data = SyntheticSourceData();
  Batch b = data.Generate(0, 20);
  std::vector<int64_t> ids{3, 17, 5};
  Batch picked;
  for (const auto& [name, t] : b) {
    Tensor rows(t.dtype(), BatchShape(data.spec(name), 3));
    size_t row_bytes = t.num_bytes() / 20;
    for (size_t i = 0; i < 3; ++i) {
      std::memcpy(rows.bytes().data() + i * row_bytes, t.bytes().data() + static_cast<size_t>(ids[i]) * row_bytes,
                  row_bytes);
    }
    picked.Insert(name, std::move(rows));
  }
  EXPECT_TRUE(data.Verify(picked, ids).ok);
  std::vector<int64_t> wrong{3, 17, 6};
  EXPECT_FALSE(data.Verify(picked, wrong).ok);
  // Piece of x: rows [4, 6), dim 1 [1, 3), dim 2 [2, 4), holding example ids 104, 105.
  Tensor piece(DType::kFloat32, {2, 2, 2});
  std::span<float> v = piece.data<float>();
  for (int64_t r = 0; r < 2; ++r)
    for (int64_t i = 0; i < 2; ++i)
      for (int64_t j = 0; j < 2; ++j)
        v[static_cast<size_t>(r * 4 + i * 2 + j)] =
            static_cast<float>(data.ExpectedValue("x", 104 + r, (1 + i) * 4 + 2 + j));
  std::vector<int64_t> begin{4, 1, 2};
  EXPECT_TRUE(data.VerifySlice("x", piece, 100, begin).ok);
  std::vector<int64_t> shifted{4, 1, 1};
  EXPECT_FALSE(data.VerifySlice("x", piece, 100, shifted).ok);
  std::vector<int64_t> outside{4, 2, 3};
  EXPECT_THAT(data.VerifySlice("x", piece, 100, outside).message, HasSubstr("inner offset"));
}

// The teacher of the file comment, computed independently of SyntheticData.
double TeacherSum(uint64_t seed, int64_t id) {
  double s = 0;
  for (const FeatureSpec& spec : SyntheticFeatures()) {
    if (!IsFloating(spec.dtype)) continue;
    for (int64_t j = 0; j < NumElements(spec.shape); ++j) {
      float w = BitsToUnitFloat(SyntheticBits(seed, -1, FeatureKey(spec.name), j));
      float x = spec.dtype == DType::kBFloat16 ? BFloat16ToFloat(BFloat16Value(seed, id, spec.name, j))
                                               : Float32Value(seed, id, spec.name, j);
      s += static_cast<double>(w) * x;
    }
  }
  return s / std::sqrt(12.0 / 9 + 5.0 * 7 / 36);  // D32 = 12 (x), D16 = 5 (h)
}

TEST(SyntheticDataTest, LabelsComeFromTheHiddenTeacher) {
  Batch reg = SyntheticSourceData(LabelKind::kRegression).Generate(0, 200);
  Batch cls = SyntheticSourceData(LabelKind::kLogistic).Generate(0, 200);
  int positives = 0;
  for (int64_t i = 0; i < 200; ++i) {
    double s = TeacherSum(7, i);
    EXPECT_EQ(reg.at("label").data<float>()[static_cast<size_t>(i)], static_cast<float>(s));
    EXPECT_EQ(cls.at("label").data<float>()[static_cast<size_t>(i)], s > 0 ? 1.0f : 0.0f);
    positives += s > 0;
  }
  EXPECT_GT(positives, 60);
  EXPECT_LT(positives, 140);
  EXPECT_EQ(reg.at("label").shape(), (Shape{200}));
}

TEST(SyntheticDataTest, ConfigErrors) {
  EXPECT_THAT(
      [] {
        SyntheticData d(1, {{"ids", DType::kInt32, {2}}}, {LabelKind::kRegression, "label"});
      },
      testing::ThrowsMessage<Error>(HasSubstr("input.label")));
  EXPECT_THAT(
      [] {
        SyntheticData d(1, {{"x", DType::kFloat32, {2}}, {"x", DType::kInt32, {}}}, {});
      },
      testing::ThrowsMessage<Error>(HasSubstr("duplicate feature 'x'")));
  EXPECT_THAT(
      [] {
        SyntheticData d(1, {{"label", DType::kFloat32, {2}}}, {LabelKind::kLogistic, "label"});
      },
      testing::ThrowsMessage<Error>(HasSubstr("duplicate feature 'label'")));
  for (int64_t range : {int64_t{0}, (int64_t{1} << 31) + 1}) {
    EXPECT_THAT(
        [range] {
          SyntheticData d(1, {{"ids", DType::kInt32, {2}}}, {}, range);
        },
        testing::ThrowsMessage<Error>(HasSubstr("input.int_range: must be in [1, 2^31]")));
  }
}

TEST(SyntheticSourceTest, ThrottleAndCpuCostUseTheInjectedClock) {
  FakeClock clock(1'000'000);
  SyntheticConfig config;
  config.seed = 3;
  config.features = SyntheticFeatures();
  config.max_examples_per_sec = 1000;
  config.cpu_us_per_example = 5;
  SyntheticSource source(config, clock);
  Batch b = source.Read(0, 100);  // 100 examples at 1000/s: 100 ms, plus 500 us of CPU
  EXPECT_EQ(clock.NowUs(), 1'000'000 + 100'000 + 500);
  EXPECT_TRUE(source.data().Verify(b, 0).ok);
  source.ReadInto(ConsecutiveIds(100, 100), b);
  // The rate cap counts the 500 us of CPU time: half a token earned, 99.5 ms waited.
  EXPECT_EQ(clock.NowUs(), 1'000'000 + 200'000 + 500);
  EXPECT_TRUE(source.data().Verify(b, 100).ok);
  clock.AdvanceUs(10'000'000);  // idle: the bucket fills only to its 100-example burst
  int64_t before = clock.NowUs();
  source.Read(0, 100);
  EXPECT_EQ(clock.NowUs(), before + 500);
  source.Read(0, 100);
  EXPECT_EQ(clock.NowUs(), before + 100'500);
}

// cost_mode emulate: the modeled work (x a slow host's factor) is slept on the
// pool, not spun; the generation's thread CPU is preprocessing.
TEST(SyntheticSourceTest, EmulatedCostIsWaitedOnThePoolAndCounted) {
  FakeClock clock;
  ModeledWorkerPool pool(2, clock);
  SyntheticConfig config;
  config.seed = 3;
  config.features = SyntheticFeatures();
  config.cpu_us_per_example = 5;
  config.pool = &pool;
  SyntheticSource source(config, clock);
  Batch b = MakeBatch(source.specs(), 100);
  StageCosts costs;
  source.ReadInto(ConsecutiveIds(0, 100), b, 3, &costs);
  EXPECT_TRUE(source.data().Verify(b, 0).ok);
  EXPECT_EQ(clock.slept_us(), 1500);
  EXPECT_EQ(clock.spun_us(), 0);
  EXPECT_EQ(pool.charged_us(), 1500);
  EXPECT_DOUBLE_EQ(costs.modeled_preprocessing_s, 1500e-6);
  EXPECT_GT(costs.preprocessing_cpu_s, 0);
}

TEST(SyntheticSourceTest, UnlimitedRateDoesNotWaitAndSteadyClockSpins) {
  FakeClock clock;
  SyntheticConfig config;
  config.features = SyntheticFeatures();
  SyntheticSource source(config, clock);
  source.Read(0, 1000);
  EXPECT_EQ(clock.NowUs(), 0);
  SteadyClock steady;
  int64_t start = steady.NowUs();
  steady.SpinUs(2000);
  EXPECT_GE(steady.NowUs() - start, 2000);
}

}  // namespace
}  // namespace tpusim::infeed
