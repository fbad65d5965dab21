#include "base/synthetic_bytes.h"

#include <cstring>

namespace tpusim {
namespace {

// Multiplication by x in GF(2^8) modulo the AES polynomial x^8 + x^4 + x^3 + x + 1.
constexpr uint8_t TimesX(uint8_t a) { return static_cast<uint8_t>((a << 1) ^ ((a & 0x80) ? 0x1b : 0)); }

constexpr uint8_t GfMultiply(uint8_t a, uint8_t b) {
  uint8_t product = 0;
  for (; b != 0; b >>= 1, a = TimesX(a)) {
    if (b & 1) product ^= a;
  }
  return product;
}

constexpr uint8_t RotateLeft(uint8_t b, int k) { return static_cast<uint8_t>((b << k) | (b >> (8 - k))); }

// The S-box from its definition (FIPS-197 5.1.1): the multiplicative inverse (0 for
// 0), then the affine map b ^ rotl1 ^ rotl2 ^ rotl3 ^ rotl4 ^ 0x63.
constexpr std::array<uint8_t, 256> MakeSbox() {
  std::array<uint8_t, 256> sbox{};
  for (int x = 0; x < 256; ++x) {
    uint8_t inverse = 0;
    for (int y = 1; y < 256 && x != 0; ++y) {
      if (GfMultiply(static_cast<uint8_t>(x), static_cast<uint8_t>(y)) == 1) inverse = static_cast<uint8_t>(y);
    }
    sbox[x] = static_cast<uint8_t>(inverse ^ RotateLeft(inverse, 1) ^ RotateLeft(inverse, 2) ^ RotateLeft(inverse, 3) ^
                                   RotateLeft(inverse, 4) ^ 0x63);
  }
  return sbox;
}
constexpr std::array<uint8_t, 256> kSbox = MakeSbox();
static_assert(kSbox[0x00] == 0x63 && kSbox[0x53] == 0xed, "FIPS-197 figure 7");

// SubBytes and ShiftRows: row r of the state rotates left by r columns.
AesBlock SubShift(const AesBlock& s) {
  AesBlock out;
  for (int column = 0; column < 4; ++column) {
    for (int row = 0; row < 4; ++row) out[4 * column + row] = kSbox[s[4 * ((column + row) % 4) + row]];
  }
  return out;
}

AesBlock MixColumns(const AesBlock& s) {
  AesBlock out;
  for (int c = 0; c < 16; c += 4) {
    const uint8_t a0 = s[c], a1 = s[c + 1], a2 = s[c + 2], a3 = s[c + 3];
    out[c] = static_cast<uint8_t>(TimesX(a0) ^ TimesX(a1) ^ a1 ^ a2 ^ a3);
    out[c + 1] = static_cast<uint8_t>(a0 ^ TimesX(a1) ^ TimesX(a2) ^ a2 ^ a3);
    out[c + 2] = static_cast<uint8_t>(a0 ^ a1 ^ TimesX(a2) ^ TimesX(a3) ^ a3);
    out[c + 3] = static_cast<uint8_t>(TimesX(a0) ^ a0 ^ a1 ^ a2 ^ TimesX(a3));
  }
  return out;
}

AesBlock Xor(AesBlock a, const AesBlock& b) {
  for (int j = 0; j < 16; ++j) a[j] ^= b[j];
  return a;
}

AesBlock FromLanes(uint64_t low, uint64_t high) {
  AesBlock block;
  for (int j = 0; j < 8; ++j) {
    block[j] = static_cast<uint8_t>(low >> (8 * j));
    block[8 + j] = static_cast<uint8_t>(high >> (8 * j));
  }
  return block;
}

}  // namespace

AesBlock AesRound(const AesBlock& state, const AesBlock& round_key) {
  return Xor(MixColumns(SubShift(state)), round_key);
}

AesBlock AesLastRound(const AesBlock& state, const AesBlock& round_key) { return Xor(SubShift(state), round_key); }

SyntheticRowBytes::SyntheticRowBytes(uint64_t row_key) {
  for (int r = 0; r <= kSyntheticByteRounds; ++r) {
    const auto k = static_cast<uint64_t>(r);
    round_keys[static_cast<size_t>(r)] = FromLanes(row_key + k * kArsWeylLow, k * kArsWeylHigh);
  }
}

AesBlock SyntheticRowBytes::Block(uint64_t i) const {
  AesBlock state = Xor(FromLanes(i, 0), round_keys[0]);
  for (int r = 1; r < kSyntheticByteRounds; ++r) state = AesRound(state, round_keys[static_cast<size_t>(r)]);
  return AesLastRound(state, round_keys[kSyntheticByteRounds]);
}

}  // namespace tpusim
