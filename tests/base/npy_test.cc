#include "base/npy.h"

#include <cstring>
#include <filesystem>
#include <fstream>
#include <sstream>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "base/error.h"

namespace tpusim {
namespace {

std::string TempPath(const std::string& name) {
  return (std::filesystem::temp_directory_path() / ("tpusim_npy_" + name)).string();
}

TEST(NpyTest, RoundTripKeepsShapeDtypeAndBytes) {
  NpyArray a{"<f4", {2, 3}, {}};
  a.data.resize(24);
  for (size_t i = 0; i < a.data.size(); ++i) a.data[i] = std::byte(i * 7);
  std::string path = TempPath("roundtrip.npy");
  WriteNpy(path, a);
  NpyArray b = ReadNpy(path);
  EXPECT_EQ(b.descr, "<f4");
  EXPECT_EQ(b.shape, (std::vector<int64_t>{2, 3}));
  EXPECT_EQ(b.data, a.data);
  EXPECT_EQ(std::filesystem::file_size(path) % 64, 24u % 64);  // header padded to 64
}

TEST(NpyTest, OneDimensionalShapeHasTrailingComma) {
  NpyArray a{"<i8", {5}, std::vector<std::byte>(40)};
  std::string path = TempPath("vec.npy");
  WriteNpy(path, a);
  std::ifstream in(path, std::ios::binary);
  std::string head(128, '\0');
  in.read(head.data(), 128);
  EXPECT_NE(head.find("'shape': (5,)"), std::string::npos);
  EXPECT_EQ(ReadNpy(path).shape, (std::vector<int64_t>{5}));
}

TEST(NpyTest, TruncatedPayloadNamesTheFile) {
  NpyArray a{"<f4", {4, 4}, std::vector<std::byte>(64)};
  std::string path = TempPath("trunc.npy");
  WriteNpy(path, a);
  std::filesystem::resize_file(path, std::filesystem::file_size(path) - 10);
  try {
    ReadNpy(path);
    FAIL() << "expected Error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find(path), std::string::npos);
    EXPECT_NE(std::string(e.what()).find("truncated"), std::string::npos);
  }
}

TEST(NpyTest, MissingFileAndBadMagicAreErrors) {
  EXPECT_THROW(ReadNpy(TempPath("does_not_exist.npy")), Error);
  std::string path = TempPath("bad.npy");
  std::ofstream(path) << "hello world, not numpy";
  EXPECT_THROW(ReadNpy(path), Error);
}

// A header is read before anything is allocated for the payload it announces.
std::string Header(const std::string& dict) {
  std::string padded = dict + std::string((64 - (10 + dict.size() + 1) % 64) % 64, ' ') + "\n";
  return std::string("\x93NUMPY\x01\x00", 8) + static_cast<char>(padded.size() & 0xff) +
         static_cast<char>(padded.size() >> 8) + padded;
}

std::string ErrorOfBytes(const std::string& bytes) {
  std::istringstream in(bytes);
  try {
    ReadNpy(in, "f.npy");
  } catch (const Error& e) {
    return e.what();
  }
  return "";
}

TEST(NpyTest, CraftedHeadersAreErrorsNotAllocations) {
  EXPECT_EQ(ErrorOfBytes(Header("{'descr': '<f4', 'fortran_order': False, 'shape': (4611686018427387904, 4), }")),
            "f.npy: .npy shape [4611686018427387904, 4] of '<f4' is too large to be held (more than 2^63 bytes)");
  EXPECT_EQ(ErrorOfBytes(Header("{'descr': '<f4', 'fortran_order': False, 'shape': (1000000000, 64), }")),
            "f.npy: truncated .npy payload: expected 256000000000 bytes for shape [1000000000, 64], found 0");
  EXPECT_EQ(ErrorOfBytes(Header("{'descr': '<f4', 'fortran_order': False, 'shape': (-3, 2), }")),
            "f.npy: malformed .npy shape '(-3, 2)': '-3' is not a dimension (an integer >= 0)");
  EXPECT_EQ(ErrorOfBytes(Header("{'descr': '<f4', 'fortran_order': False, 'shape': (3,,2), }")),
            "f.npy: malformed .npy shape '(3,,2)': '' is not a dimension (an integer >= 0)");
  EXPECT_THAT(ErrorOfBytes(Header("{'descr': '<f4', 'fortran_order': False, }")),
              ::testing::StartsWith("f.npy: malformed .npy header (no 'shape'): {'descr': '<f4', "));
  EXPECT_EQ(ErrorOfBytes(std::string("\x93NUMPY\x02\x00\xff\xff\xff\x7f", 12)),
            "f.npy: .npy header of 2147483647 bytes (at most 1048576 supported)");
}

TEST(NpyTest, ScalarAndOneTupleShapes) {
  EXPECT_EQ(ErrorOfBytes(Header("{'descr': '<i8', 'fortran_order': False, 'shape': (), }") + std::string(8, '\0')), "");
  EXPECT_EQ(ErrorOfBytes(Header("{'descr': '<i8', 'fortran_order': False, 'shape': (2, ), }") + std::string(16, '\0')),
            "");
}

TEST(NpyTest, SizeMismatchOnWriteIsAnError) {
  NpyArray a{"<f4", {3}, std::vector<std::byte>(8)};
  EXPECT_THROW(WriteNpy(TempPath("mismatch.npy"), a), Error);
}

}  // namespace
}  // namespace tpusim
