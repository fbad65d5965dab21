// Counter-based pseudo-random values for the synthetic input source. Every value is
// a pure function of (seed, global example id, feature, element), so any rank can
// regenerate and verify any shard without communication, whatever the timing.
#pragma once

#include <cstdint>
#include <string_view>

namespace tpusim {

// SplitMix64 finaliser: a bijective 64-bit mix with good avalanche.
constexpr uint64_t Mix64(uint64_t x) {
  x += 0x9e3779b97f4a7c15ULL;
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ULL;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebULL;
  return x ^ (x >> 31);
}

// FNV-1a of a feature name: the feature's key in SyntheticBits.
constexpr uint64_t FeatureKey(std::string_view name) {
  uint64_t h = 0xcbf29ce484222325ULL;
  for (char c : name) h = (h ^ static_cast<unsigned char>(c)) * 0x100000001b3ULL;
  return h;
}

// SyntheticBits in three stages, so a generator hashes the seed and feature once per
// feature, the example id once per row, and only the last mix per element.
constexpr uint64_t SyntheticFeatureSeed(uint64_t seed, uint64_t feature_key) {
  return Mix64(seed ^ Mix64(feature_key));
}
constexpr uint64_t SyntheticRowKey(uint64_t feature_seed, int64_t example_id) {
  return Mix64(feature_seed ^ static_cast<uint64_t>(example_id));
}
constexpr uint64_t SyntheticElementBits(uint64_t row_key, int64_t element) {
  return Mix64(row_key ^ (static_cast<uint64_t>(element) * 0xd1b54a32d192ed03ULL));
}

// 64 random bits for one element of one feature of one example.
constexpr uint64_t SyntheticBits(uint64_t seed, int64_t example_id, uint64_t feature_key, int64_t element) {
  return SyntheticElementBits(SyntheticRowKey(SyntheticFeatureSeed(seed, feature_key), example_id), element);
}

// Maps random bits to a float uniformly spread over [-1, 1).
constexpr float BitsToUnitFloat(uint64_t bits) {
  return static_cast<float>(static_cast<double>(bits >> 40) / static_cast<double>(1ULL << 23)) - 1.0f;
}

// Maps random bits to a double uniformly spread over [0, 1).
constexpr double BitsToUniform01(uint64_t bits) {
  return static_cast<double>(bits >> 11) / static_cast<double>(1ULL << 53);
}

}  // namespace tpusim
