// `tpusim gen-data --format tfrecord`: an ImageNet-like dataset of TFRecord files
// of tf.train.Example, as the Cloud TPU ImageNet pipeline reads them: per example
//   image/encoded (bytes, a JPEG), image/format (bytes, "jpeg"),
//   image/height, image/width (int64), image/class/label (int64 in [0, classes))
// in shards named as TFDS names them, NAME-train.tfrecord-00000-of-00008. Images
// are structured (a two-colour gradient, a few filled shapes whose colour follows
// the label, and pixel noise) so they compress like photos rather than like flat
// colour or white noise. Everything is a pure function of (seed, example id):
// example e is record e - first(j) of the shard j that holds it, shards holding
// contiguous blocks as the .npy writer's do.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "infeed/jpeg_codec.h"
#include "infeed/tfrecord.h"

namespace tpusim::infeed {

struct TfRecordDatasetOptions {
  std::string name = "synthetic_imagenet";
  int64_t examples = 0;
  int64_t shards = 1;
  int width = 500;  // ImageNet's most common size is 500 x 375
  int height = 375;
  int jpeg_quality = 90;
  int64_t classes = 1000;
  uint64_t seed = 1;
  TfRecordCompression compression = TfRecordCompression::kNone;
};

// "NAME-train.tfrecord-00003-of-00008".
std::string TfdsShardName(const std::string& name, int64_t shard, int64_t shards);

// The label of example `id`.
int64_t SyntheticImageLabel(uint64_t seed, int64_t id, int64_t classes);
// The image of example `id` with `label`.
RgbImage SyntheticImage(uint64_t seed, int64_t id, int64_t label, int width, int height);

// The serialized Example of `id` (its JPEG encoded at options.jpeg_quality).
std::string SyntheticImageExample(const TfRecordDatasetOptions& options, int64_t id);

// Throws Error "gen-data --name ...", "--image-size ...", "--jpeg-quality ...",
// "--shards ..." or "--examples ..." for options no dataset can be written with.
// `name` must be a plain file-name stem: 1 to 200 bytes, no '/', no control
// character, not starting with '.' (so not . or ..).
void CheckTfRecordDatasetOptions(const TfRecordDatasetOptions& options);

// About how many bytes one example takes in a shard (uncompressed): the largest
// of a few examples' framed records, encoded here. Call after the check above.
double TfRecordBytesPerExample(const TfRecordDatasetOptions& options);

// The memory writing takes, whatever the shard's size: one image, its JPEG and
// the record (records are streamed to the file, TfRecordWriter).
double TfRecordWriteMemoryBytes(const TfRecordDatasetOptions& options);

// Writes the dataset as `dir` (infeed/dataset_folder.h: built beside it and
// swapped in whole, `dir` absent, empty or a dataset gen-data wrote; on failure
// `dir` is as it was and nothing is left beside it), with the hidden marker
// kTfRecordDatasetMarker. Returns the shard paths. Throws Error naming the path
// or the option and the cause (e.g. "No space left on device (ENOSPC").
std::vector<std::string> WriteTfRecordDataset(const std::string& dir, const TfRecordDatasetOptions& options);

}  // namespace tpusim::infeed
