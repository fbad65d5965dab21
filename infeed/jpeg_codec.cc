#include "infeed/jpeg_codec.h"

#include <turbojpeg.h>

#include <algorithm>
#include <array>
#include <memory>

#include "base/error.h"

namespace tpusim::infeed {
namespace {

struct HandleCloser {
  void operator()(void* handle) const { tjDestroy(handle); }
};
using Handle = std::unique_ptr<void, HandleCloser>;

// libjpeg's warnings (its JWRN_ messages) that TensorFlow and Pillow decode
// through. Any other message after a failed tjDecompress2 is an error libjpeg
// stopped at, or one of the two warnings that say the data ended before the
// frame was filled ("Premature end of JPEG file", "Corrupt JPEG data: premature
// end of data segment"): libjpeg fills the rest with grey, TensorFlow refuses it.
// TurboJPEG keeps the first warning's message, and an error's replaces it.
bool IsToleratedWarning(std::string_view message) {
  constexpr std::array<std::string_view, 9> kTolerated = {
      "Corrupt JPEG data: bad arithmetic code",
      "Corrupt JPEG data: bad Huffman code",
      "Corrupt JPEG data: bad ICC marker",
      "extraneous bytes before marker",
      "instead of RST",
      "Inconsistent progression sequence",
      "Invalid SOS parameters for sequential JPEG",
      "Unknown Adobe color transform code",
      "Warning: unknown JFIF revision number",
  };
  for (std::string_view tolerated : kTolerated) {
    if (message.find(tolerated) != std::string_view::npos) return true;
  }
  return false;
}

uint16_t BigEndian16(std::string_view bytes, size_t at) {
  return static_cast<uint16_t>((static_cast<unsigned char>(bytes[at]) << 8) |
                               static_cast<unsigned char>(bytes[at + 1]));
}

// Whether the JPEG's last scan (SOS marker) has an end-of-image marker after it:
// neither can occur inside entropy-coded data (0xff is stuffed there), so a file
// without one was cut. TurboJPEG keeps only its first warning, so a tolerated one
// could hide libjpeg's "Premature end"; this is checked when it does.
bool EndsAfterItsLastScan(std::string_view jpeg) {
  const size_t eoi = jpeg.rfind("\xff\xd9");
  const size_t sos = jpeg.rfind("\xff\xda");
  return eoi != std::string_view::npos && (sos == std::string_view::npos || eoi > sos);
}

[[noreturn]] void Truncated(std::string_view jpeg, const std::string& what, int width, int height,
                            std::string_view why) {
  Fail("{}: truncated JPEG: its data ends before its {}x{} frame is filled ({} bytes; {})", what, width, height,
       jpeg.size(), why);
}

struct Header {
  int width = 0;
  int height = 0;
  int colorspace = 0;
};

// The frame's size and colour space. TurboJPEG fails the header on a warning too,
// having read it whole: a tolerated one is decoded through.
Header ReadHeader(void* handle, std::string_view jpeg, const std::string& what) {
  Header h;
  int subsampling = 0;
  if (tjDecompressHeader3(handle, reinterpret_cast<const unsigned char*>(jpeg.data()),
                          static_cast<unsigned long>(jpeg.size()), &h.width, &h.height, &subsampling,
                          &h.colorspace) != 0) {
    const std::string message = tjGetErrorStr2(handle);
    if (!IsToleratedWarning(message)) Fail("{}: not a decodable JPEG ({} bytes): {}", what, jpeg.size(), message);
  }
  if (h.width <= 0 || h.height <= 0)
    Fail("{}: not a decodable JPEG: it declares {}x{} pixels", what, h.width, h.height);
  return h;
}

// Decodes into `out` (width x height pixels of `format`); throws Error naming
// `what` unless the decode succeeded or only warned in a tolerated way.
void Decompress(void* handle, std::string_view jpeg, const std::string& what, int width, int height, int format,
                std::span<uint8_t> out) {
  auto* bytes = reinterpret_cast<const unsigned char*>(jpeg.data());
  if (tjDecompress2(handle, bytes, static_cast<unsigned long>(jpeg.size()), out.data(), width, 0, height, format, 0) ==
      0) {
    return;
  }
  const std::string message = tjGetErrorStr2(handle);
  if (IsToleratedWarning(message)) {
    if (!EndsAfterItsLastScan(jpeg)) Truncated(jpeg, what, width, height, "no end-of-image marker after its last scan");
    return;
  }
  if (message.find("remature end") != std::string::npos) Truncated(jpeg, what, width, height, "libjpeg: " + message);
  Fail("{}: not a decodable JPEG ({} bytes, {}x{}): {}", what, jpeg.size(), width, height, message);
}

}  // namespace

std::string EncodeJpeg(const RgbImage& image, int quality) {
  Handle handle(tjInitCompress());
  if (!handle) Fail("libjpeg-turbo: tjInitCompress failed");
  unsigned char* out = nullptr;
  unsigned long size = 0;
  const int rc = tjCompress2(handle.get(), image.pixels.data(), image.width, 0, image.height, TJPF_RGB, &out, &size,
                             TJSAMP_420, quality, TJFLAG_ACCURATEDCT);
  std::unique_ptr<unsigned char, decltype(&tjFree)> owned(out, &tjFree);
  if (rc != 0)
    Fail("libjpeg-turbo: encoding a {}x{} image failed: {}", image.width, image.height, tjGetErrorStr2(handle.get()));
  return std::string(reinterpret_cast<const char*>(out), size);
}

RgbImage DecodeJpeg(std::string_view jpeg, const std::string& what, int64_t max_pixels) {
  Handle handle(tjInitDecompress());
  if (!handle) Fail("libjpeg-turbo: tjInitDecompress failed");
  const auto [width, height, colorspace] = ReadHeader(handle.get(), jpeg, what);
  const int64_t pixels = int64_t{width} * height;
  if (pixels > max_pixels) {
    Fail("{}: the JPEG declares {}x{} = {} pixels, over input.max_image_pixels ({}); refused before decoding", what,
         width, height, pixels, max_pixels);
  }
  RgbImage image{width, height, std::vector<uint8_t>(static_cast<size_t>(pixels) * 3)};
  if (colorspace != TJCS_CMYK && colorspace != TJCS_YCCK) {
    Decompress(handle.get(), jpeg, what, width, height, TJPF_RGB, image.pixels);
    return image;
  }
  // libjpeg converts no 4-component JPEG to RGB: decode its CMYK (YCCK is
  // converted to CMYK by libjpeg) and convert that as TensorFlow does.
  std::vector<uint8_t> cmyk(static_cast<size_t>(pixels) * 4);
  Decompress(handle.get(), jpeg, what, width, height, TJPF_CMYK, cmyk);
  CmykToRgb(cmyk, HasAdobeMarker(jpeg), image.pixels);
  return image;
}

void CmykToRgb(std::span<const uint8_t> cmyk, bool adobe_inverted, std::span<uint8_t> rgb) {
  const size_t n = std::min(cmyk.size() / 4, rgb.size() / 3);
  for (size_t i = 0; i < n; ++i) {
    const int k = cmyk[4 * i + 3];
    for (size_t c = 0; c < 3; ++c) {
      const int v = cmyk[4 * i + c];
      rgb[3 * i + c] = static_cast<uint8_t>(adobe_inverted ? k * v / 255 : (255 - k) * (255 - v) / 255);
    }
  }
}

bool HasAdobeMarker(std::string_view jpeg) {
  constexpr uint8_t kApp14 = 0xee, kSos = 0xda, kEoi = 0xd9;
  constexpr size_t kAdobeBytes = 12;  // libjpeg's APP14_DATA_LEN
  size_t at = 2;                      // past SOI
  while (at + 4 <= jpeg.size() && static_cast<unsigned char>(jpeg[at]) == 0xff) {
    const auto marker = static_cast<unsigned char>(jpeg[at + 1]);
    if (marker == 0xff) {  // a fill byte
      ++at;
      continue;
    }
    if (marker == kSos || marker == kEoi) return false;
    const size_t length = BigEndian16(jpeg, at + 2);  // counts its own two bytes
    if (length < 2) return false;
    if (marker == kApp14 && length - 2 >= kAdobeBytes && at + 4 + kAdobeBytes <= jpeg.size() &&
        jpeg.substr(at + 4, 5) == "Adobe") {
      return true;
    }
    at += 2 + length;
  }
  return false;
}

}  // namespace tpusim::infeed
