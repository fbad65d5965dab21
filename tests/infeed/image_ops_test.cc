#include "infeed/image_ops.h"

#include <cstring>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "infeed/tfrecord_dataset.h"
#include "tests/common/error_of.h"

namespace tpusim::infeed {
namespace {

using ::testing::HasSubstr;
using tpusim::testing::ErrorOf;

RgbImage Ramp(int width, int height) {
  RgbImage image{width, height, std::vector<uint8_t>(static_cast<size_t>(width * height * 3))};
  for (int y = 0; y < height; ++y) {
    for (int x = 0; x < width; ++x) {
      image.row(y)[3 * x] = static_cast<uint8_t>(10 * x);
      image.row(y)[3 * x + 1] = static_cast<uint8_t>(10 * y);
      image.row(y)[3 * x + 2] = 7;
    }
  }
  return image;
}

// Same size: every pixel is its own source (half-pixel centres map i to i).
TEST(ImageOpsTest, IdentityResizeAndFlip) {
  const RgbImage image = Ramp(4, 3);
  std::vector<std::byte> out(4 * 3 * 3);
  ResizeInto(image, ChooseCrop(4, 3, CropMode::kNone, 0), false, 3, 4, DType::kUInt8, out);
  EXPECT_EQ(std::memcmp(out.data(), image.pixels.data(), out.size()), 0);
  ResizeInto(image, {0, 0, 4, 3}, true, 3, 4, DType::kUInt8, out);
  EXPECT_EQ(static_cast<int>(out[0]), 30);  // x = 3's red comes first
}

// 4 -> 2 columns: output x samples source 0.5 and 2.5, means of 0,10 and 20,30.
TEST(ImageOpsTest, BilinearHalvingAndFloatScaling) {
  const RgbImage image = Ramp(4, 1);
  std::vector<std::byte> out(2 * 3 * sizeof(float));
  ResizeInto(image, {0, 0, 4, 1}, false, 1, 2, DType::kFloat32, out);
  float values[6];
  std::memcpy(values, out.data(), sizeof values);
  EXPECT_FLOAT_EQ(values[0], 5.0f / 255);
  EXPECT_FLOAT_EQ(values[3], 25.0f / 255);
  EXPECT_FLOAT_EQ(values[2], 7.0f / 255);
  EXPECT_THAT(ErrorOf([&] {
                ResizeInto(image, {0, 0, 4, 1}, false, 1, 3, DType::kFloat32, out);
              }),
              HasSubstr("needs 36"));
}

TEST(ImageOpsTest, CropsStayInsideAndAreReproducible) {
  const CropBox center = ChooseCrop(500, 375, CropMode::kCenter, 1);
  EXPECT_EQ(center.width, 328);
  EXPECT_EQ(center.x, (500 - 328) / 2);
  int flips = 0;
  for (uint64_t s = 0; s < 200; ++s) {
    const CropBox b = ChooseCrop(500, 375, CropMode::kRandom, ExampleSeed(1, 0, s));
    EXPECT_GE(b.x, 0);
    EXPECT_GE(b.y, 0);
    EXPECT_LE(b.x + b.width, 500);
    EXPECT_LE(b.y + b.height, 375);
    const CropBox again = ChooseCrop(500, 375, CropMode::kRandom, ExampleSeed(1, 0, s));
    EXPECT_EQ(b.x, again.x);
    EXPECT_EQ(b.width, again.width);
    flips += ChooseFlip(ExampleSeed(1, 0, s));
  }
  EXPECT_GT(flips, 60);
  EXPECT_LT(flips, 140);
}

// A JPEG round trip of a structured image stays close to the original, and bytes
// that are not JPEG are one line naming the record.
TEST(ImageOpsTest, JpegRoundTripAndRefusal) {
  const RgbImage image = SyntheticImage(1, 5, 3, 64, 48);
  const RgbImage decoded = DecodeJpeg(EncodeJpeg(image, 95), "r");
  ASSERT_EQ(decoded.width, 64);
  ASSERT_EQ(decoded.height, 48);
  double error = 0;
  for (size_t i = 0; i < image.pixels.size(); ++i) error += std::abs(image.pixels[i] - decoded.pixels[i]);
  EXPECT_LT(error / static_cast<double>(image.pixels.size()), 10.0);  // the images carry +-8 of pixel noise
  EXPECT_THAT(ErrorOf([] { DecodeJpeg("not a jpeg", "f.tfrecord record 3"); }),
              HasSubstr("f.tfrecord record 3: not a decodable JPEG (10 bytes)"));
}

}  // namespace
}  // namespace tpusim::infeed
