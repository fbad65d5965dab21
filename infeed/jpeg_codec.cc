#include "infeed/jpeg_codec.h"

#include <turbojpeg.h>

#include <memory>

#include "base/error.h"

namespace tpusim::infeed {
namespace {

struct HandleCloser {
  void operator()(void* handle) const { tjDestroy(handle); }
};
using Handle = std::unique_ptr<void, HandleCloser>;

// Images larger than this are refused before decoding (a corrupt header could
// ask for gigabytes): 64 megapixels, well above any photo dataset's.
constexpr int64_t kMaxPixels = int64_t{64} << 20;

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

RgbImage DecodeJpeg(std::string_view jpeg, const std::string& what) {
  Handle handle(tjInitDecompress());
  if (!handle) Fail("libjpeg-turbo: tjInitDecompress failed");
  auto* bytes = reinterpret_cast<const unsigned char*>(jpeg.data());
  const auto size = static_cast<unsigned long>(jpeg.size());
  int width = 0, height = 0, subsampling = 0, colorspace = 0;
  if (tjDecompressHeader3(handle.get(), bytes, size, &width, &height, &subsampling, &colorspace) != 0) {
    Fail("{}: not a decodable JPEG ({} bytes): {}", what, jpeg.size(), tjGetErrorStr2(handle.get()));
  }
  if (width <= 0 || height <= 0 || int64_t{width} * height > kMaxPixels) {
    Fail("{}: JPEG of {}x{} pixels refused (at most {} pixels)", what, width, height, kMaxPixels);
  }
  RgbImage image{width, height, std::vector<uint8_t>(static_cast<size_t>(width) * static_cast<size_t>(height) * 3)};
  if (tjDecompress2(handle.get(), bytes, size, image.pixels.data(), width, 0, height, TJPF_RGB, 0) != 0 &&
      tjGetErrorCode(handle.get()) == TJERR_FATAL) {
    Fail("{}: not a decodable JPEG ({} bytes): {}", what, jpeg.size(), tjGetErrorStr2(handle.get()));
  }
  return image;
}

}  // namespace tpusim::infeed
