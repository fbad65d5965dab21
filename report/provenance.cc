#include "report/provenance.h"

#include <ctime>
#include <filesystem>

#include "report/git_commit.h"

namespace tpusim::sim {

using json = nlohmann::json;

std::string BuildCommit() { return kGitCommit; }

json Provenance(const std::string& config_source) {
  std::time_t now = std::time(nullptr);
  std::tm utc{};
  gmtime_r(&now, &utc);
  char created[32] = {};
  std::strftime(created, sizeof(created), "%Y-%m-%dT%H:%M:%SZ", &utc);
  std::error_code ec;
  std::filesystem::path config = std::filesystem::absolute(config_source, ec);
  return {{"created_utc", created},
          {"config_file", ec ? config_source : config.string()},
          {"git_commit", BuildCommit()}};
}

json Environment(const Slice& slice, int world_size, const std::string& mpi_version) {
  const cluster::RankLayout& layout = slice.layout;
  return {{"hosts", slice.topology.num_hosts()},
          {"world_size", world_size},
          {"layout", layout.layout_name()},
          {"mpi_ranks", layout.num_processes()},
          {"tpu_hosts_per_mpi_rank", layout.hosts_per_process()},
          {"mpi_version", mpi_version},
          {"git_commit", BuildCommit()},
#ifdef NDEBUG
          {"build_type", "release"}
#else
          {"build_type", "debug"}
#endif
  };
}

}  // namespace tpusim::sim
