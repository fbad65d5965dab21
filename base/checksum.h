// A 64-bit FNV-1a hash of raw bytes: the bitwise fingerprint tpusim compares to
// prove that replicas hold identical parameters (equal hashes <=> equal bits, up
// to a 2^-64 collision), printed as 16 hex digits.
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>
#include <string>

#include <fmt/format.h>

namespace tpusim {

inline uint64_t Fnv1a64(std::span<const std::byte> bytes, uint64_t hash = 0xcbf29ce484222325ull) {
  for (std::byte b : bytes) {
    hash ^= static_cast<uint64_t>(b);
    hash *= 0x100000001b3ull;
  }
  return hash;
}

inline std::string HexDigest(uint64_t hash) { return fmt::format("{:016x}", hash); }

}  // namespace tpusim
