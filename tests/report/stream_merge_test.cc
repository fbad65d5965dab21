// The steps CSV's merge (report/stream_merge.h): each core row followed by the
// host columns of the step on the host that built its shard, or as many empty
// cells when no host did, so every row has the header's columns.
#include "report/stream_merge.h"

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include <gtest/gtest.h>
#include <unistd.h>

#include "sim/metrics.h"
#include "sim/rank_stream.h"

namespace tpusim::sim {
namespace {

std::vector<std::string> Lines(const std::string& path) {
  std::vector<std::string> lines;
  std::ifstream in(path);
  for (std::string line; std::getline(in, line);) lines.push_back(line);
  return lines;
}

size_t Cells(const std::string& line) { return 1 + std::count(line.begin(), line.end(), ','); }

TEST(StepsCsvMergeTest, EveryRowHasTheHeadersColumnsWithOrWithoutItsHost) {
  const std::string path =
      (std::filesystem::temp_directory_path() / ("steps_merge_" + std::to_string(getpid()) + ".csv")).string();
  const size_t core_cells = Cells(kStepsCsvHeader) - sim::kHostStepsCsvColumns.size();
  // A core row: step, src_host, then zeros for the rest of a core's columns, and
  // its two checkpoint columns (kCoreTailCsvColumns), which the merge moves last.
  auto core_head = [core_cells](int src_host) {
    std::string row = "0," + std::to_string(src_host);
    for (size_t i = 2; i + sim::kCoreTailCsvColumns.size() < core_cells; ++i) row += ",0";
    return row;
  };
  auto core_row = [&core_head](int src_host) { return core_head(src_host) + ",7,8"; };
  std::string zeros;  // the tfrecord stage columns (0 with other sources)
  for (size_t i = 5; i < sim::kHostStepsCsvColumns.size(); ++i) zeros += ",0";
  {
    sim::RankStream host(path, 0), fed(path, 1), unfed(path, 2);
    host.WriteLine("0,0.5,0.25,1.5,0.125,0.0625" + zeros);
    fed.WriteLine(core_row(0));
    unfed.WriteLine(core_row(-1));
  }
  report::MergeStepsCsv(path, kStepsCsvHeader, {1, 2}, {0});
  const std::vector<std::string> lines = Lines(path);
  ASSERT_EQ(lines.size(), 3u);
  EXPECT_EQ(lines[0], kStepsCsvHeader);
  EXPECT_EQ(lines[1], core_head(0) + ",0.5,0.25,1.5,0.125,0.0625" + zeros + ",7,8");
  EXPECT_EQ(lines[2], core_head(-1) + std::string(sim::kHostStepsCsvColumns.size(), ',') + ",7,8");  // empty host cells
  for (const std::string& line : lines) EXPECT_EQ(Cells(line), Cells(kStepsCsvHeader)) << line;
  std::filesystem::remove(path);
}

}  // namespace
}  // namespace tpusim::sim
