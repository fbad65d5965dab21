#include "infeed/tfrecord.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>
#include <zlib.h>

#include <algorithm>
#include <cerrno>
#include <cstring>

#include "base/crc32c.h"
#include "base/error.h"
#include "base/regular_file.h"
#include "infeed/cpu_timer.h"
#include "infeed/stage_times.h"

namespace tpusim::infeed {
namespace {

constexpr size_t kHeaderBytes = 12;        // length + its CRC
constexpr size_t kFooterBytes = 4;         // data CRC
constexpr size_t kChunkBytes = 1 << 20;    // a record's data is read in chunks this big
constexpr size_t kInputBytes = 256 << 10;  // compressed bytes read per refill

void PutLe64(char* out, uint64_t v) {
  for (int i = 0; i < 8; ++i) out[i] = static_cast<char>((v >> (8 * i)) & 0xff);
}
void PutLe32(char* out, uint32_t v) {
  for (int i = 0; i < 4; ++i) out[i] = static_cast<char>((v >> (8 * i)) & 0xff);
}
uint64_t GetLe64(const char* p) {
  uint64_t v = 0;
  for (int i = 7; i >= 0; --i) v = (v << 8) | static_cast<unsigned char>(p[i]);
  return v;
}
uint32_t GetLe32(const char* p) {
  uint32_t v = 0;
  for (int i = 3; i >= 0; --i) v = (v << 8) | static_cast<unsigned char>(p[i]);
  return v;
}

int WindowBits(TfRecordCompression compression) { return compression == TfRecordCompression::kGzip ? 15 + 16 : 15; }

// Times one stage on `clock` (wall) and the thread (CPU) into two totals.
class StageTimer {
 public:
  StageTimer(const Clock& clock, double& wall_s, double& cpu_s)
      : clock_(clock), wall_s_(wall_s), start_us_(clock.NowUs()), cpu_(&cpu_s) {}
  ~StageTimer() { wall_s_ += SecondsSinceUs(clock_, start_us_); }
  StageTimer(const StageTimer&) = delete;
  StageTimer& operator=(const StageTimer&) = delete;

 private:
  const Clock& clock_;
  double& wall_s_;
  int64_t start_us_;
  ScopedCpuTimer cpu_;
};

// Why a record's length CRC failed: a file that is not TFRecord at all when it
// is the first record (a gzip or zlib header there is named), else corrupt bytes.
std::string LengthCrcMismatch(const char* header, bool first) {
  if (!first) return "length CRC mismatch (the length bytes are corrupt)";
  std::string why = "not a TFRecord file: the first record's length CRC does not match";
  const bool gzip = static_cast<unsigned char>(header[0]) == 0x1f && static_cast<unsigned char>(header[1]) == 0x8b;
  const bool zlib = static_cast<unsigned char>(header[0]) == 0x78;
  if (gzip) why += "; the file starts like gzip (input.tfrecord.compression: gzip)";
  if (zlib) why += "; the file may be zlib (input.tfrecord.compression: zlib)";
  return why;
}

}  // namespace

std::string_view CompressionName(TfRecordCompression compression) {
  switch (compression) {
    case TfRecordCompression::kZlib:
      return "zlib";
    case TfRecordCompression::kGzip:
      return "gzip";
    case TfRecordCompression::kNone:
      break;
  }
  return "none";
}

TfRecordReadCosts& TfRecordReadCosts::operator+=(const TfRecordReadCosts& other) {
  read_s += other.read_s;
  read_cpu_s += other.read_cpu_s;
  crc_s += other.crc_s;
  crc_cpu_s += other.crc_cpu_s;
  file_bytes += other.file_bytes;
  records += other.records;
  skipped += other.skipped;
  return *this;
}

std::string FrameTfRecord(std::string_view data) {
  std::string out(kHeaderBytes + data.size() + kFooterBytes, '\0');
  PutLe64(out.data(), data.size());
  PutLe32(out.data() + 8, MaskCrc32c(Crc32c(std::string_view(out.data(), 8))));
  if (!data.empty()) std::memcpy(out.data() + kHeaderBytes, data.data(), data.size());
  PutLe32(out.data() + kHeaderBytes + data.size(), MaskCrc32c(Crc32c(data)));
  return out;
}

// The file's bytes in order: read as they are, or inflated from one zlib/gzip
// stream (gzip members may follow one another, as `cat a.gz b.gz` makes).
class TfRecordReader::Stream {
 public:
  Stream(const std::string& path, TfRecordCompression compression, int64_t& file_bytes)
      : path_(path), compression_(compression), file_bytes_(file_bytes) {
    fd_ = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
    if (fd_ < 0) Fail("{}: cannot open the TFRecord file: {})", path, ErrnoText(errno));
    struct stat st {};
    if (::fstat(fd_, &st) == 0) file_size_ = st.st_size;
    if (compression_ == TfRecordCompression::kNone) return;
    input_.resize(kInputBytes);
    if (inflateInit2(&z_, WindowBits(compression_)) != Z_OK) Fail("{}: zlib inflateInit failed", path);
    z_ready_ = true;
  }
  ~Stream() {
    if (z_ready_) inflateEnd(&z_);
    if (fd_ >= 0) ::close(fd_);
  }
  Stream(const Stream&) = delete;
  Stream& operator=(const Stream&) = delete;

