#include "base/synthetic_bytes.h"

#include <cstring>
#include <string_view>

#include <gtest/gtest.h>

#if defined(__x86_64__) && defined(__GNUC__)
#include <immintrin.h>
#endif

namespace tpusim {
namespace {

AesBlock FromHex(std::string_view hex) {
  AesBlock block{};
  for (size_t j = 0; j < block.size(); ++j) {
    auto nibble = [](char c) { return c <= '9' ? c - '0' : c - 'a' + 10; };
    block[j] = static_cast<uint8_t>(nibble(hex[2 * j]) << 4 | nibble(hex[2 * j + 1]));
  }
  return block;
}

// S-box values through the last round: with a zero key and all sixteen bytes equal,
// ShiftRows moves nothing, so every byte of the result is S(x).
uint8_t Sbox(uint8_t x) {
  AesBlock same;
  same.fill(x);
  return AesLastRound(same, AesBlock{})[0];
}

// AES-128 (FIPS-197 5.1-5.2): the key expansion written out here, the rounds from
// base/synthetic_bytes.h.
AesBlock Aes128(const AesBlock& key, const AesBlock& plaintext) {
  uint8_t w[44][4];
  for (int i = 0; i < 4; ++i) std::memcpy(w[i], key.data() + 4 * i, 4);
  uint8_t rcon = 1;
  for (int i = 4; i < 44; ++i) {
    uint8_t t[4];
    std::memcpy(t, w[i - 1], 4);
    if (i % 4 == 0) {
      const uint8_t first = t[0];
      for (int k = 0; k < 3; ++k) t[k] = Sbox(t[k + 1]);
      t[3] = Sbox(first);
      t[0] ^= rcon;
      rcon = static_cast<uint8_t>((rcon << 1) ^ ((rcon & 0x80) ? 0x1b : 0));
    }
    for (int k = 0; k < 4; ++k) w[i][k] = w[i - 4][k] ^ t[k];
  }
  auto round_key = [&](int r) {
    AesBlock k;
    std::memcpy(k.data(), w[4 * r], 16);
    return k;
  };
  AesBlock state = plaintext;
  for (size_t j = 0; j < 16; ++j) state[j] ^= key[j];
  for (int r = 1; r < 10; ++r) state = AesRound(state, round_key(r));
  return AesLastRound(state, round_key(10));
}

// FIPS-197's known answers: appendix B and appendix C.1.
TEST(SyntheticBytesTest, AesRoundsMakeFips197Ciphertexts) {
  EXPECT_EQ(Aes128(FromHex("2b7e151628aed2a6abf7158809cf4f3c"), FromHex("3243f6a8885a308d313198a2e0370734")),
            FromHex("3925841d02dc09fbdc118597196a0b32"));
  EXPECT_EQ(Aes128(FromHex("000102030405060708090a0b0c0d0e0f"), FromHex("00112233445566778899aabbccddeeff")),
            FromHex("69c4e0d86a7b0430d8cdb78070b4c55a"));
}

AesBlock Lanes(uint64_t low, uint64_t high) {
  AesBlock block;
  std::memcpy(block.data(), &low, 8);
  std::memcpy(block.data() + 8, &high, 8);
  return block;
}

// The key schedule and the counter as base/synthetic_bytes.h documents them.
TEST(SyntheticBytesTest, BlocksAreArsThreeOfTheCounter) {
  const uint64_t key = 0x0123456789abcdefULL;
  const SyntheticRowBytes bytes(key);
  for (uint64_t r = 0; r < 4; ++r) {
    EXPECT_EQ(bytes.round_keys[r], Lanes(key + r * 0x9E3779B97F4A7C15ULL, r * 0xBB67AE8584CAA73BULL)) << r;
  }
  for (uint64_t i : {0ULL, 1ULL, 77ULL, 0xffffffffffULL}) {
    AesBlock state = Lanes(i ^ key, 0);
    state = AesRound(AesRound(state, bytes.round_keys[1]), bytes.round_keys[2]);
    EXPECT_EQ(bytes.Block(i), AesLastRound(state, bytes.round_keys[3])) << i;
  }
  EXPECT_NE(bytes.Block(0), bytes.Block(1));
  EXPECT_NE(bytes.Block(0), SyntheticRowBytes(key + 1).Block(0));
}

#if defined(__x86_64__) && defined(__GNUC__)
__attribute__((target("aes"))) AesBlock HardwareRound(const AesBlock& state, const AesBlock& key, bool last) {
  const __m128i s = _mm_loadu_si128(reinterpret_cast<const __m128i*>(state.data()));
  const __m128i k = _mm_loadu_si128(reinterpret_cast<const __m128i*>(key.data()));
  AesBlock out;
  _mm_storeu_si128(reinterpret_cast<__m128i*>(out.data()), last ? _mm_aesenclast_si128(s, k) : _mm_aesenc_si128(s, k));
  return out;
}

// The portable rounds are the instructions the row kernels use.
TEST(SyntheticBytesTest, AesRoundsMatchAesNi) {
  if (!__builtin_cpu_supports("aes")) GTEST_SKIP() << "this CPU has no AES-NI";
  for (uint64_t i = 0; i < 64; ++i) {
    const AesBlock state = SyntheticRowBytes(i).Block(i), key = SyntheticRowBytes(~i).Block(3 * i);
    EXPECT_EQ(AesRound(state, key), HardwareRound(state, key, false)) << i;
    EXPECT_EQ(AesLastRound(state, key), HardwareRound(state, key, true)) << i;
  }
}
#endif

TEST(SyntheticBytesTest, BFloat16BitsAreSignAndSevenBitsOverHalf) {
  EXPECT_EQ(ByteToBFloat16Bits(0x00), 0x3f00);  // 0.5
  EXPECT_EQ(ByteToBFloat16Bits(0x7f), 0x3f7f);  // 0.99609375
  EXPECT_EQ(ByteToBFloat16Bits(0x80), 0xbf00);  // -0.5
  EXPECT_EQ(ByteToBFloat16Bits(0xff), 0xbf7f);
}

}  // namespace
}  // namespace tpusim
