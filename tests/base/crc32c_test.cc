#include "base/crc32c.h"

#include <string>

#include <gtest/gtest.h>

namespace tpusim {
namespace {

// The standard check value of CRC-32C (RFC 3720 B.4's CRC, catalogued as
// CRC-32/ISCSI): the CRC of the nine ASCII digits.
TEST(Crc32cTest, CheckValue) { EXPECT_EQ(Crc32c("123456789"), 0xE3069283u); }

// RFC 3720 B.4: 32 bytes of zeros, of 0xff and an ascending sequence.
TEST(Crc32cTest, Rfc3720Vectors) {
  EXPECT_EQ(Crc32c(std::string(32, '\0')), 0x8A9136AAu);
  EXPECT_EQ(Crc32c(std::string(32, '\xff')), 0x62A8AB43u);
  std::string ascending;
  for (int i = 0; i < 32; ++i) ascending.push_back(static_cast<char>(i));
  EXPECT_EQ(Crc32c(ascending), 0x46DD794Eu);
}

TEST(Crc32cTest, EmptyIsZero) { EXPECT_EQ(Crc32c(""), 0u); }

// Slicing-by-8 and the byte loop meet at every split and every length.
TEST(Crc32cTest, ExtendEqualsWhole) {
  std::string text;
  for (int i = 0; i < 100; ++i) text.push_back(static_cast<char>(i * 37 + 11));
  const uint32_t whole = Crc32c(text);
  for (size_t split = 0; split <= text.size(); ++split) {
    EXPECT_EQ(Crc32c(text.substr(split), Crc32c(text.substr(0, split))), whole) << split;
  }
}

// TensorFlow's masked CRC of "123456789": ((crc >> 15) | (crc << 17)) + 0xa282ead8
// worked by hand: rotr15(0xE3069283) = 0x2507C60D, + 0xa282ead8 = 0xC78AB0E5.
TEST(Crc32cTest, TensorFlowMask) {
  EXPECT_EQ(MaskCrc32c(0xE3069283u), 0xC78AB0E5u);
  EXPECT_EQ(UnmaskCrc32c(MaskCrc32c(0xE3069283u)), 0xE3069283u);
  EXPECT_EQ(UnmaskCrc32c(MaskCrc32c(0u)), 0u);
}

}  // namespace
}  // namespace tpusim
