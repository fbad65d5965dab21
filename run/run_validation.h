// The one validation of a run. `tpusim validate`, `tpusim launch` (before it starts
// mpirun) and every rank of `tpusim run` (before its first message) call
// ValidateRun, so they accept and refuse exactly the same inputs with the same
// message: the device assignment (TF's rules, idle cores allowed), the fault
// targets on the slice (run/slice.h CheckAgainstSlice), cluster.mesh (what JAX's
// create_device_mesh would refuse, run_config.h RunMesh), the infeed plan
// (a batch that cannot be sharded), sizes that would overflow, waits that would
// not end, the memory the run needs against what the machine has, the trainer's
// inputs, the composite optimizer's routing of the model's variable names and
// Shampoo's key table, and
// the dataset of input.source: files. Output paths are checked separately
// (run/run_outputs.h) by whoever writes them.
#pragma once

#include <string>
#include <vector>

#include "infeed/infeed_plan.h"
#include "run/loop_plan.h"
#include "run/run_config.h"
#include "run/slice.h"
#include "run/target_host.h"

namespace tpusim::run {

// Bytes a run holds at its peak, summed over the ranks on one machine.
struct MemoryEstimate {
  double queues_bytes = 0;          // cores' infeed slots (shards and embedding trailers)
  double host_batches_bytes = 0;    // host batches being built, in flight and relayed
  double model_bytes = 0;           // parameters, gradients, optimizer slots, activations
  double embedding_bytes = 0;       // table shards and their optimizer slots, the hosts' id generators
  double embedding_step_bytes = 0;  // the cores' per-step embedding buffers (rows, messages, sums)
  double total() const {
    return queues_bytes + host_batches_bytes + model_bytes + embedding_bytes + embedding_step_bytes;
  }
};

// Where ranks run: the physical memory of this machine and the world ranks on it.
struct Machine {
  double memory_bytes = 0;
  std::vector<int> ranks;  // MPI ranks on it; empty: every rank of the run (tpusim launch without a hostfile)
};

// This machine's physical memory (sysconf), every rank on it.
Machine ThisMachine();

struct ValidatedRun {
  Slice slice;
  infeed::InfeedPlan plan;
  LoopPlan loops;
  MemoryEstimate memory;   // of the ranks on the machine ValidateRun was given
  TargetHost target_host;  // the TPU host the answer is for (run/target_host.h)
};

// Checks `config` as described at the top of this file and returns what the run is
// built from. Throws Error with one line naming the key, the value and what is
// allowed (for memory: both numbers).
ValidatedRun ValidateRun(const RunConfig& config, const Machine& machine);

// Notes on keys the run accepts but cannot use on `slice`, one line each, which
// `validate` and the run print: dcn.* on a job of one slice (they describe the
// network between slices). Not errors: a sweep over slice counts that includes
// 1 passes the same keys to every point.
std::vector<std::string> ConfigNotes(const RunConfig& config, const Slice& slice);

// The infeed plan of a run on `slice` (what ValidateRun checked). Throws Error.
infeed::InfeedPlan BuildInfeedPlan(const RunConfig& config, const Slice& slice);

// Bytes of one example of `specs` (as a double: no overflow however large).
double ExampleBytes(const std::vector<infeed::FeatureSpec>& specs);

// The memory the run needs on the ranks of `machine`.
MemoryEstimate EstimateMemory(const RunConfig& config, const Slice& slice, const infeed::InfeedPlan& plan,
                              const Machine& machine);

}  // namespace tpusim::run
