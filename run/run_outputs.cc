#include "run/run_outputs.h"

#include <filesystem>
#include <map>

#include <fmt/ranges.h>

#include "base/atomic_file.h"
#include "base/error.h"
#include "run/table_storage.h"

namespace tpusim::run {
namespace {

struct OutputFile {
  const char* flag;
  const std::string& path;
};

std::string Canonical(const std::string& path) {
  std::error_code ec;
  std::filesystem::path canonical = std::filesystem::weakly_canonical(path, ec);
  return ec ? path : canonical.string();
}

}  // namespace

void CheckRunOutputs(const RunOptions& options, const RunConfig& config) {
  std::map<std::string, const char*> seen;
  // An output over the run file would replace the config it was read from.
  if (!options.config.empty()) seen.emplace(Canonical(options.config), "the run file");
  for (const OutputFile& out :
       {OutputFile{"--report", options.report_path}, OutputFile{"--placement-log", options.placement_log_path},
        OutputFile{"--trace", options.trace_path}, OutputFile{"--steps-csv", options.steps_csv_path},
        OutputFile{"--html", options.html_path}}) {
    if (out.path.empty()) continue;
    auto [it, inserted] = seen.emplace(Canonical(out.path), out.flag);
    if (!inserted) Fail("{} {}: the same file as {}; give each output its own path", out.flag, out.path, it->second);
    CheckFileWritable(out.path, fmt::format("{} {}", out.flag, out.path));
  }
  if (!options.params_out_dir.empty() && !config.model.enabled) {
    Fail("--params-out {}: the run has no model (model.enabled: false), so it has no parameters to write",
         options.params_out_dir);
  }
  if (const std::string table = FirstModeledTable(config.embedding.config);
      !options.params_out_dir.empty() && !table.empty()) {
    Fail(
        "--params-out {}: embedding table {} is modeled (only the rows the run touches are held), so it cannot be "
        "written whole; set embedding.storage: allocated",
        options.params_out_dir, table);
  }
  if (!options.params_out_dir.empty()) {
    CheckDirWritable(options.params_out_dir, "--params-out " + options.params_out_dir);
  }
}

void CheckCheckpointDir(const CheckpointConfig& checkpoint) {
  if (!checkpoint.saves()) return;
  CheckFolderWritable(checkpoint.dir, "checkpoint.dir " + checkpoint.dir);
}

void OutputWrites::Try(const std::function<void()>& write) {
  try {
    write();
  } catch (...) {  // a std::filesystem_error must not lose the other outputs either
    bool internal = false;
    failures_.push_back(CurrentExceptionMessage(&internal));
  }
}

void OutputWrites::ThrowIfAnyFailed() const {
  if (failures_.empty()) return;
  if (failures_.size() == 1) throw OutputsFailed(failures_[0]);
  // One line: the first failure whole, the others by their flag ("--trace PATH: ..."
  // names it first), so five outputs on a full disk do not make five clauses.
  std::vector<std::string> others;
  for (size_t i = 1; i < failures_.size(); ++i) others.push_back(failures_[i].substr(0, failures_[i].find(' ')));
  throw OutputsFailed(fmt::format("{}; {} more failed too: {}", failures_[0], others.size(), fmt::join(others, ", ")));
}

}  // namespace tpusim::run