  size_t Read(char* out, size_t n) {
    return compression_ == TfRecordCompression::kNone ? ReadFile(out, n) : Inflate(out, n);
  }

  // Compressed: the file's bytes not yet inflated, and the most they can inflate
  // to. Deflate codes at most 258 bytes (one match) in 2 bits, 1032 per byte; the
  // slack covers what zlib holds between calls (its bit buffer, a match in
  // progress).
  int64_t CompressedLeft() const { return std::max<int64_t>(0, file_size_ - (file_bytes_ - z_.avail_in)); }
  int64_t MaxInflatedLeft() const { return CompressedLeft() * 1032 + (64 << 10); }

 private:
  size_t ReadFile(char* out, size_t n) {
    size_t done = 0;
    while (done < n) {
      ssize_t got = ::read(fd_, out + done, n - done);
      if (got < 0 && errno == EINTR) continue;
      if (got < 0) Fail("{}: read failed: {})", path_, ErrnoText(errno));
      if (got == 0) break;
      done += static_cast<size_t>(got);
    }
    file_bytes_ += static_cast<int64_t>(done);
    return done;
  }

  size_t Inflate(char* out, size_t n) {
    z_.next_out = reinterpret_cast<Bytef*>(out);
    z_.avail_out = static_cast<uInt>(n);
    while (z_.avail_out > 0) {
      if (z_.avail_in == 0 && !file_done_) Refill();
      if (z_.avail_in == 0 && (file_done_ || stream_done_)) break;
      if (stream_done_) {  // another gzip member follows
        inflateReset(&z_);
        stream_done_ = false;
      }
      const int rc = inflate(&z_, Z_NO_FLUSH);
      if (rc == Z_STREAM_END) {
        stream_done_ = true;
        continue;
      }
      if (rc != Z_OK && rc != Z_BUF_ERROR) {
        Fail(
            "{}: not a {} stream or a corrupt one at inflated byte offset {} (zlib: {}); check "
            "input.tfrecord.compression",
            path_, CompressionName(compression_), z_.total_out, z_.msg ? z_.msg : "error");
      }
      if (rc == Z_BUF_ERROR && z_.avail_in == 0 && file_done_) break;
    }
    const size_t produced = n - z_.avail_out;
    if (produced < n && !stream_done_ && file_done_ && z_.avail_in == 0) {
      Fail("{}: the {} stream ends early (cut off after {} inflated bytes)", path_, CompressionName(compression_),
           z_.total_out);
    }
    return produced;
  }

