#include "infeed/tfrecord.h"

#include <sys/stat.h>

#include <filesystem>
#include <fstream>
#include <random>
#include <string>
#include <vector>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "base/crc32c.h"
#include "tests/common/byte_files.h"
#include "tests/common/error_of.h"
#include "tests/common/scratch_dir.h"

namespace tpusim::infeed {
namespace {

using tpusim::testing::ReadBytes;
using tpusim::testing::Unhex;
using tpusim::testing::WriteBytes;

using ::testing::HasSubstr;
using tpusim::testing::ErrorOf;
using tpusim::testing::ScratchDir;

std::vector<std::string> ReadAll(const std::string& path, const TfRecordOptions& options = {},
                                 TfRecordReadCosts* costs = nullptr) {
  TfRecordReader reader(path, options);
  std::vector<std::string> out;
  std::string data;
  while (reader.Next(data)) out.push_back(data);
  if (costs) *costs = reader.costs();
  return out;
}

// Framings computed independently (a pure-Python CRC-32C and struct.pack, as
// TensorFlow's record_writer.cc lays them out).
TEST(TfRecordTest, FramingMatchesIndependentBytes) {
  EXPECT_EQ(FrameTfRecord("hello"), Unhex("0500000000000000eab2043e68656c6c6fbb1f1c19"));
  EXPECT_EQ(FrameTfRecord(""), Unhex("000000000000000029039807d8ea82a2"));
}

class TfRecordFileTest : public ::testing::Test {
 protected:
  ScratchDir scratch_{"tpusim-tfrecord-test-"};
  std::string path_ = scratch_.Path("data.tfrecord");
  std::vector<std::string> records_{"hello", "", std::string(3 << 20, 'x'), "last"};

