#!/usr/bin/env bash
# Fails when a source file outside cluster/ (the Transport seam's MPI side) and
# the raw-MPI tests and baselines (tests/mpi, tests/bench) includes mpi.h
# (design.md §1: cluster/ owns every MPI handle). Usage: mpi_header_check.sh SOURCE_ROOT
set -euo pipefail
root=${1:?usage: mpi_header_check.sh SOURCE_ROOT}
cd "$root"
offenders=$(find . \( -path './build*' -o -name '.git' -o -path './subprojects' \) -prune -o \
                  -type f \( -name '*.h' -o -name '*.hpp' -o -name '*.cc' -o -name '*.cpp' \) -print |
            xargs grep -lE '^[[:space:]]*#[[:space:]]*include[[:space:]]*[<"]mpi\.h[>"]' |
            grep -vE '^\./(cluster|tests/mpi|tests/bench)/' || true)
if [ -n "$offenders" ]; then
  echo "mpi.h is included outside cluster/, tests/mpi and tests/bench (use cluster/transport.h):" >&2
  echo "$offenders" >&2
  exit 1
fi
count=$(find ./cluster ./tests/mpi ./tests/bench -type f \( -name '*.h' -o -name '*.cc' \) |
        xargs grep -lE '#[[:space:]]*include[[:space:]]*[<"]mpi\.h[>"]' | wc -l)
echo "mpi.h included by $count files, all inside cluster/, tests/mpi and tests/bench"
