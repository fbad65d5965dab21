#include "base/npy.h"

#include <cstring>
#include <filesystem>
#include <fstream>

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

TEST(NpyTest, SizeMismatchOnWriteIsAnError) {
  NpyArray a{"<f4", {3}, std::vector<std::byte>(8)};
  EXPECT_THROW(WriteNpy(TempPath("mismatch.npy"), a), Error);
}

}  // namespace
}  // namespace tpusim
