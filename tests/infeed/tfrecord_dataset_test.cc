// gen-data --format tfrecord's folder (infeed/tfrecord_dataset.h,
// infeed/dataset_folder.h): the name a plain stem, the folder replaced whole or
// refused as the .npy path does, the shards streamed.
#include "infeed/tfrecord_dataset.h"

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "infeed/dataset_folder.h"
#include "infeed/file_source.h"
#include "tests/common/error_of.h"
#include "tests/common/scratch_dir.h"

namespace tpusim::infeed {
namespace {

namespace fs = std::filesystem;
using ::testing::ElementsAre;
using ::testing::HasSubstr;
using tpusim::testing::ErrorOf;
using tpusim::testing::ScratchDir;

std::vector<std::string> Names(const std::string& dir) {
  std::vector<std::string> names;
  for (const auto& entry : fs::directory_iterator(dir)) names.push_back(entry.path().filename().string());
  std::sort(names.begin(), names.end());
  return names;
}

TfRecordDatasetOptions Tiny(int64_t shards) {
  TfRecordDatasetOptions options;
  options.name = "tiny";
  options.examples = 4;
  options.shards = shards;
  options.width = 8;
  options.height = 8;
  return options;
}

class TfRecordDatasetTest : public ::testing::Test {
 protected:
  ScratchDir scratch_{"tpusim-tfrecord-dataset-test-"};
  std::string dir_ = scratch_.Path("ds");
};

TEST_F(TfRecordDatasetTest, AnEarlierDatasetIsReplacedWhole) {
  WriteTfRecordDataset(dir_, Tiny(4));
  const std::vector<std::string> paths = WriteTfRecordDataset(dir_, Tiny(2));
  EXPECT_THAT(Names(dir_), ElementsAre(kTfRecordDatasetMarker, "tiny-train.tfrecord-00000-of-00002",
                                       "tiny-train.tfrecord-00001-of-00002"));
  EXPECT_THAT(paths,
              ElementsAre(dir_ + "/tiny-train.tfrecord-00000-of-00002", dir_ + "/tiny-train.tfrecord-00001-of-00002"));
  EXPECT_THAT(Names(scratch_.dir().string()), ElementsAre("ds"));  // nothing built beside it is left
}

TEST_F(TfRecordDatasetTest, AFolderOfOtherFilesIsRefusedAndKept) {
  fs::create_directories(dir_);
  std::ofstream(dir_ + "/photo.jpg") << "mine";
  EXPECT_THAT(ErrorOf([&] { WriteTfRecordDataset(dir_, Tiny(1)); }),
              HasSubstr("gen-data --out " + dir_ + ": the folder holds files but no dataset.yaml or .tpusim-dataset"));
  EXPECT_THAT(Names(dir_), ElementsAre("photo.jpg"));
  EXPECT_THAT(Names(scratch_.dir().string()), ElementsAre("ds"));
}

TEST_F(TfRecordDatasetTest, TheNameIsAPlainStem) {
  for (const std::string& name : std::vector<std::string>{"../../escape", "a/b", "", ".", "..", ".hidden", "a\nb"}) {
    TfRecordDatasetOptions options = Tiny(1);
    options.name = name;
    EXPECT_THAT(ErrorOf([&] { WriteTfRecordDataset(dir_, options); }), HasSubstr("': must be a plain file-name stem"))
        << name;
  }
  EXPECT_FALSE(fs::exists(dir_));
  EXPECT_TRUE(fs::is_empty(scratch_.dir()));
}

TEST_F(TfRecordDatasetTest, ExampleBytesEstimateIsTheLargestRecord) {
  TfRecordDatasetOptions options = Tiny(1);
  const double estimate = TfRecordBytesPerExample(options);
  WriteTfRecordDataset(dir_, options);
  const double written = static_cast<double>(fs::file_size(dir_ + "/tiny-train.tfrecord-00000-of-00001"));
  EXPECT_GE(estimate * 4, written);
  EXPECT_LE(estimate * 4, written * 1.5);
}

}  // namespace
}  // namespace tpusim::infeed
