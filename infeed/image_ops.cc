#include "infeed/image_ops.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <vector>

#include "base/error.h"

namespace tpusim::infeed {
namespace {

uint64_t SplitMix64(uint64_t& state) {
  uint64_t z = (state += 0x9e3779b97f4a7c15ull);
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
  return z ^ (z >> 31);
}

// Uniform in [0, 1).
double Uniform(uint64_t& state) { return static_cast<double>(SplitMix64(state) >> 11) * 0x1.0p-53; }

CropBox CenterCrop(int width, int height) {
  const int side = std::max(1, static_cast<int>(std::lround(0.875 * std::min(width, height))));
  return {(width - side) / 2, (height - side) / 2, side, side};
}

// Source sample positions of one axis: the two neighbours and the weight of the
// second, for half-pixel centres.
struct Taps {
  std::vector<int> lo, hi;
  std::vector<float> w;
};

Taps AxisTaps(int first, int length, int out_length) {
  Taps taps;
  const double scale = static_cast<double>(length) / out_length;
  for (int i = 0; i < out_length; ++i) {
    double src = (i + 0.5) * scale - 0.5;
    src = std::clamp(src, 0.0, static_cast<double>(length - 1));
    const int lo = static_cast<int>(src);
    taps.lo.push_back(first + lo);
    taps.hi.push_back(first + std::min(lo + 1, length - 1));
    taps.w.push_back(static_cast<float>(src - lo));
  }
  return taps;
}

template <typename T, typename Store>
void ResizeRows(const RgbImage& image, const Taps& ys, const Taps& xs, bool flip, int out_width, T* out, Store store) {
  for (size_t y = 0; y < ys.lo.size(); ++y) {
    const uint8_t* r0 = image.row(ys.lo[y]);
    const uint8_t* r1 = image.row(ys.hi[y]);
    const float wy = ys.w[y];
    for (int x = 0; x < out_width; ++x) {
      const size_t sx = static_cast<size_t>(flip ? out_width - 1 - x : x);
      const size_t a = static_cast<size_t>(xs.lo[sx]) * 3, b = static_cast<size_t>(xs.hi[sx]) * 3;
      const float wx = xs.w[sx];
      for (size_t c = 0; c < 3; ++c) {
        const float top = r0[a + c] + wx * (static_cast<float>(r0[b + c]) - r0[a + c]);
        const float bottom = r1[a + c] + wx * (static_cast<float>(r1[b + c]) - r1[a + c]);
        *out++ = store(top + wy * (bottom - top));
      }
    }
  }
}

}  // namespace

uint64_t ExampleSeed(uint64_t seed, uint64_t a, uint64_t b) {
  uint64_t state = seed ^ 0x5eed5eed5eed5eedull;
  state ^= SplitMix64(state) + a;
  state ^= SplitMix64(state) + b;
  return SplitMix64(state);
}

CropBox ChooseCrop(int width, int height, CropMode mode, uint64_t seed) {
  if (mode == CropMode::kNone) return {0, 0, width, height};
  if (mode == CropMode::kCenter) return CenterCrop(width, height);
  uint64_t state = seed;
  const double area = static_cast<double>(width) * height;
  for (int attempt = 0; attempt < 10; ++attempt) {
    const double target = area * (0.08 + 0.92 * Uniform(state));
    const double log_ratio = std::log(3.0 / 4) + (std::log(4.0 / 3) - std::log(3.0 / 4)) * Uniform(state);
    const double ratio = std::exp(log_ratio);
    const int w = static_cast<int>(std::lround(std::sqrt(target * ratio)));
    const int h = static_cast<int>(std::lround(std::sqrt(target / ratio)));
    if (w < 1 || h < 1 || w > width || h > height) continue;
    const int x = static_cast<int>(Uniform(state) * (width - w + 1));
    const int y = static_cast<int>(Uniform(state) * (height - h + 1));
    return {x, y, w, h};
  }
  return CenterCrop(width, height);
}

bool ChooseFlip(uint64_t seed) {
  uint64_t state = seed ^ 0xf11bf11bf11bf11bull;
  return (SplitMix64(state) & 1) != 0;
}

void ResizeInto(const RgbImage& image, const CropBox& box, bool flip, int out_height, int out_width, DType dtype,
                std::span<std::byte> out) {
  const size_t elements = static_cast<size_t>(out_height) * static_cast<size_t>(out_width) * 3;
  if (out.size() != elements * DTypeSize(dtype)) {
    Fail("image resize: output holds {} bytes, {}x{}x3 {} needs {}", out.size(), out_height, out_width,
         DTypeName(dtype), elements * DTypeSize(dtype));
  }
  const Taps ys = AxisTaps(box.y, box.height, out_height);
  const Taps xs = AxisTaps(box.x, box.width, out_width);
  switch (dtype) {
    case DType::kUInt8:
      ResizeRows(image, ys, xs, flip, out_width, reinterpret_cast<uint8_t*>(out.data()),
                 [](float v) { return static_cast<uint8_t>(std::clamp(std::lround(v), 0l, 255l)); });
      return;
    case DType::kFloat32: {
      std::vector<float> values(elements);
      ResizeRows(image, ys, xs, flip, out_width, values.data(), [](float v) { return v / 255.0f; });
      std::memcpy(out.data(), values.data(), out.size());
      return;
    }
    case DType::kBFloat16: {
      std::vector<uint16_t> values(elements);
      ResizeRows(image, ys, xs, flip, out_width, values.data(), [](float v) { return FloatToBFloat16(v / 255.0f); });
      std::memcpy(out.data(), values.data(), out.size());
      return;
    }
    default:
      Fail("image resize: dtype {} is not one of uint8, bfloat16, float32", DTypeName(dtype));
  }
}

}  // namespace tpusim::infeed
