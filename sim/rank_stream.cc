#include "sim/rank_stream.h"

#include <cerrno>
#include <filesystem>

#include <fmt/format.h>

#include "base/error.h"

namespace tpusim::sim {

std::string PartPath(const std::string& path, int rank) { return fmt::format("{}.part-{:05}", path, rank); }

void RemoveParts(const std::string& path, int world_size) {
  for (int rank = 0; rank < world_size; ++rank) {
    std::error_code ignored;
    std::filesystem::remove(PartPath(path, rank), ignored);
  }
}

void RemoveStreamParts(const run::RunOptions& options, int world_size) {
  for (const std::string* path : {&options.placement_log_path, &options.steps_csv_path, &options.trace_path}) {
    if (!path->empty()) RemoveParts(*path, world_size);
  }
}

RankStream::RankStream(const std::string& path, int rank) : path_(PartPath(path, rank)) {
  file_ = std::fopen(path_.c_str(), "w");
  if (!file_) Fail("{}: cannot open for writing", path_);
}

RankStream::~RankStream() {
  if (file_) std::fclose(file_);
}

RankStream::RankStream(RankStream&& other) noexcept : path_(std::move(other.path_)), file_(other.file_) {
  other.file_ = nullptr;
}

RankStream& RankStream::operator=(RankStream&& other) noexcept {
  if (this != &other) {
    if (file_) std::fclose(file_);
    path_ = std::move(other.path_);
    file_ = other.file_;
    other.file_ = nullptr;
  }
  return *this;
}

void RankStream::WriteLine(std::string_view line) {
  if (failure_ != 0) return;
  if (!file_) Fail("{}: written after it was closed", path_);
  if (std::fwrite(line.data(), 1, line.size(), file_) != line.size() || std::fputc('\n', file_) == EOF) {
    GiveUp(errno);
  }
}

void RankStream::Close() {
  if (!file_) return;
  const bool ok = std::fclose(file_) == 0;
  const int error = errno;
  file_ = nullptr;
  if (!ok) GiveUp(error);
}

// The part is of no use without the lines that did not fit, and a full disk needs
// its space back.
void RankStream::GiveUp(int error) {
  failure_ = error != 0 ? error : EIO;
  if (file_) std::fclose(file_);
  file_ = nullptr;
  std::error_code ignored;  // a part left behind costs disk space, not the output
  std::filesystem::remove(path_, ignored);
}

}  // namespace tpusim::sim
