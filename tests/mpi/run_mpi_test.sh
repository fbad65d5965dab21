#!/usr/bin/env bash
# Runs one multi-rank test binary under mpirun with a hard timeout. timeout signals
# only the mpirun it started, which ends its own ranks; nothing is killed by name.
# Usage: run_mpi_test.sh NP SECONDS BINARY [ARGS...]
set -u
np=$1 seconds=$2
shift 2
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
export OMPI_MCA_mpi_yield_when_idle=1 OMPI_MCA_odls_base_cutoff=1000 OMPI_MCA_pml=ob1
export OMPI_MCA_btl_vader_single_copy_mechanism=none
timeout --kill-after=5 "$seconds" mpirun -np "$np" --oversubscribe --bind-to none "$@"
rc=$?
if [ $rc -eq 124 ] || [ $rc -eq 137 ]; then
  echo "run_mpi_test: timed out after ${seconds}s: mpirun -np $np $*" >&2
fi
exit $rc