  void WriteRecords(TfRecordCompression compression = TfRecordCompression::kNone) {
    TfRecordWriter writer(path_, compression);
    for (const std::string& r : records_) writer.Write(r);
    writer.Close();
  }
};

TEST_F(TfRecordFileTest, RoundTripsEveryCompression) {
  for (TfRecordCompression c : {TfRecordCompression::kNone, TfRecordCompression::kZlib, TfRecordCompression::kGzip}) {
    WriteRecords(c);
    TfRecordReadCosts costs;
    EXPECT_EQ(ReadAll(path_, {c, true, false}, &costs), records_) << CompressionName(c);
    EXPECT_EQ(costs.records, 4);
    EXPECT_EQ(costs.skipped, 0);
    EXPECT_EQ(costs.file_bytes, static_cast<int64_t>(ReadBytes(path_).size()));
  }
}

TEST_F(TfRecordFileTest, OffsetsAndIndices) {
  WriteRecords();
  TfRecordReader reader(path_, {});
  std::string data;
  std::vector<int64_t> offsets;
  while (reader.Next(data)) offsets.push_back(reader.record_offset());
  EXPECT_EQ(offsets, (std::vector<int64_t>{0, 21, 37, 37 + 16 + (3 << 20)}));
}

TEST_F(TfRecordFileTest, EmptyFileHoldsNoRecords) {
  WriteBytes(path_, "");
  EXPECT_TRUE(ReadAll(path_).empty());
}

TEST_F(TfRecordFileTest, DataCrcMismatchNamesFileAndOffset) {
  WriteRecords();
  std::string bytes = ReadBytes(path_);
  bytes[37 + 12 + 100] ^= 1;  // one byte of the third record's data
  WriteBytes(path_, bytes);
  const std::string message = ErrorOf([&] { ReadAll(path_); });
  EXPECT_THAT(message, HasSubstr(path_ + ": record 2 at byte offset 37: data CRC mismatch"));
  EXPECT_EQ(message.find('\n'), std::string::npos);
}

TEST_F(TfRecordFileTest, SkipCorruptSkipsAndCounts) {
  WriteRecords();
  std::string bytes = ReadBytes(path_);
  bytes[37 + 12 + 100] ^= 1;
  WriteBytes(path_, bytes);
  TfRecordReadCosts costs;
  EXPECT_EQ(ReadAll(path_, {TfRecordCompression::kNone, true, true}, &costs),
            (std::vector<std::string>{"hello", "", "last"}));
  EXPECT_EQ(costs.skipped, 1);
  EXPECT_EQ(costs.records, 3);
  // Without CRC checks the corrupt data is returned as it is.
  EXPECT_EQ(ReadAll(path_, {TfRecordCompression::kNone, false, false}).size(), 4u);
}

TEST_F(TfRecordFileTest, LengthCrcMismatch) {
  WriteRecords();
  std::string bytes = ReadBytes(path_);
  bytes[21] ^= 4;  // the second record's length
  WriteBytes(path_, bytes);
  EXPECT_THAT(ErrorOf([&] { ReadAll(path_); }), HasSubstr(path_ + ": record 1 at byte offset 21: length CRC mismatch"));
  TfRecordReadCosts costs;
  EXPECT_EQ(ReadAll(path_, {TfRecordCompression::kNone, true, true}, &costs).size(), 1u);
  EXPECT_EQ(costs.skipped, 1);
}

TEST_F(TfRecordFileTest, Truncated) {
  WriteRecords();
  const std::string bytes = ReadBytes(path_);
  WriteBytes(path_, bytes.substr(0, bytes.size() - 2));
  EXPECT_THAT(ErrorOf([&] { ReadAll(path_); }),
              HasSubstr(path_ + ": record 3 at byte offset " + std::to_string(37 + 16 + (3 << 20)) +
                        ": truncated: the record holds 4 data bytes"));
  WriteBytes(path_, bytes.substr(0, 5));
  EXPECT_THAT(ErrorOf([&] { ReadAll(path_); }),
              HasSubstr("record 0 at byte offset 0: truncated: the 12-byte record header has only 5 bytes"));
}

TEST_F(TfRecordFileTest, NotTfRecordAndCompressionMismatch) {
  WriteBytes(path_, "this is a text file, not records\n");
  EXPECT_THAT(ErrorOf([&] { ReadAll(path_); }), HasSubstr(path_ + ": record 0 at byte offset 0: not a TFRecord file"));
  WriteRecords(TfRecordCompression::kGzip);
  EXPECT_THAT(ErrorOf([&] { ReadAll(path_); }), HasSubstr("starts like gzip (input.tfrecord.compression: gzip)"));
  WriteRecords(TfRecordCompression::kNone);
  EXPECT_THAT(ErrorOf([&] {
                ReadAll(path_, {TfRecordCompression::kGzip, true, false});
              }),
              HasSubstr("not a gzip stream"));
}

// A stream cut short ends early; cut before a record's data, the record is longer
// than the rest of the file can inflate to.
TEST_F(TfRecordFileTest, CutCompressedStream) {
  WriteRecords(TfRecordCompression::kZlib);
  const std::string bytes = ReadBytes(path_);
  WriteBytes(path_, bytes.substr(0, bytes.size() - 8));
  EXPECT_THAT(ErrorOf([&] {
                ReadAll(path_, {TfRecordCompression::kZlib, true, false});
              }),
              HasSubstr(path_ + ": the zlib stream ends early"));
  WriteBytes(path_, bytes.substr(0, bytes.size() / 2));
  EXPECT_THAT(ErrorOf([&] {
                ReadAll(path_, {TfRecordCompression::kZlib, true, false});
              }),
              HasSubstr(path_ + ": record 2 at byte offset 37 of the inflated stream: declares 3145728 data bytes, "
                                "more than the file can hold"));
}

// Bytes deflate cannot shrink.
std::string Incompressible(size_t n, uint32_t seed) {
  std::mt19937 rng(seed);
  std::string out(n, '\0');
  for (char& c : out) c = static_cast<char>(rng());
  return out;
}

// A record header declaring `length` data bytes, with its valid length CRC.
std::string HeaderDeclaring(uint64_t length) {
  std::string header(8, '\0');
  for (int i = 0; i < 8; ++i) header[static_cast<size_t>(i)] = static_cast<char>((length >> (8 * i)) & 0xff);
  const uint32_t crc = MaskCrc32c(Crc32c(header));
  for (int i = 0; i < 4; ++i) header += static_cast<char>((crc >> (8 * i)) & 0xff);
  return header;
}

// A compressed record whose (CRC-valid) length is more than the rest of the file
// can inflate to is refused before its data is inflated: the reader has read
// little of the file when it stops, and with skip_corrupt the rest of the file is
// one skipped record.
TEST_F(TfRecordFileTest, CompressedLengthBeyondTheFileIsRefusedBeforeInflating) {
  const std::string first = Incompressible(1 << 20, 1);
  const std::string framed = FrameTfRecord(first) + HeaderDeclaring(uint64_t{1} << 40) + Incompressible(2 << 20, 2);
  for (TfRecordCompression c : {TfRecordCompression::kZlib, TfRecordCompression::kGzip}) {
    const std::string stored = CompressTfRecords(framed, c);
    WriteBytes(path_, stored);
    TfRecordReader reader(path_, {c, true, false});
    std::string data;
    ASSERT_TRUE(reader.Next(data));
    const std::string message = ErrorOf([&] { reader.Next(data); });
    EXPECT_THAT(message, HasSubstr(path_ + ": record 1 at byte offset " + std::to_string(16 + (1 << 20)) +
                                   " of the inflated stream: declares 1099511627776 data bytes, more than the "
                                   "file can hold ("));
    EXPECT_THAT(message, HasSubstr("); refused before inflating (input.tfrecord.skip_corrupt skips"));
    EXPECT_LT(reader.costs().file_bytes, static_cast<int64_t>(stored.size()) / 2) << CompressionName(c);
    TfRecordReadCosts costs;
    EXPECT_EQ(ReadAll(path_, {c, true, true}, &costs), std::vector<std::string>{first});
    EXPECT_EQ(costs.skipped, 1);
  }
}

// Deflate's best ratio (zeros: about 1030 to 1) stays within the bound: a record
// of 16 MiB of zeros in a 16 KiB file reads back.
TEST_F(TfRecordFileTest, HighlyCompressedRecordsStillRead) {
  records_ = {std::string(16 << 20, '\0'), "after"};
  WriteRecords(TfRecordCompression::kGzip);
  EXPECT_LT(ReadBytes(path_).size(), 20000u);
  EXPECT_EQ(ReadAll(path_, {TfRecordCompression::kGzip, true, false}), records_);
}

TEST_F(TfRecordFileTest, RefusesFifoAndMissing) {
  const std::string fifo = scratch_.Path("fifo");
  ASSERT_EQ(mkfifo(fifo.c_str(), 0600), 0);
  EXPECT_THAT(ErrorOf([&] { TfRecordReader(fifo, {}); }), HasSubstr("is a FIFO"));
  EXPECT_THAT(ErrorOf([&] { TfRecordReader(scratch_.Path("none"), {}); }), HasSubstr("does not exist"));
}

// The writer streams: its compressed file is the one deflate stream of all the
// framed records (the bytes CompressTfRecords makes of them at once).
TEST_F(TfRecordFileTest, StreamedCompressionIsOneStreamOfTheFramedRecords) {
  for (TfRecordCompression c : {TfRecordCompression::kZlib, TfRecordCompression::kGzip}) {
    WriteRecords(c);
    std::string framed;
    for (const std::string& r : records_) framed += FrameTfRecord(r);
    EXPECT_EQ(ReadBytes(path_), CompressTfRecords(framed, c)) << CompressionName(c);
  }
}

TEST_F(TfRecordFileTest, AWriterNotClosedLeavesNoFile) {
  {
    TfRecordWriter writer(path_, TfRecordCompression::kGzip);
    writer.Write("hello");
  }
  EXPECT_TRUE(std::filesystem::is_empty(scratch_.dir()));
}

TEST_F(TfRecordFileTest, AFullDiskIsNamed) {
  TfRecordWriter writer("/dev/full", TfRecordCompression::kNone, "shard 0");
  EXPECT_THAT(ErrorOf([&] { writer.Write("hello"); }),
              HasSubstr("shard 0: write failed: No space left on device (ENOSPC"));
}

}  // namespace
}  // namespace tpusim::infeed
