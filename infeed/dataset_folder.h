// The folder `tpusim gen-data` writes, whatever the format (.npy shards,
// infeed/file_source.h; TFRecord files, infeed/tfrecord_dataset.h): built beside
// DIR as DIR.tmp.<pid> and swapped in whole, so no file of an earlier dataset
// survives and a failed write (a full disk, a bad option found late) leaves DIR as
// it was and nothing beside it. DIR must be absent, an empty folder, or a dataset
// gen-data wrote: one holding dataset.yaml (the .npy manifest) or
// .tpusim-dataset (the TFRecord marker, hidden so that DIR/* globs only shards);
// anything else is refused, never mixed into or overwritten.
#pragma once

#include <functional>
#include <string>

namespace tpusim::infeed {

// The TFRecord dataset's marker file: hidden from DIR/* and glob(3).
inline constexpr const char* kTfRecordDatasetMarker = ".tpusim-dataset";

// Throws Error "gen-data --out DIR: ..." unless DIR may be replaced (above): "exists
// and is not a folder", "cannot reach it: <errno text>" or "the folder holds files
// but is not a dataset tpusim gen-data wrote ...".
void CheckDatasetFolderReplaceable(const std::string& dir);

// Checks DIR (CheckDatasetFolderReplaceable), calls `write` with a new empty
// folder beside it to fill, then replaces DIR with it whole. When `write` throws,
// the new folder is removed, DIR is untouched and the error goes on.
void BuildDatasetFolder(const std::string& dir, const std::function<void(const std::string& built)>& write);

}  // namespace tpusim::infeed
