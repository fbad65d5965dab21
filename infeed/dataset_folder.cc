#include "infeed/dataset_folder.h"

#include <unistd.h>

#include <filesystem>

#include "base/error.h"
#include "base/regular_file.h"
#include "infeed/file_source.h"

namespace tpusim::infeed {
namespace fs = std::filesystem;
namespace {

// Swaps the finished dataset in: the old one (if any) moves aside, the new one takes
// its name, then the old one is removed.
void SwapFolderIn(const std::string& built, const std::string& dir) {
  std::error_code ec;
  const std::string old = dir + ".old." + std::to_string(getpid());
  const bool had_old = fs::exists(dir, ec);
  if (had_old) fs::rename(dir, old, ec);
  if (!ec) fs::rename(built, dir, ec);
  if (ec) {
    fs::remove_all(built, ec);
    Fail("gen-data --out {}: cannot move the new dataset in place: {}", dir, ec.message());
  }
  if (had_old) fs::remove_all(old, ec);
}

}  // namespace

void CheckDatasetFolderReplaceable(const std::string& dir) {
  const std::string label = "gen-data --out " + dir;
  if (dir.empty()) Fail("gen-data --out: the path is empty");
  RefuseNonDirectory(dir, label);
  std::error_code ec;
  if (!fs::exists(dir, ec)) return;
  if (fs::is_empty(dir, ec) || fs::exists(fs::path(dir) / kDatasetManifest, ec) ||
      fs::exists(fs::path(dir) / kTfRecordDatasetMarker, ec)) {
    return;
  }
  Fail(
      "{}: the folder holds files but no {} or {} (not a dataset tpusim gen-data wrote); give a new or empty "
      "folder",
      label, kDatasetManifest, kTfRecordDatasetMarker);
}

void BuildDatasetFolder(const std::string& dir, const std::function<void(const std::string& built)>& write) {
  CheckDatasetFolderReplaceable(dir);
  const std::string built = dir + ".tmp." + std::to_string(getpid());
  std::error_code ec;
  fs::remove_all(built, ec);
  fs::create_directories(built, ec);
  if (ec) Fail("gen-data --out {}: cannot create {}: {}", dir, built, ec.message());
  try {
    write(built);
  } catch (...) {
    fs::remove_all(built, ec);
    throw;
  }
  SwapFolderIn(built, dir);
}

}  // namespace tpusim::infeed
