// JPEG through libjpeg-turbo's TurboJPEG API (Debian's libturbojpeg0-dev): the
// decode a vision input pipeline spends its host CPU on, and the encode
// `gen-data --format tfrecord` writes its images with. Images are 8-bit RGB,
// row-major, height x width x 3.
//
// The decode is as strict as TensorFlow's decode_jpeg with its defaults
// (try_recover_truncated: false, acceptable_fraction: 1): a JPEG whose data ends
// before its frame is filled is refused, where libjpeg would only warn and pad
// the rest with grey. Its size is checked from the header before any pixel is
// allocated. CMYK and YCCK JPEGs decode to RGB as TensorFlow converts them.
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <string_view>
#include <vector>

namespace tpusim::infeed {

// input.max_image_pixels' default: 178,956,970 pixels, Pillow's refusal of a
// decompression bomb (twice its Image.MAX_IMAGE_PIXELS) and a decoded RGB image
// of 512 MiB. libjpeg decodes at most 65,500 x 65,500.
inline constexpr int64_t kDefaultMaxImagePixels = 178'956'970;
inline constexpr int64_t kMaxJpegPixels = int64_t{65500} * 65500;

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

// Decodes `jpeg` to RGB (libjpeg's default IDCT, no fancy shortcuts). Throws Error
// "<what>: ..." (what names the record) when the bytes are not a JPEG, when its
// header declares more than `max_pixels` pixels (before decoding), when its data
// ends before the frame is filled, or on any other error libjpeg stops at.
// libjpeg's other warnings (extraneous bytes before a marker, a bad Huffman code,
// an unknown JFIF revision) are decoded through, as TensorFlow and Pillow do.
// Thread-safe (a decoder per call).
RgbImage DecodeJpeg(std::string_view jpeg, const std::string& what, int64_t max_pixels = kDefaultMaxImagePixels);

// TensorFlow's conversion of decoded CMYK pixels (4 bytes each) to RGB into `rgb`
// (3 bytes each): a JPEG with an Adobe APP14 marker stores inverted CMYK
// (R = K x C / 255), any other R = (255 - K) x (255 - C) / 255.
void CmykToRgb(std::span<const uint8_t> cmyk, bool adobe_inverted, std::span<uint8_t> rgb);

// Whether `jpeg` has an Adobe APP14 marker (of at least the 12 bytes libjpeg
// reads) before its first scan: libjpeg's saw_Adobe_marker.
bool HasAdobeMarker(std::string_view jpeg);

}  // namespace tpusim::infeed
