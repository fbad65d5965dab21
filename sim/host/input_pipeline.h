// The host-side input pipeline of a run: the feature specs the config declares and
// what a host rank's enqueue workers call to build each step's batch — from the
// synthetic source (generated in parallel by the workers), from files written by
// `tpusim gen-data` (a staged pipeline: file read -> preprocessing -> shuffle, one
// step at a time in step order), or from the cached pool (sent without a copy).
// It pays the host's modeled work — input.cpu_us_per_example and a slow host's
// extra (faults.slow_hosts) — as input.cost_mode says: waited out on the host's
// modeled workers (emulate) or burnt on this machine's CPU (burn). It also keeps
// each stage's time and cost for the host's report.
#pragma once

#include <memory>
#include <optional>
#include <vector>

#include "infeed/feature_spec.h"
#include "infeed/infeed_plan.h"
#include "infeed/infeed_transport.h"
#include "infeed/stage_times.h"
#include "infeed/synthetic_source.h"
#include "infeed/tfrecord_source.h"
#include "run/run_config.h"
#include "run/run_features.h"
#include "sim/pipeline_stages.h"

namespace tpusim::sim::host {

class InputPipeline {
 public:
  // Opens the source for `host`, its modeled work charged to `modeled_workers`
  // workers (infeed::ModeledWorkers; unused in cost_mode burn), the files
  // source's reads on `shared_storage`'s bandwidth when given (borrowed; see
  // checkpoint.shares_input_storage). Throws Error naming the file or key on bad
  // input.
  InputPipeline(const run::RunConfig& config, const infeed::InfeedPlan& plan, int host, int num_hosts,
                int modeled_workers, infeed::SharedStorage* shared_storage = nullptr);
  ~InputPipeline();
  // A resumed run (--resume): its step s builds the examples of infeed step
  // `first_step` + s (input.source synthetic; call before Filler).
  void StartAt(int64_t first_step);
  // Thread-safe filler for the host's enqueue workers.
  infeed::BatchFiller Filler();
  // Sets what the source needs in the transport: the prefetch depth, a slow
  // host's extra work after each build and, for the cached source, the borrowed
  // pool batches (RunHostInfeed's filler is then unused). Takes
  // options.window_first_step, set before, for Stages' window_costs.
  void Configure(infeed::TransportOptions& options);
  // The host's stage times and costs (the whole run's, and the window's) with
  // the enqueue stage of `feed`, the bounding stage and, with
  // input.storage.direct_io, whether O_DIRECT is in use; none on a host that
  // builds no batches.
  std::optional<PipelineStages> Stages(const infeed::HostFeedStats& feed) const;
  // The tfrecord source's stage costs of `step` (for --steps-csv), once: a later
  // call for the same step, or any with another source, gives zeros. Thread-safe.
  // A step built (the transport's HostObserver::StepBuilt, forwarded): a slow
  // host's extra work (faults.slow_hosts) is added here. Thread-safe.
  void StepBuilt(int64_t step, double build_s, double build_cpu_s);
  infeed::TfRecordStageCosts TakeStepCosts(int64_t step);

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace tpusim::sim::host
