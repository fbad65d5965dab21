#include "infeed/tfrecord_source.h"
#include "infeed/tfrecord_verifier.h"

#include <cstdlib>
#include <cstring>
#include <fstream>
#include <map>

#include <fmt/format.h>
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "infeed/tfrecord_dataset.h"
#include "source_dir.h"
#include "tests/common/byte_files.h"
#include "tests/common/error_of.h"
#include "tests/common/scratch_dir.h"

namespace tpusim::infeed {
namespace {

using tpusim::testing::ReadBytes;

using ::testing::HasSubstr;
using tpusim::testing::ErrorOf;
using tpusim::testing::ScratchDir;

ExampleFeatureSpec Image(int height, int width, CropMode crop = CropMode::kNone) {
  return {{"image", DType::kUInt8, {height, width, 3}}, "image/encoded", FeatureKind::kBytes, true, crop, false};
}
ExampleFeatureSpec Label() { return {{"label", DType::kInt64, {}}, "image/class/label", FeatureKind::kInt64}; }

// A dataset written by tests/scripts/write_tfrecord_dataset.py: 2 files of 6
// records, label 100 * file + record, and PIL's decode of every JPEG.
class TfRecordSourceTest : public ::testing::Test {
 protected:
  void SetUp() override {
    const std::string command = std::string("/usr/bin/python3 ") + TPUSIM_SOURCE_DIR +
                                "/tests/scripts/write_tfrecord_dataset.py " + scratch_.Path("data") + " 2 6 64x48";
    ASSERT_EQ(std::system(command.c_str()), 0) << command;
    files_ = ExpandFilePatterns({scratch_.Path("data") + "/part-*.tfrecord"});
    ASSERT_EQ(files_.size(), 2u);
  }

