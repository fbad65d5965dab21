#include "report/stream_merge.h"

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <map>
#include <memory>

#include <fmt/format.h>

#include "base/atomic_file.h"
#include "base/error.h"
#include "base/file_read.h"
#include "sim/metrics.h"
#include "sim/rank_stream.h"

namespace tpusim::report {
namespace {

// Reads the parts line by line; throws naming the part on a missing file.
class PartReader {
 public:
  PartReader(const std::string& path, int rank) : path_(sim::PartPath(path, rank)), in_(path_) {
    if (!in_.ok()) Fail("{}: cannot read this rank's part (do all ranks see the output folder?)", path_);
  }
  ~PartReader() { Remove(); }  // a failed merge leaves no parts either (a full disk needs the space)
  // The next line, or false at the end.
  bool Next(std::string& line) { return in_.Next(line); }
  const std::string& path() const { return path_; }
  void Remove() {
    in_.Close();
    std::error_code ignored;  // a part left behind costs disk space, not the output
    std::filesystem::remove(path_, ignored);
  }

 private:
  std::string path_;
  LineFile in_;
};

// Writes `path` atomically (base/atomic_file.h: PATH.tmp.<pid>, synced, renamed),
// so a failure never leaves half a file, through a bounded buffer.
class MergedFile {
 public:
  MergedFile(const std::string& path, const std::string& label) : file_(path, label) {}
  void Append(std::string_view text) {
    buffer_.append(text);
    if (buffer_.size() >= kFlushBytes) Flush();
  }
  void Commit() {
    Flush();
    file_.Commit();
  }

 private:
  static constexpr size_t kFlushBytes = size_t{1} << 20;
  void Flush() {
    file_.Write(buffer_);
    buffer_.clear();
  }

  AtomicFile file_;
  std::string buffer_;
};

int64_t LeadingStep(const std::string& line, char separator, const std::string& part) {
  const size_t end = line.find(separator);
  char* parsed = nullptr;
  const int64_t step = std::strtoll(line.c_str(), &parsed, 10);
  if (end == std::string::npos || parsed != line.c_str() + end) {
    Fail("{}: malformed line '{}'", part, line.substr(0, 40));
  }
  return step;
}

// Where a core row's last `columns` columns begin (at their comma).
size_t TailStart(const std::string& line, size_t columns) {
  size_t at = line.size();
  for (size_t i = 0; i < columns && at != std::string::npos && at > 0; ++i) at = line.rfind(',', at - 1);
  if (at == std::string::npos)
    Fail("--steps-csv: a core row without its last {} columns: '{}'", columns, line.substr(0, 40));
  return at;
}

}  // namespace

void MergePlacementLog(const std::string& path, const std::vector<int>& ranks) {
  std::vector<std::unique_ptr<PartReader>> parts;
  for (int rank : ranks) parts.push_back(std::make_unique<PartReader>(path, rank));
  MergedFile merged(path, "--placement-log " + path);
  // Lockstep: every part has the same steps, one line each, in order.
  std::string line;
  for (bool more = true; more;) {
    more = false;
    for (auto& part : parts) {
      if (!part->Next(line)) continue;
      more = true;
      const size_t tab = line.find('\t');
      LeadingStep(line, '\t', part->path());
      merged.Append(std::string_view(line).substr(tab + 1));
      merged.Append("\n");
    }
  }
  merged.Commit();
  for (auto& part : parts) part->Remove();
}

void MergeStepsCsv(const std::string& path, const std::string& header, const std::vector<int>& core_ranks,
                   const std::vector<int>& host_ranks) {
  std::vector<std::unique_ptr<PartReader>> cores, hosts(host_ranks.size());
  for (int rank : core_ranks) cores.push_back(std::make_unique<PartReader>(path, rank));
  for (size_t h = 0; h < host_ranks.size(); ++h) {
    if (host_ranks[h] >= 0) hosts[h] = std::make_unique<PartReader>(path, host_ranks[h]);
  }
  MergedFile merged(path, "--steps-csv " + path);
  merged.Append(header);
  merged.Append("\n");
  // A core whose shard no host built gets the host columns empty.
  const std::string no_host(sim::kHostStepsCsvColumns.size() - 1, ',');
  std::vector<std::string> host_columns(hosts.size(), no_host);
  std::string line;
  for (int64_t step = 0;; ++step) {
    for (size_t h = 0; h < hosts.size(); ++h) {
      if (!hosts[h] || !hosts[h]->Next(line)) continue;
      if (LeadingStep(line, ',', hosts[h]->path()) != step) {
        Fail("{}: expected step {}, got '{}'", hosts[h]->path(), step, line.substr(0, 40));
      }
      host_columns[h] = line.substr(line.find(',') + 1);
    }
    bool any = false;
    for (auto& core : cores) {
      if (!core->Next(line)) continue;
      any = true;
      if (LeadingStep(line, ',', core->path()) != step) {
        Fail("{}: expected step {}, got '{}'", core->path(), step, line.substr(0, 40));
      }
      const size_t a = line.find(',') + 1, b = line.find(',', a);
      const int src = std::atoi(line.c_str() + a);
      const bool known = b != std::string::npos && src >= 0 && static_cast<size_t>(src) < hosts.size();
      const size_t tail = TailStart(line, sim::kCoreTailCsvColumns.size());
      merged.Append(std::string_view(line).substr(0, tail));
      merged.Append(",");
      merged.Append(known ? host_columns[static_cast<size_t>(src)] : no_host);
      merged.Append(std::string_view(line).substr(tail));
      merged.Append("\n");
    }
    if (!any) break;
  }
  merged.Commit();
  for (auto& part : cores) part->Remove();
  for (auto& part : hosts) {
    if (part) part->Remove();
  }
}

void MergeTrace(const std::string& path, const std::string& prefix, int num_ranks) {
  MergedFile merged(path, "--trace " + path);
  merged.Append("{\"traceEvents\":[");
  merged.Append(prefix);
  bool first = prefix.empty();
  std::string line;
  for (int rank = 0; rank < num_ranks; ++rank) {
    if (!std::filesystem::exists(sim::PartPath(path, rank))) continue;
    PartReader part(path, rank);
    while (part.Next(line)) {
      merged.Append(first ? "" : ",");
      merged.Append(line);
      first = false;
    }
    part.Remove();
  }
  merged.Append("],\"displayTimeUnit\":\"ms\"}\n");
  merged.Commit();
}

}  // namespace tpusim::report
