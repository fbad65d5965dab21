// The image preprocessing of a vision input pipeline, done for real on the host's
// workers (input.features.F.decode: jpeg): choose a crop window (random, center or
// the whole image), resize it bilinearly to the feature's [height, width], flip it
// left-right at random, and store it as uint8, or as bfloat16 / float32 scaled to
// [0, 1]. Random choices come from a per-example seed, so a run is reproducible
// whatever worker preprocesses which example.
#pragma once

#include <cstdint>
#include <span>

#include "infeed/dtype.h"
#include "infeed/jpeg_codec.h"

namespace tpusim::infeed {

enum class CropMode { kNone, kCenter, kRandom };

struct CropBox {
  int x = 0;
  int y = 0;
  int width = 0;
  int height = 0;
};

// The window of a `width` x `height` image to keep. kNone: all of it. kCenter: the
// central square of 87.5 % of the shorter side (224 of 256, the ResNet evaluation
// crop). kRandom: the Inception crop (RandomResizedCrop): an area of 8 % to 100 %
// of the image with aspect ratio in [3/4, 4/3], ten draws from `seed`, else the
// center crop.
CropBox ChooseCrop(int width, int height, CropMode mode, uint64_t seed);

// Whether the example with `seed` is flipped left-right (flip: random, p = 1/2).
bool ChooseFlip(uint64_t seed);

// Resizes `box` of `image` bilinearly (half-pixel centres, as tf.image.resize) to
// out_height x out_width x 3, mirrored left-right if `flip`, into `out` as `dtype`
// (uint8 rounded; bfloat16 and float32 as value / 255). out.size() must be
// out_height * out_width * 3 * DTypeSize(dtype).
void ResizeInto(const RgbImage& image, const CropBox& box, bool flip, int out_height, int out_width, DType dtype,
                std::span<std::byte> out);

// A 64-bit mix of (seed, a, b): the per-example seed of record b of file a.
uint64_t ExampleSeed(uint64_t seed, uint64_t a, uint64_t b);

}  // namespace tpusim::infeed
