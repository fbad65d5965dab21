// TFRecord files (input.source: tfrecord and `gen-data --format tfrecord`): the
// record framing exactly as TensorFlow writes it (tensorflow/core/lib/io/
// record_writer.cc), each record
//   uint64 length | uint32 masked CRC-32C of the 8 length bytes | data[length] |
//   uint32 masked CRC-32C of the data
// little-endian, the mask base/crc32c.h's MaskCrc32c. A whole file may be one zlib
// or gzip stream (TFRecordOptions compression_type "ZLIB" / "GZIP"); offsets in a
// compressed file's messages are then offsets into the inflated stream.
//
// Bad files are one Error naming the file and the byte offset of the record: a
// length or data CRC that does not match, a record cut short, a file that is not
// TFRecord at all (its first length CRC fails; a gzip or zlib header there is
// named), a compressed record that declares more data bytes than the rest of its
// file can inflate to (refused before inflating, so a crafted length cannot make
// the reader inflate and hold the whole file). With skip_corrupt a record whose
// data CRC fails is skipped and counted; a bad length CRC, an impossible length or
// a truncation leaves no trustworthy way to the next record, so the rest of that
// file is skipped and counted as one record.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "base/atomic_file.h"
#include "base/clock.h"

namespace tpusim::infeed {

enum class TfRecordCompression { kNone, kZlib, kGzip };

// "none", "zlib", "gzip".
std::string_view CompressionName(TfRecordCompression compression);

struct TfRecordOptions {
  TfRecordCompression compression = TfRecordCompression::kNone;
  bool verify_crc = true;
  bool skip_corrupt = false;
};

// The bytes of one framed record (header, data, data CRC).
std::string FrameTfRecord(std::string_view data);

// What reading cost: wall seconds on the reader's clock and thread CPU seconds,
// for the file reads (inflating a compressed file included) and the CRC checks.
struct TfRecordReadCosts {
  double read_s = 0;
  double read_cpu_s = 0;
  double crc_s = 0;
  double crc_cpu_s = 0;
  int64_t file_bytes = 0;  // bytes read from the file (compressed bytes if compressed)
  int64_t records = 0;     // records returned
  int64_t skipped = 0;     // records skipped as corrupt (skip_corrupt)

  TfRecordReadCosts& operator+=(const TfRecordReadCosts& other);
};

// Reads one TFRecord file front to back. Not thread-safe; one reader per thread.
class TfRecordReader {
 public:
  // Opens `path` (a regular file: FIFOs and devices are refused). `clock` times
  // the stages (nullptr: the steady clock; borrowed). Throws Error naming the path.
  TfRecordReader(std::string path, const TfRecordOptions& options, Clock* clock = nullptr);
  ~TfRecordReader();
  TfRecordReader(const TfRecordReader&) = delete;
  TfRecordReader& operator=(const TfRecordReader&) = delete;

  // The next record's data into `data`; false at the end of the file. Throws
  // Error "<path>: record R at byte offset N: ..." on a corrupt or truncated
  // record (unless skip_corrupt), or when the file cannot be read.
  bool Next(std::string& data);
  // Byte offset (in the inflated stream when compressed) of the record Next
  // returned last, and its index among the file's records (skipped ones counted).
  int64_t record_offset() const { return record_offset_; }
  int64_t record_index() const { return record_index_ - 1; }
  const std::string& path() const { return path_; }
  const TfRecordReadCosts& costs() const { return costs_; }

 private:
  class Stream;
  // Reads up to n bytes into out; returns how many (fewer only at the end).
  size_t ReadSome(char* out, size_t n);
  bool CheckCrc(std::string_view bytes, uint32_t stored_masked);
  [[noreturn]] void Corrupt(const std::string& what) const;
  bool Skip(const std::string& what, bool rest_of_file);

  std::string path_;
  TfRecordOptions options_;
  SteadyClock steady_clock_;
  Clock& clock_;
  std::unique_ptr<Stream> stream_;
  int64_t offset_ = 0;  // in the (inflated) stream
  int64_t record_offset_ = 0;
  int64_t record_index_ = 0;
  bool at_end_ = false;
  TfRecordReadCosts costs_;
};

// Writes records to a file as TensorFlow's TFRecordWriter does, streaming: each
// record is framed (and compressed, as one zlib or gzip stream) and written as it
// comes, so memory stays at one record whatever the file's size. The file is
// written as PATH.tmp.<pid> and renamed over PATH at Close (base/atomic_file.h): a
// failed write or a writer destroyed before Close leaves no file behind.
class TfRecordWriter {
 public:
  // `label` names the file in messages (default: the path). Throws Error
  // "LABEL: cannot create ...: <errno text>".
  TfRecordWriter(std::string path, TfRecordCompression compression, std::string label = {});
  ~TfRecordWriter();
  TfRecordWriter(const TfRecordWriter&) = delete;
  TfRecordWriter& operator=(const TfRecordWriter&) = delete;
  // Throws Error "LABEL: write failed: No space left on device (ENOSPC ...".
  void Write(std::string_view data);
  // Ends the compressed stream, syncs and renames the file into place. Throws Error
  // naming the path and the cause.
  void Close();

 private:
  struct Deflater;
  void Deflate(std::string_view in, bool finish);

  std::string path_;
  TfRecordCompression compression_;
  std::unique_ptr<AtomicFile> file_;
  std::unique_ptr<Deflater> deflater_;  // zlib and gzip
};

// The whole of a compressed TFRecord file as it is stored: `framed` as one zlib or
// gzip stream (kNone: unchanged).
std::string CompressTfRecords(std::string_view framed, TfRecordCompression compression);

}  // namespace tpusim::infeed
