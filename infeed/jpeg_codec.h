// JPEG through libjpeg-turbo's TurboJPEG API (Debian's libturbojpeg0-dev): the
// decode a vision input pipeline spends its host CPU on, and the encode
// `gen-data --format tfrecord` writes its images with. Images are 8-bit RGB,
// row-major, height x width x 3.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace tpusim::infeed {

struct RgbImage {
  int width = 0;
  int height = 0;
  std::vector<uint8_t> pixels;  // height * width * 3

  uint8_t* row(int y) { return pixels.data() + static_cast<size_t>(y) * static_cast<size_t>(width) * 3; }
  const uint8_t* row(int y) const { return pixels.data() + static_cast<size_t>(y) * static_cast<size_t>(width) * 3; }
};

// The baseline JPEG of `image` at `quality` (1..100, 4:2:0 subsampling as PIL's
// default). Throws Error on a libjpeg failure.
std::string EncodeJpeg(const RgbImage& image, int quality);

// Decodes `jpeg` to RGB (libjpeg's default IDCT, no fancy shortcuts). Throws
// Error "<what>: not a decodable JPEG: <libjpeg's reason>" (what names the
// record) on bytes libjpeg refuses. Thread-safe (a decoder per call).
RgbImage DecodeJpeg(std::string_view jpeg, const std::string& what);

}  // namespace tpusim::infeed
