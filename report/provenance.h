// Where a report comes from: the run's environment (hosts, world size, layout,
// MPI version, the commit the binary was built from, build type) and its
// provenance (when, which config file, which commit). The commit is stamped at
// build time by meson's vcs_tag, so a binary copied away from its source tree
// still says what it was built from.
#pragma once

#include <string>

#include "report/report_types.h"
#include "run/slice.h"

namespace tpusim::report {

// The commit the binary was built from ("" when built outside git).
std::string BuildCommit();

// {hosts, world_size, layout, mpi_ranks, tpu_hosts_per_mpi_rank, mpi_version,
// git_commit, build_type} of a run of `slice` on `world_size` ranks.
ReportEnvironment Environment(const run::Slice& slice, int world_size, const std::string& mpi_version);

// {created_utc (now), config_file (absolute path of `config_source`), git_commit}.
ReportProvenance Provenance(const std::string& config_source);

}  // namespace tpusim::report
