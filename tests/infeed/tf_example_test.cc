#include "infeed/tf_example.h"

#include <string>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "tests/common/byte_files.h"
#include "tests/common/error_of.h"

namespace tpusim::infeed {
namespace {

using tpusim::testing::Unhex;

using ::testing::ElementsAre;
using ::testing::HasSubstr;
using tpusim::testing::ErrorOf;

// Written by tests/scripts/tfrecord_lib.py's encoder (an independent one):
// image/encoded = [b"\xff\xd8jpeg"], image/class/label = [7, -1, 300], f = [1.5, -2].
const char* kIndependent =
    "0a580a1b0a0d696d6167652f656e636f646564120a0a080a06ffd86a7065670a260a11696d6167652f636c617373"
    "2f6c6162656c12111a0f0a0d07ffffffffffffffffff01ac020a110a0166120c120a0a080000c03f000000c0";

std::vector<NamedFeature> ThreeFeatures() {
  return {{"image/encoded", FeatureKind::kBytes, {"\xff\xd8jpeg"}, {}, {}},
          {"image/class/label", FeatureKind::kInt64, {}, {}, {7, -1, 300}},
          {"f", FeatureKind::kFloat, {}, {1.5f, -2.0f}, {}}};
}

TEST(TfExampleTest, EncodesAsTheIndependentEncoder) { EXPECT_EQ(EncodeExample(ThreeFeatures()), Unhex(kIndependent)); }

TEST(TfExampleTest, ParsesTheIndependentBytes) {
  const std::string data = Unhex(kIndependent);
  ParsedExample e = ParseExample(data);
  ASSERT_EQ(e.size(), 3u);
  EXPECT_EQ(e.at("image/encoded").kind, FeatureKind::kBytes);
  EXPECT_THAT(e.at("image/encoded").bytes, ElementsAre("\xff\xd8jpeg"));
  EXPECT_EQ(e.at("image/class/label").kind, FeatureKind::kInt64);
  EXPECT_THAT(e.at("image/class/label").int64s, ElementsAre(7, -1, 300));
  EXPECT_THAT(e.at("f").floats, ElementsAre(1.5f, -2.0f));
  EXPECT_EQ(e.at("f").size(), 2u);
}

// Unpacked repeated scalars (one tag per value), an unknown field and a second
// Features message that merges in.
TEST(TfExampleTest, UnpackedListsUnknownFieldsAndMerging) {
  // Feature{int64_list{value: 5 value: 6}} unpacked: 1a 04 08 05 08 06.
  const std::string int_entry = Unhex("0a01611206") + Unhex("1a0408050806");
  // Feature{float_list{value: 1.0}} unpacked: 12 05 0d 0000803f.
  const std::string float_entry = Unhex("0a01621207") + Unhex("12050d0000803f");
  std::string features1 = "\x0a" + std::string(1, static_cast<char>(int_entry.size())) + int_entry;
  std::string features2 = "\x0a" + std::string(1, static_cast<char>(float_entry.size())) + float_entry;
  std::string data = "\x0a" + std::string(1, static_cast<char>(features1.size())) + features1 +
                     Unhex("10ff01") +  // field 2, varint: unknown, skipped
                     "\x0a" + std::string(1, static_cast<char>(features2.size())) + features2;
  ParsedExample e = ParseExample(data);
  EXPECT_THAT(e.at("a").int64s, ElementsAre(5, 6));
  EXPECT_THAT(e.at("b").floats, ElementsAre(1.0f));
}

TEST(TfExampleTest, EmptyExampleAndEmptyLists) {
  EXPECT_TRUE(ParseExample("").empty());
  // The parse holds views into the bytes, which must outlive it.
  const std::string bytes = EncodeExample({{"x", FeatureKind::kInt64, {}, {}, {}}});
  ParsedExample e = ParseExample(bytes);
  EXPECT_EQ(e.at("x").kind, FeatureKind::kInt64);
  EXPECT_EQ(e.at("x").size(), 0u);
}

TEST(TfExampleTest, MalformedIsOneLineWithOffset) {
  const std::string data = Unhex(kIndependent);
  EXPECT_THAT(ErrorOf([&] { ParseExample(data.substr(0, 30)); }),
              HasSubstr("tf.train.Example: malformed at byte offset 1: length 88 runs past the end"));
  EXPECT_THAT(ErrorOf([&] { ParseExample(Unhex("0b")); }), HasSubstr("wire type 3"));
  EXPECT_THAT(ErrorOf([&] { ParseExample(Unhex("08ffffffffffffffffffff01")); }), HasSubstr("varint"));
  // A packed float list of 3 bytes.
  EXPECT_THAT(ErrorOf([&] { ParseExample(Unhex("0a0c0a0a0a0178120512030a01ff")); }), HasSubstr("not a multiple of 4"));
}

}  // namespace
}  // namespace tpusim::infeed
