#include "infeed/tfrecord_source.h"

#include <glob.h>

#include <algorithm>
#include <cstring>
#include <set>

#include <fmt/ranges.h>

#include "base/error.h"
#include "base/printable.h"
#include "base/regular_file.h"
#include "infeed/cpu_timer.h"
#include "infeed/dtype.h"
#include "infeed/stage_times.h"

namespace tpusim::infeed {
namespace {

using Stage = TfRecordStageCosts::Stage;

// Adds one scope's wall time on `clock` and thread CPU to a stage.
class StageScope {
 public:
  StageScope(const Clock& clock, Stage& stage)
      : clock_(clock), stage_(stage), start_us_(clock.NowUs()), cpu_(&stage.cpu_s) {}
  ~StageScope() { stage_.wall_s += SecondsSinceUs(clock_, start_us_); }
  StageScope(const StageScope&) = delete;
  StageScope& operator=(const StageScope&) = delete;

 private:
  const Clock& clock_;
  Stage& stage_;
  int64_t start_us_;
  ScopedCpuTimer cpu_;
};

Stage& operator+=(Stage& a, const Stage& b) {
  a.wall_s += b.wall_s;
  a.cpu_s += b.cpu_s;
  return a;
}

template <typename T>
void StoreValues(std::span<std::byte> out, const std::vector<T>& values, DType dtype) {
  for (size_t i = 0; i < values.size(); ++i) {
    switch (dtype) {
      case DType::kInt64: {
        const auto v = static_cast<int64_t>(values[i]);
        std::memcpy(out.data() + 8 * i, &v, 8);
        break;
      }
      case DType::kInt32: {
        const auto v = static_cast<int32_t>(values[i]);
        std::memcpy(out.data() + 4 * i, &v, 4);
        break;
      }
      case DType::kFloat32: {
        const auto v = static_cast<float>(values[i]);
        std::memcpy(out.data() + 4 * i, &v, 4);
        break;
      }
      case DType::kBFloat16: {
        const uint16_t v = FloatToBFloat16(static_cast<float>(values[i]));
        std::memcpy(out.data() + 2 * i, &v, 2);
        break;
      }
      default:
        Fail("tfrecord source: dtype {} cannot hold a parsed feature", DTypeName(dtype));
    }
  }
}

// The record's keys for a message: the first few in order, each escaped and cut
// (base/printable.h), and how many there are, so a record of 20,000 keys or of
// one hostile key is still a short line.
std::string KeysOf(const ParsedExample& example) {
  constexpr size_t kKeysShown = 4;
  std::vector<std::string_view> keys;
  for (const auto& [key, feature] : example) keys.push_back(key);
  std::sort(keys.begin(), keys.end());
  std::vector<std::string> shown;
  for (size_t i = 0; i < std::min(keys.size(), kKeysShown); ++i) shown.push_back("'" + Printable(keys[i], 40) + "'");
  if (keys.size() > kKeysShown) shown.push_back(fmt::format("... ({} keys)", keys.size()));
  return keys.empty() ? "no keys" : fmt::format("{}", fmt::join(shown, ", "));
}

}  // namespace

TfRecordStageCosts& TfRecordStageCosts::operator+=(const TfRecordStageCosts& other) {
  read += other.read;
  crc += other.crc;
  parse += other.parse;
  decode += other.decode;
  resize += other.resize;
  batch += other.batch;
  examples += other.examples;
  records_read += other.records_read;
  skipped_records += other.skipped_records;
  file_bytes += other.file_bytes;
  return *this;
}

namespace {

// The folder a pattern's matches would be in: its path before the first component
// with a wildcard ("." for none).
std::string FixedFolderOf(const std::string& pattern) {
  const size_t wild = pattern.find_first_of("*?[");
  const size_t slash = pattern.rfind('/', wild == std::string::npos ? std::string::npos : wild);
  if (slash == std::string::npos) return ".";
  return slash == 0 ? "/" : pattern.substr(0, slash);
}

}  // namespace

std::vector<std::string> ExpandFilePatterns(const std::vector<std::string>& patterns) {
  std::set<std::string> files;
  for (const std::string& pattern : patterns) {
    glob_t matches{};
    const int rc = glob(pattern.c_str(), 0, nullptr, &matches);
    if (rc == 0) {
      for (size_t i = 0; i < matches.gl_pathc; ++i) files.insert(matches.gl_pathv[i]);
    }
    globfree(&matches);
    if (rc == GLOB_NOMATCH) {
      // A folder that cannot be reached (a symbolic-link loop, no permission) is
      // named as such, not as a pattern that matched nothing.
      const std::string folder = FixedFolderOf(pattern);
      RefuseNonDirectory(folder, fmt::format("input.files: '{}': folder {}", pattern, folder));
      Fail("input.files: '{}' matches no file", pattern);
    }
    if (rc != 0) Fail("input.files: '{}' cannot be expanded (glob error {})", pattern, rc);
  }
  for (const std::string& file : files) RefuseNonRegularFile(file);
  return {files.begin(), files.end()};
}

std::string CheckFileSharding(size_t files, int64_t hosts) {
  const auto n = static_cast<int64_t>(files);
  if (n < hosts) {
    Fail(
        "input.files: {} files cannot feed {} hosts (file i goes to host i mod {}, as tf.data's file-level "
        "sharding; each host needs at least one)",
        n, hosts, hosts);
  }
  if (n % hosts == 0) return "";
  return fmt::format(
      "{} files do not divide over {} hosts: hosts 0-{} read {} files, the others {} (MaxText "
      "requires files % hosts == 0)",
      n, hosts, n % hosts - 1, n / hosts + 1, n / hosts);
}

struct TfRecordSource::Slot {
  std::unique_ptr<TfRecordReader> reader;
  int64_t file_index = 0;
  TfRecordReadCosts taken;  // of reader's costs, already added to the stream's
};

TfRecordSource::TfRecordSource(std::vector<std::string> files, std::vector<ExampleFeatureSpec> specs, int64_t host,
                               int64_t num_hosts, const TfRecordOptions& options, int readers, int64_t shuffle_buffer,
                               uint64_t seed, Clock* clock)
    : files_(std::move(files)),
      specs_(std::move(specs)),
      options_(options),
      shuffle_capacity_(shuffle_buffer),
      seed_(seed),
      clock_(clock ? *clock : steady_clock_) {
  if (num_hosts <= 0 || host < 0 || host >= num_hosts)
    Fail("tfrecord source: host {} is not one of {}", host, num_hosts);
  sharding_note_ = CheckFileSharding(files_.size(), num_hosts);
  for (int64_t i = host; i < static_cast<int64_t>(files_.size()); i += num_hosts) local_files_.push_back(i);
  const size_t slots = std::min<size_t>(static_cast<size_t>(std::max(readers, 1)), local_files_.size());
  for (size_t s = 0; s < slots; ++s) slots_.push_back(std::make_unique<Slot>());
}

TfRecordSource::~TfRecordSource() = default;

void TfRecordSource::OpenNext(Slot& slot) {
  if (opened_in_pass_ > static_cast<int64_t>(local_files_.size() + slots_.size())) {
    std::vector<std::string> names;
    for (int64_t i : local_files_) names.push_back(files_[static_cast<size_t>(i)]);
    Fail("input.files: this host's files hold no records: {}", fmt::join(names, ", "));
  }
  slot.file_index = local_files_[next_file_ % local_files_.size()];
  ++next_file_;
  ++opened_in_pass_;
  slot.reader = std::make_unique<TfRecordReader>(files_[static_cast<size_t>(slot.file_index)], options_, &clock_);
  slot.taken = {};
}

RawRecord TfRecordSource::ReadOne() {
  for (;;) {
    Slot& slot = *slots_[next_slot_];
    if (!slot.reader) OpenNext(slot);
    RawRecord record;
    const bool got = slot.reader->Next(record.data);
    const TfRecordReadCosts& now = slot.reader->costs();
    stream_costs_.read.wall_s += now.read_s - slot.taken.read_s;
    stream_costs_.read.cpu_s += now.read_cpu_s - slot.taken.read_cpu_s;
    stream_costs_.crc.wall_s += now.crc_s - slot.taken.crc_s;
    stream_costs_.crc.cpu_s += now.crc_cpu_s - slot.taken.crc_cpu_s;
    stream_costs_.file_bytes += now.file_bytes - slot.taken.file_bytes;
    stream_costs_.skipped_records += now.skipped - slot.taken.skipped;
    slot.taken = now;
    if (!got) {
      slot.reader.reset();  // the file is done: the slot opens the next one
      continue;
    }
    next_slot_ = (next_slot_ + 1) % slots_.size();
    opened_in_pass_ = 0;
    ++stream_costs_.records_read;
    record.file_index = slot.file_index;
    record.record_index = slot.reader->record_index();
    return record;
  }
}

std::vector<RawRecord> TfRecordSource::NextRecords(int64_t rows) {
  if (local_files_.empty()) Fail("tfrecord source: this host has no files");
  if (shuffle_capacity_ > 0 && shuffle_.empty()) {
    for (int64_t i = 0; i < shuffle_capacity_; ++i) shuffle_.push_back(ReadOne());
  }
  std::vector<RawRecord> out;
  out.reserve(static_cast<size_t>(rows));
  for (int64_t i = 0; i < rows; ++i) {
    RawRecord record = ReadOne();
    if (!shuffle_.empty()) {
      const uint64_t slot = ExampleSeed(seed_, 0x5aff1e, draws_++) % shuffle_.size();
      std::swap(record, shuffle_[slot]);
    }
    out.push_back(std::move(record));
  }
  return out;
}

void TfRecordSource::Decode(const std::vector<RawRecord>& records, Batch& batch, std::span<int64_t> ids,
                            TfRecordStageCosts& costs, const MoreRecords& more) const {
  if (records.size() != ids.size()) Fail("tfrecord source: {} records for {} rows", records.size(), ids.size());
  std::vector<int64_t> rows(records.size());
  for (size_t row = 0; row < rows.size(); ++row) rows[row] = static_cast<int64_t>(row);
  const bool skip = options_.skip_corrupt && more;
  std::string why;
  rows = DecodeRows(records, rows, batch, ids, costs, skip, why);
  const int64_t limit = kMaxCorruptPerRow * static_cast<int64_t>(records.size()) + 100;
  for (int64_t skipped = 0; !rows.empty();) {
    skipped += static_cast<int64_t>(rows.size());
    if (skipped > limit) {
      Fail(
          "input.tfrecord.skip_corrupt: {} corrupt records skipped while filling {} rows, more than {}: the files "
          "hold too few decodable records (the last: {})",
          skipped, records.size(), limit, why);
    }
    rows = DecodeRows(more(static_cast<int64_t>(rows.size())), rows, batch, ids, costs, skip, why);
  }
}

std::vector<int64_t> TfRecordSource::DecodeRows(const std::vector<RawRecord>& records, std::span<const int64_t> rows,
                                                Batch& batch, std::span<int64_t> ids, TfRecordStageCosts& costs,
                                                bool skip, std::string& why) const {
  if (records.size() != rows.size()) Fail("tfrecord source: {} records for {} rows", records.size(), rows.size());
  std::vector<int64_t> corrupt;
  for (size_t i = 0; i < records.size(); ++i) {
    const RawRecord& r = records[i];
    ids[static_cast<size_t>(rows[i])] = r.file_index * kTfRecordIdStride + r.record_index;
    try {
      DecodeExample({files_, specs_, seed_, clock_}, r, batch, rows[i], costs);
    } catch (const CorruptRecord& e) {
      if (!skip) Fail("{} (input.tfrecord.skip_corrupt skips such records)", e.what());
      corrupt.push_back(rows[i]);
      ++costs.skipped_records;
      why = e.what();
    }
  }
  return corrupt;
}

namespace {

// The record's Example; one that does not parse is corrupt.
ParsedExample ParseRecord(const RawRecord& record, const std::string& where, Clock& clock, TfRecordStageCosts& costs) {
  StageScope scope(clock, costs.parse);
  try {
    return ParseExample(record.data);
  } catch (const Error& e) {
    throw CorruptRecord(where + ": " + e.what());
  }
}

// The one JPEG of `feature` decoded; one that does not decode whole is corrupt.
RgbImage DecodeImage(const ExampleFeatureSpec& spec, const ExampleFeature& feature, const std::string& where,
                     Clock& clock, TfRecordStageCosts& costs) {
  if (feature.bytes.size() != 1) {
    Fail("{}: feature key '{}' holds {} byte strings, one JPEG expected", where, spec.key, feature.bytes.size());
  }
  StageScope scope(clock, costs.decode);
  try {
    return DecodeJpeg(feature.bytes[0], where + ", key '" + spec.key + "'", spec.max_pixels);
  } catch (const Error& e) {
    throw CorruptRecord(e.what());
  }
}

}  // namespace

void DecodeExample(const ExampleDecoding& decoding, const RawRecord& record, Batch& batch, int64_t row,
                   TfRecordStageCosts& costs) {
  Clock& clock = decoding.clock;
  const std::string& file = decoding.files[static_cast<size_t>(record.file_index)];
  const std::string where = fmt::format("{}: record {}", file, record.record_index);
  ParsedExample example = ParseRecord(record, where, clock, costs);
  for (const ExampleFeatureSpec& spec : decoding.specs) {
    auto found = example.find(spec.key);
    if (found == example.end()) {
      Fail("{}: feature key '{}' (input.features.{}.key) is missing; the record has: {}", where, spec.key,
           spec.output.name, KeysOf(example));
    }
    const ExampleFeature& feature = found->second;
    if (feature.kind != spec.kind) {
      Fail("{}: feature key '{}' holds a {} list, input.features.{}.kind is {}", where, spec.key,
           FeatureKindName(feature.kind), spec.output.name, FeatureKindName(spec.kind));
    }
    Tensor& tensor = batch.at(spec.output.name);
    const size_t row_bytes = ExampleBytes(spec.output);
    std::span<std::byte> out = tensor.bytes().subspan(static_cast<size_t>(row) * row_bytes, row_bytes);
    if (spec.decode_jpeg) {
      const RgbImage image = DecodeImage(spec, feature, where, clock, costs);
      StageScope scope(clock, costs.resize);
      const uint64_t seed = ExampleSeed(decoding.seed, static_cast<uint64_t>(record.file_index),
                                        static_cast<uint64_t>(record.record_index));
      const CropBox box = ChooseCrop(image.width, image.height, spec.crop, seed);
      const bool flip = spec.random_flip && ChooseFlip(seed);
      ResizeInto(image, box, flip, static_cast<int>(spec.output.shape[0]), static_cast<int>(spec.output.shape[1]),
                 spec.output.dtype, out);
      continue;
    }
    StageScope scope(clock, costs.batch);
    const auto expected = static_cast<size_t>(NumElements(spec.output.shape));
    if (feature.size() != expected) {
      Fail("{}: feature key '{}' holds {} values, input.features.{}.shape {} needs {}", where, spec.key, feature.size(),
           spec.output.name, ShapeToString(spec.output.shape), expected);
    }
    if (spec.kind == FeatureKind::kInt64) StoreValues(out, feature.int64s, spec.output.dtype);
    if (spec.kind == FeatureKind::kFloat) StoreValues(out, feature.floats, spec.output.dtype);
  }
  ++costs.examples;
}

}  // namespace tpusim::infeed
