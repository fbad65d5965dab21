// The JPEG decode as strict as TensorFlow's decode_jpeg by default (issue 52,
// item 4): truncated data and scan data that ends before the frame is filled are
// refused, libjpeg's other warnings decoded through, the size checked from the
// header before decoding, and CMYK JPEGs converted to RGB as TensorFlow does.
#include "infeed/jpeg_codec.h"

#include <turbojpeg.h>

#include <algorithm>
#include <cstdlib>
#include <memory>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "infeed/tfrecord_dataset.h"
#include "tests/common/error_of.h"

namespace tpusim::infeed {
namespace {

using ::testing::HasSubstr;
using tpusim::testing::ErrorOf;

std::string Jpeg() { return EncodeJpeg(SyntheticImage(1, 5, 3, 64, 48), 90); }

// `jpeg` up to the middle of its scan data.
std::string CutScan(const std::string& jpeg) {
  const size_t sos = jpeg.find("\xff\xda");
  const size_t start =
      sos + 2 + ((static_cast<unsigned char>(jpeg[sos + 2]) << 8) | static_cast<unsigned char>(jpeg[sos + 3]));
  return jpeg.substr(0, start + (jpeg.rfind("\xff\xd9") - start) / 2);
}

// libjpeg's own verdict on `jpeg`: "" when it decodes without a word, else the
// message TurboJPEG keeps (its first warning, or the error it stopped at).
std::string LibjpegMessage(const std::string& jpeg, int width, int height) {
  std::unique_ptr<void, int (*)(void*)> handle(tjInitDecompress(), tjDestroy);
  std::vector<unsigned char> out(static_cast<size_t>(width * height * 3));
  if (tjDecompress2(handle.get(), reinterpret_cast<const unsigned char*>(jpeg.data()), jpeg.size(), out.data(), width,
                    0, height, TJPF_RGB, 0) == 0) {
    return "";
  }
  return tjGetErrorStr2(handle.get());
}

TEST(JpegCodecTest, TruncatedDataIsRefused) {
  const std::string jpeg = Jpeg();
  const std::string half = CutScan(jpeg);
  EXPECT_EQ(LibjpegMessage(half, 64, 48), "Premature end of JPEG file");  // a warning only
  EXPECT_EQ(ErrorOf([&] { DecodeJpeg(half, "f: record 3"); }),
            "f: record 3: truncated JPEG: its data ends before its 64x48 frame is filled (" +
                std::to_string(half.size()) + " bytes; libjpeg: Premature end of JPEG file)");
  // Without only its end-of-image marker the file is cut as well.
  EXPECT_THAT(ErrorOf([&] { DecodeJpeg(jpeg.substr(0, jpeg.size() - 2), "r"); }),
              HasSubstr("r: truncated JPEG: its data ends before its 64x48 frame is filled"));
}

TEST(JpegCodecTest, ScanDataShorterThanTheFrameIsRefused) {
  const std::string jpeg = CutScan(Jpeg()) + "\xff\xd9";
  EXPECT_EQ(LibjpegMessage(jpeg, 64, 48), "Corrupt JPEG data: premature end of data segment");
  EXPECT_THAT(
      ErrorOf([&] { DecodeJpeg(jpeg, "r"); }),
      HasSubstr("r: truncated JPEG: its data ends before its 64x48 frame is filled (" + std::to_string(jpeg.size()) +
                " bytes; libjpeg: Corrupt JPEG data: premature end of data "
                "segment)"));
}

// libjpeg's warnings that TensorFlow and Pillow decode through (bytes between two
// markers, an unknown JFIF revision) decode to the same pixels, in the header
// (which TurboJPEG fails on any warning) and in the decode.
TEST(JpegCodecTest, ToleratedWarningsDecode) {
  const std::string jpeg = Jpeg();
  const size_t after_app0 = 4 + ((static_cast<unsigned char>(jpeg[4]) << 8) | static_cast<unsigned char>(jpeg[5]));
  const std::string padded = jpeg.substr(0, after_app0) + std::string(3, '\0') + jpeg.substr(after_app0);
  EXPECT_EQ(LibjpegMessage(padded, 64, 48), "Corrupt JPEG data: 3 extraneous bytes before marker 0xdb");
  EXPECT_EQ(DecodeJpeg(padded, "r").pixels, DecodeJpeg(jpeg, "r").pixels);
  std::string jfif2 = jpeg;
  ASSERT_EQ(jfif2.substr(6, 5), std::string("JFIF\0", 5));
  jfif2[11] = 2;  // version 2.01
  EXPECT_EQ(LibjpegMessage(jfif2, 64, 48), "Warning: unknown JFIF revision number 2.01");
  EXPECT_EQ(DecodeJpeg(jfif2, "r").pixels, DecodeJpeg(jpeg, "r").pixels);
  // TurboJPEG keeps the first warning only: a cut file behind a tolerated one is
  // still found cut (no end-of-image marker after its last scan).
  const std::string cut = CutScan(jfif2);
  EXPECT_EQ(LibjpegMessage(cut, 64, 48), "Warning: unknown JFIF revision number 2.01");
  EXPECT_EQ(ErrorOf([&] { DecodeJpeg(cut, "r"); }),
            "r: truncated JPEG: its data ends before its 64x48 frame is filled (" + std::to_string(cut.size()) +
                " bytes; no end-of-image marker after its last scan)");
}

TEST(JpegCodecTest, SizeIsCheckedFromTheHeaderBeforeDecoding) {
  const std::string jpeg = Jpeg();
  EXPECT_EQ(ErrorOf([&] { DecodeJpeg(jpeg, "r", 3071); }),
            "r: the JPEG declares 64x48 = 3072 pixels, over input.max_image_pixels (3071); refused before decoding");
  EXPECT_EQ(DecodeJpeg(jpeg, "r", 3072).pixels.size(), 64u * 48 * 3);
  // A header patched to 65500 x 65500 (libjpeg's largest; 12 GiB of RGB) over a
  // few KB of data.
  std::string huge = jpeg;
  const size_t sof = huge.find("\xff\xc0");
  ASSERT_NE(sof, std::string::npos);
  for (size_t at : {sof + 5, sof + 7}) huge.replace(at, 2, "\xff\xdc");  // height, width
  EXPECT_EQ(ErrorOf([&] { DecodeJpeg(huge, "r"); }),
            "r: the JPEG declares 65500x65500 = 4290250000 pixels, over input.max_image_pixels (178956970); refused "
            "before decoding");
}

TEST(JpegCodecTest, CmykToRgbAsTensorFlow) {
  const std::vector<uint8_t> cmyk = {255, 128, 0, 255, 100, 50, 0, 51, 0, 0, 0, 0};
  std::vector<uint8_t> rgb(9);
  CmykToRgb(cmyk, true, rgb);  // inverted: R = K x C / 255
  EXPECT_EQ(rgb, (std::vector<uint8_t>{255, 128, 0, 20, 10, 0, 0, 0, 0}));
  CmykToRgb(cmyk, false, rgb);  // R = (255 - K) x (255 - C) / 255
  EXPECT_EQ(rgb, (std::vector<uint8_t>{0, 0, 0, 124, 164, 204, 255, 255, 255}));
}

// A CMYK JPEG as TurboJPEG writes one (YCCK, with an Adobe marker) decodes to the
// RGB TensorFlow's conversion gives of its CMYK pixels.
TEST(JpegCodecTest, CmykJpegsDecodeToRgb) {
  const int width = 32, height = 16;
  std::vector<uint8_t> cmyk(static_cast<size_t>(width * height * 4));
  for (int y = 0; y < height; ++y) {
    for (int x = 0; x < width; ++x) {
      uint8_t* p = cmyk.data() + 4 * (y * width + x);
      p[0] = static_cast<uint8_t>(8 * x), p[1] = static_cast<uint8_t>(16 * y), p[2] = 90, p[3] = 200;
    }
  }
  std::unique_ptr<void, int (*)(void*)> handle(tjInitCompress(), tjDestroy);
  unsigned char* out = nullptr;
  unsigned long size = 0;
  ASSERT_EQ(tjCompress2(handle.get(), cmyk.data(), width, 0, height, TJPF_CMYK, &out, &size, TJSAMP_444, 100, 0), 0);
  const std::string jpeg(reinterpret_cast<const char*>(out), size);
  tjFree(out);
  EXPECT_TRUE(HasAdobeMarker(jpeg));
  EXPECT_FALSE(HasAdobeMarker(Jpeg()));
  const RgbImage image = DecodeJpeg(jpeg, "r");
  std::vector<uint8_t> expected(static_cast<size_t>(width * height * 3));
  CmykToRgb(cmyk, true, expected);
  ASSERT_EQ(image.pixels.size(), expected.size());
  int worst = 0;
  for (size_t i = 0; i < expected.size(); ++i) worst = std::max(worst, std::abs(image.pixels[i] - expected[i]));
  EXPECT_LE(worst, 3);  // quality 100, no subsampling: the YCCK round trip's rounding
}

TEST(JpegCodecTest, AdobeMarkerScanStaysInBounds) {
  for (const char* bytes : {"", "\xff\xd8", "\xff\xd8\xff\xee",
                            "\xff\xd8\xff\xee\x00\x0e"
                            "Ado",
                            "\xff\xd8\xff\xff\xff"}) {
    EXPECT_FALSE(HasAdobeMarker(bytes));
  }
  EXPECT_TRUE(
      HasAdobeMarker(std::string("\xff\xd8\xff\xee\x00\x0e"
                                 "Adobe\x00\x64\x00\x00\x00\x00\x02",
                                 18)));
  EXPECT_FALSE(
      HasAdobeMarker(std::string("\xff\xd8\xff\xee\x00\x0d"
                                 "Adobe\x00\x64\x00\x00\x00\x00",
                                 17)));
}

}  // namespace
}  // namespace tpusim::infeed
