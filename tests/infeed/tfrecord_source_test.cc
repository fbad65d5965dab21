#include "infeed/tfrecord_source.h"
#include "infeed/tfrecord_verifier.h"

#include <cstdlib>
#include <cstring>
#include <fstream>
#include <map>

#include <fmt/format.h>
#include <gmock/gmock.h>
#include <gtest/gtest.h>

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
                                    "the record has: image/class/label, image/encoded, image/format"));
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
