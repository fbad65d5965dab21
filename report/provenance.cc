#include "report/provenance.h"

#include <ctime>
#include <filesystem>

#include "report/git_commit.h"

namespace tpusim::report {

std::string BuildCommit() { return kGitCommit; }

ReportProvenance Provenance(const std::string& config_source) {
  std::time_t now = std::time(nullptr);
  std::tm utc{};
  gmtime_r(&now, &utc);
  char created[32] = {};
  std::strftime(created, sizeof(created), "%Y-%m-%dT%H:%M:%SZ", &utc);
  std::error_code ec;
  std::filesystem::path config = std::filesystem::absolute(config_source, ec);
  return {created, ec ? config_source : config.string(), BuildCommit()};
}

ReportEnvironment Environment(const run::Slice& slice, int world_size, const std::string& mpi_version) {
  const cluster::RankLayout& layout = slice.layout;
#ifdef NDEBUG
  const char* build_type = "release";
#else
  const char* build_type = "debug";
#endif
  ReportEnvironment out;
  out.hosts = slice.num_hosts();
  out.world_size = world_size;
  out.layout = layout.layout_name();
  out.mpi_ranks = layout.num_processes();
  out.tpu_hosts_per_mpi_rank = layout.hosts_per_process();
  out.mpi_version = mpi_version;
  out.git_commit = BuildCommit();
  out.build_type = build_type;
  return out;
}

}  // namespace tpusim::report