  ScratchDir scratch_{"tpusim-tfrecord-source-test-"};
  std::vector<std::string> files_;
};

// Labels as written, pixels equal to PIL's (libjpeg's) decode of the same bytes,
// ids naming (file, record), files interleaved by two readers.
TEST_F(TfRecordSourceTest, LabelsAndPixelsMatchTheIndependentWriter) {
  TfRecordSource source(files_, {Image(48, 64), Label()}, 0, 1, {}, 2, 0, 1);
  Batch batch = MakeBatch({Image(48, 64).output, Label().output}, 12);
  std::vector<int64_t> ids(12);
  TfRecordStageCosts costs;
  source.Decode(source.NextRecords(12), batch, ids, costs);
  EXPECT_EQ(costs.examples, 12);
  const size_t image_bytes = 48 * 64 * 3;
  for (size_t row = 0; row < 12; ++row) {
    const int64_t file = ids[row] / kTfRecordIdStride, record = ids[row] % kTfRecordIdStride;
    EXPECT_EQ(file, static_cast<int64_t>(row % 2)) << row;  // interleaved
    EXPECT_EQ(record, static_cast<int64_t>(row / 2));
    int64_t label = 0;
    std::memcpy(&label, batch.at("label").bytes().data() + 8 * row, 8);
    EXPECT_EQ(label, 100 * file + record);
    const std::string expected =
        ReadBytes(scratch_.Path("data") + "/expected/" + std::to_string(file) + "-" + std::to_string(record) + ".rgb");
    ASSERT_EQ(expected.size(), image_bytes);
    EXPECT_EQ(std::memcmp(batch.at("image").bytes().data() + row * image_bytes, expected.data(), image_bytes), 0)
        << "pixels of file " << file << " record " << record;
  }
  EXPECT_EQ(source.stream_costs().records_read, 12);
}

// infeed.verify's core-side decode: a shard built by host 1's source (random crops
// and flips, shuffled) equals the verifier's own decode of the records its ids
// name; one flipped pixel byte, or the crops of another host's seed, do not.
TEST_F(TfRecordSourceTest, VerifierRedecodesTheRecordsAShardNames) {
  ExampleFeatureSpec image = Image(24, 24, CropMode::kRandom);
  image.random_flip = true;
  const std::vector<ExampleFeatureSpec> specs = {image, Label()};
  TfRecordSource source(files_, specs, 1, 2, {}, 1, 4, TfRecordHostSeed(7, 1));
  Batch batch = MakeBatch({specs[0].output, specs[1].output}, 6);
  std::vector<int64_t> ids(6);
  TfRecordStageCosts costs;
  source.Decode(source.NextRecords(6), batch, ids, costs);
  ShardCodec::View shard;
  shard.header.src_host = 1;
  shard.example_ids = ids;
  for (const char* name : {"image", "label"}) {
    const Shape& shape = batch.at(name).shape();
    Shape begin(shape.size(), 0);
    shard.slices.push_back({begin, shape});
    shard.tensor_bytes.push_back(batch.at(name).bytes());
  }
  const std::vector<FeatureSpec> features = {specs[0].output, specs[1].output};
  TfRecordVerifier verifier(files_, specs, {}, 7);
  EXPECT_EQ(verifier.Check(features, shard), "");
  shard.header.src_host = 0;
  EXPECT_THAT(verifier.Check(features, shard), HasSubstr("feature 'image' row 0"));
  shard.header.src_host = 1;
  batch.at("image").bytes()[3 * 24 * 24 * 3 + 5] ^= std::byte{1};
  const std::string row3 =
      fmt::format("feature 'image' row 3 (record [1, {}] of {}): byte 5 is", ids[3] % kTfRecordIdStride, files_[1]);
  EXPECT_THAT(verifier.Check(features, shard), HasSubstr(row3));
}

// A random crop is a pure function of (seed, file, record): two sources agree.
TEST_F(TfRecordSourceTest, RandomCropsAreReproducible) {
  std::vector<std::byte> first;
  for (int pass = 0; pass < 2; ++pass) {
    TfRecordSource source(files_, {Image(24, 24, CropMode::kRandom)}, 0, 1, {}, 1, 4, 7);
    Batch batch = MakeBatch({Image(24, 24).output}, 6);
    std::vector<int64_t> ids(6);
    TfRecordStageCosts costs;
    source.Decode(source.NextRecords(6), batch, ids, costs);
    std::vector<std::byte> bytes(batch.at("image").bytes().begin(), batch.at("image").bytes().end());
    if (pass == 0) {
      first = bytes;
    } else {
      EXPECT_EQ(bytes, first);
    }
  }
}

TEST_F(TfRecordSourceTest, MissingKeyAndWrongKindNameRecordAndKey) {
  Batch batch = MakeBatch({Label().output}, 1);
  std::vector<int64_t> ids(1);
  TfRecordStageCosts costs;
  ExampleFeatureSpec missing = Label();
  missing.key = "image/label";
  TfRecordSource a(files_, {missing}, 0, 1, {}, 1, 0, 1);
  EXPECT_THAT(ErrorOf([&] { a.Decode(a.NextRecords(1), batch, ids, costs); }),
              HasSubstr(files_[0] + ": record 0: feature key 'image/label' (input.features.label.key) is missing; "
                                    "the record has: 'image/class/label', 'image/encoded', 'image/format'"));
  ExampleFeatureSpec wrong = Label();
  wrong.kind = FeatureKind::kFloat;
  wrong.output.dtype = DType::kFloat32;
  Batch floats = MakeBatch({wrong.output}, 1);
  TfRecordSource b(files_, {wrong}, 0, 1, {}, 1, 0, 1);
  EXPECT_THAT(ErrorOf([&] { b.Decode(b.NextRecords(1), floats, ids, costs); }),
              HasSubstr(files_[0] + ": record 0: feature key 'image/class/label' holds a int64 list, "
                                    "input.features.label.kind is float"));
}

TEST(TfRecordSourcePlainTest, BadJpegNamesRecordAndKey) {
  ScratchDir scratch("tpusim-tfrecord-badjpeg-");
  const std::string path = scratch.Path("bad.tfrecord");
  TfRecordWriter writer(path, TfRecordCompression::kNone);
  writer.Write(EncodeExample({{"image/encoded", FeatureKind::kBytes, {"not a jpeg at all"}, {}, {}}}));
  writer.Close();
  TfRecordSource source({path}, {Image(8, 8)}, 0, 1, {}, 1, 0, 1);
  Batch batch = MakeBatch({Image(8, 8).output}, 1);
  std::vector<int64_t> ids(1);
  TfRecordStageCosts costs;
  EXPECT_THAT(ErrorOf([&] { source.Decode(source.NextRecords(1), batch, ids, costs); }),
              HasSubstr(path + ": record 0, key 'image/encoded': not a decodable JPEG (17 bytes)"));
}

// An Example of one JPEG and its label.
std::string ImageExample(const std::string& jpeg, int64_t label) {
  return EncodeExample({{"image/encoded", FeatureKind::kBytes, {jpeg}, {}, {}},
                        {"image/class/label", FeatureKind::kInt64, {}, {}, {label}}});
}

// A file of `records`.
std::string WriteRecords(ScratchDir& scratch, const std::vector<std::string>& records) {
  const std::string path = scratch.Path("images.tfrecord");
  TfRecordWriter writer(path, TfRecordCompression::kNone);
  for (const std::string& record : records) writer.Write(record);
  writer.Close();
  return path;
}

TfRecordOptions SkipCorrupt() {
  TfRecordOptions options;
  options.skip_corrupt = true;
  return options;
}

// Records 1 (a JPEG cut short) and 4 (not an Example) are corrupt. Without
// skip_corrupt the first is one line naming it; with it, a row whose record is
// corrupt is refilled by the stream's next record and the corrupt ones counted.
TEST(TfRecordSourcePlainTest, SkipCorruptRefillsRowsOfCorruptRecords) {
  ScratchDir scratch("tpusim-tfrecord-corrupt-");
  const std::string good = EncodeJpeg(SyntheticImage(1, 2, 3, 16, 12), 90);
  const std::string cut = good.substr(0, (good.find("\xff\xda") + good.size()) / 2);  // within its scan data
  std::vector<std::string> records;
  for (int64_t r = 0; r < 6; ++r) records.push_back(ImageExample(r == 1 ? cut : good, r));
  records[4] = "\xff\xff\xff";  // no Example, though its CRCs match
  const std::string path = WriteRecords(scratch, records);
  Batch batch = MakeBatch({Image(8, 8).output, Label().output}, 4);
  std::vector<int64_t> ids(4);
  TfRecordStageCosts costs;
  TfRecordSource strict({path}, {Image(8, 8), Label()}, 0, 1, {}, 1, 0, 1);
  EXPECT_EQ(ErrorOf([&] { strict.Decode(strict.NextRecords(4), batch, ids, costs); }),
            path + ": record 1, key 'image/encoded': truncated JPEG: its data ends before its 16x12 frame is filled (" +
                std::to_string(cut.size()) +
                " bytes; libjpeg: Premature end of JPEG file) (input.tfrecord.skip_corrupt skips such records)");
  TfRecordSource source({path}, {Image(8, 8), Label()}, 0, 1, SkipCorrupt(), 1, 0, 1);
  costs = {};
  source.Decode(source.NextRecords(4), batch, ids, costs, [&](int64_t n) { return source.NextRecords(n); });
  EXPECT_EQ(ids, (std::vector<int64_t>{0, 5, 2, 3}));
  const auto* labels = reinterpret_cast<const int64_t*>(batch.at("label").bytes().data());
  EXPECT_EQ(std::vector<int64_t>(labels, labels + 4), (std::vector<int64_t>{0, 5, 2, 3}));
  EXPECT_EQ(costs.skipped_records, 2);
  EXPECT_EQ(costs.examples, 4);
  // Without a way to more records, skip_corrupt cannot skip.
  EXPECT_THAT(ErrorOf([&] { source.Decode(source.NextRecords(4), batch, ids, costs); }),
              HasSubstr(": record 1, key 'image/encoded': truncated JPEG"));
}

// Files whose records are all corrupt are not read round forever.
TEST(TfRecordSourcePlainTest, SkipCorruptGivesUpOnFilesOfCorruptRecords) {
  ScratchDir scratch("tpusim-tfrecord-all-corrupt-");
  const std::string good = EncodeJpeg(SyntheticImage(1, 2, 3, 16, 12), 90);
  const std::string path = WriteRecords(scratch, {ImageExample(good, 0), ImageExample(good, 1)});
  ExampleFeatureSpec image = Image(8, 8);
  image.max_pixels = 100;  // every image is over the limit
  TfRecordSource source({path}, {image}, 0, 1, SkipCorrupt(), 1, 0, 1);
  Batch batch = MakeBatch({image.output}, 1);
  std::vector<int64_t> ids(1);
  TfRecordStageCosts costs;
  EXPECT_EQ(ErrorOf([&] {
              source.Decode(source.NextRecords(1), batch, ids, costs, [&](int64_t n) { return source.NextRecords(n); });
            }),
            "input.tfrecord.skip_corrupt: 111 corrupt records skipped while filling 1 rows, more than 110: the files "
            "hold too few decodable records (the last: " +
                path +
                ": record 0, key 'image/encoded': the JPEG declares 16x12 = 192 pixels, over input.max_image_pixels "
                "(100); refused before decoding)");
  EXPECT_EQ(costs.skipped_records, 111);
}

TEST(TfRecordSourcePlainTest, FileSharding) {
  EXPECT_EQ(CheckFileSharding(8, 4), "");
  EXPECT_EQ(CheckFileSharding(10, 4),
            "10 files do not divide over 4 hosts: hosts 0-1 read 3 files, the others 2 (MaxText requires files % "
            "hosts == 0)");
  EXPECT_THAT(ErrorOf([] { CheckFileSharding(3, 4); }), HasSubstr("3 files cannot feed 4 hosts"));
  EXPECT_THAT(ErrorOf([] { ExpandFilePatterns({"/nonexistent/*.tfrecord"}); }), HasSubstr("matches no file"));
}

TEST(TfRecordSourcePlainTest, EmptyFilesAreAnError) {
  ScratchDir scratch("tpusim-tfrecord-empty-");
  std::ofstream(scratch.Path("a.tfrecord")).close();
  TfRecordSource source({scratch.Path("a.tfrecord")}, {Label()}, 0, 1, {}, 1, 0, 1);
  EXPECT_THAT(ErrorOf([&] { source.NextRecords(1); }), HasSubstr("this host's files hold no records"));
}

}  // namespace
}  // namespace tpusim::infeed