  void Refill() {
    const size_t got = ReadFile(input_.data(), input_.size());
    file_done_ = got == 0;
    z_.next_in = reinterpret_cast<Bytef*>(input_.data());
    z_.avail_in = static_cast<uInt>(got);
  }

  const std::string& path_;
  TfRecordCompression compression_;
  int64_t& file_bytes_;
  int fd_ = -1;
  int64_t file_size_ = 0;
  z_stream z_{};
  bool z_ready_ = false;
  bool file_done_ = false;
  bool stream_done_ = false;
  std::vector<char> input_;
};

TfRecordReader::TfRecordReader(std::string path, const TfRecordOptions& options, Clock* clock)
    : path_(std::move(path)), options_(options), clock_(clock ? *clock : steady_clock_) {
  RefuseNonRegularFile(path_);
  if (KindOf(path_) == FileKind::kMissing) Fail("{}: TFRecord file does not exist", path_);
  stream_ = std::make_unique<Stream>(path_, options_.compression, costs_.file_bytes);
}

TfRecordReader::~TfRecordReader() = default;

size_t TfRecordReader::ReadSome(char* out, size_t n) {
  StageTimer timer(clock_, costs_.read_s, costs_.read_cpu_s);
  const size_t got = stream_->Read(out, n);
  offset_ += static_cast<int64_t>(got);
  return got;
}

bool TfRecordReader::CheckCrc(std::string_view bytes, uint32_t stored_masked) {
  if (!options_.verify_crc) return true;
  StageTimer timer(clock_, costs_.crc_s, costs_.crc_cpu_s);
  return MaskCrc32c(Crc32c(bytes)) == stored_masked;
}

void TfRecordReader::Corrupt(const std::string& what) const {
  Fail("{}: record {} at byte offset {}{}: {} (input.tfrecord.skip_corrupt skips such records)", path_, record_index_,
       record_offset_, options_.compression == TfRecordCompression::kNone ? "" : " of the inflated stream", what);
}

// A corrupt record: an Error, or with skip_corrupt one skipped record (and, when
// the framing cannot be trusted past it, the end of the file).
bool TfRecordReader::Skip(const std::string& what, bool rest_of_file) {
  if (!options_.skip_corrupt) Corrupt(what);
  ++costs_.skipped;
  ++record_index_;
  if (rest_of_file) at_end_ = true;
  return !rest_of_file;
}

bool TfRecordReader::Next(std::string& data) {
  while (!at_end_) {
    record_offset_ = offset_;
    char header[kHeaderBytes];
    const size_t got = ReadSome(header, kHeaderBytes);
    if (got == 0) break;
    if (got < kHeaderBytes) {
      Skip(fmt::format("truncated: the 12-byte record header has only {} bytes", got), true);
      break;
    }
    const uint64_t length = GetLe64(header);
    if (!CheckCrc(std::string_view(header, 8), GetLe32(header + 8))) {
      Skip(LengthCrcMismatch(header, record_offset_ == 0), true);
      break;
    }
    if (options_.compression != TfRecordCompression::kNone &&
        length > static_cast<uint64_t>(stream_->MaxInflatedLeft())) {
      Skip(fmt::format("declares {} data bytes, more than the file can hold ({} compressed bytes "
                       "inflate to at most {}); refused before inflating",
                       length, stream_->CompressedLeft(), stream_->MaxInflatedLeft()),
           true);
      break;
    }
    data.clear();
    while (data.size() < length) {
      const size_t want = static_cast<size_t>(std::min<uint64_t>(length - data.size(), kChunkBytes));
      const size_t at = data.size();
      data.resize(at + want);
      const size_t read = ReadSome(data.data() + at, want);
      data.resize(at + read);
      if (read < want) break;
    }
    char footer[kFooterBytes];
    const size_t footer_got = data.size() == length ? ReadSome(footer, kFooterBytes) : 0;
    if (data.size() < length || footer_got < kFooterBytes) {
      Skip(fmt::format("truncated: the record holds {} data bytes but the file ends after {}", length, data.size()),
           true);
      break;
    }
    if (!CheckCrc(data, GetLe32(footer))) {
      if (Skip(fmt::format("data CRC mismatch over its {} data bytes (from byte offset {})", length,
                           record_offset_ + static_cast<int64_t>(kHeaderBytes)),
               false)) {
        continue;
      }
    }
    ++record_index_;
    ++costs_.records;
    return true;
  }
  at_end_ = true;
  return false;
}

std::string CompressTfRecords(std::string_view framed, TfRecordCompression compression) {
  if (compression == TfRecordCompression::kNone) return std::string(framed);
  z_stream z{};
  if (deflateInit2(&z, Z_DEFAULT_COMPRESSION, Z_DEFLATED, WindowBits(compression), 8, Z_DEFAULT_STRATEGY) != Z_OK) {
    Fail("zlib: deflateInit failed");
  }
  std::string out(deflateBound(&z, static_cast<uLong>(framed.size())), '\0');
  z.next_in = reinterpret_cast<Bytef*>(const_cast<char*>(framed.data()));
  z.avail_in = static_cast<uInt>(framed.size());
  z.next_out = reinterpret_cast<Bytef*>(out.data());
  z.avail_out = static_cast<uInt>(out.size());
  const int rc = deflate(&z, Z_FINISH);
  out.resize(z.total_out);
  deflateEnd(&z);
  if (rc != Z_STREAM_END) Fail("zlib: compressing {} bytes failed (code {})", framed.size(), rc);
  return out;
}

struct TfRecordWriter::Deflater {
  z_stream z{};
  std::string out = std::string(size_t{1} << 18, '\0');
  ~Deflater() { deflateEnd(&z); }
};

TfRecordWriter::TfRecordWriter(std::string path, TfRecordCompression compression, std::string label)
    : path_(std::move(path)),
      compression_(compression),
      file_(std::make_unique<AtomicFile>(path_, label.empty() ? path_ : label)) {
  if (compression_ == TfRecordCompression::kNone) return;
  deflater_ = std::make_unique<Deflater>();
  if (deflateInit2(&deflater_->z, Z_DEFAULT_COMPRESSION, Z_DEFLATED, WindowBits(compression_), 8, Z_DEFAULT_STRATEGY) !=
      Z_OK) {
    Fail("{}: zlib deflateInit failed", path_);
  }
}

TfRecordWriter::~TfRecordWriter() = default;  // file_ removes an unfinished file

void TfRecordWriter::Deflate(std::string_view in, bool finish) {
  z_stream& z = deflater_->z;
  z.next_in = reinterpret_cast<Bytef*>(const_cast<char*>(in.data()));
  z.avail_in = static_cast<uInt>(in.size());
  int rc = Z_OK;
  do {
    z.next_out = reinterpret_cast<Bytef*>(deflater_->out.data());
    z.avail_out = static_cast<uInt>(deflater_->out.size());
    rc = deflate(&z, finish ? Z_FINISH : Z_NO_FLUSH);
    if (rc == Z_STREAM_ERROR) Fail("{}: zlib: compressing failed (code {})", path_, rc);
    file_->Write(std::string_view(deflater_->out.data(), deflater_->out.size() - z.avail_out));
  } while (z.avail_out == 0 || (finish && rc != Z_STREAM_END));
}

void TfRecordWriter::Write(std::string_view data) {
  if (!file_) Fail("{}: write after the file was closed", path_);
  const std::string framed = FrameTfRecord(data);
  if (deflater_) {
    Deflate(framed, false);
  } else {
    file_->Write(framed);
  }
}

void TfRecordWriter::Close() {
  if (!file_) return;
  if (deflater_) Deflate({}, true);
  file_->Commit();
  file_.reset();
}

}  // namespace tpusim::infeed
