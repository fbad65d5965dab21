#include "report/pod_projection.h"

#include <algorithm>
#include <map>
#include <optional>
#include <string>
#include <utility>

#include <fmt/format.h>

#include "base/median.h"
#include "report/verdict.h"
#include "run/host_batches.h"

namespace tpusim::report {
namespace {

constexpr double kBytesPerGib = 1024.0 * 1024.0 * 1024.0;

// A host whose own CPU per example in a stage is this many times its like hosts'
// median is named as an outlier (the median, not its figure, projects it).
constexpr double kOutlierRatio = 3;

double PerExample(double total, int64_t examples) { return examples > 0 ? total / static_cast<double>(examples) : 0.0; }

// Examples/s of `lanes` working at once, each taking `s_per_example`; none
// (unlimited) when the work costs nothing.
std::optional<double> LanesRate(double lanes, double s_per_example) {
  if (s_per_example <= 0) return std::nullopt;
  return lanes / s_per_example;
}

// How many of the target host's workers each stage runs on: the target
// pipeline's, target_host.input_workers (default every input vCPU), never this
// machine's emulation threads (infeed.parallelism) nor the prefetch window (a
// memory figure, set against the target host's memory).
// - A worker's whole step (its fill and the packing of its shards, one after the
//   other) runs on W, and so do file read, preprocessing and the modeled
//   (emulated) preprocessing — except with the files source, whose stream (and its
//   shuffle, and its modeled cost) is served one step at a time in step order
//   (the StepSequencer of sim/host/input_pipeline.cc), so on 1: that is how the
//   pipeline is built, and `assumes` says so.
// - The shuffle buffer is one stream: 1.
// - Enqueue: one sender thread per host sends every shard (HostSender::Run, Send),
//   so 1; the packing is the workers' (in the step build).
struct StageLanes {
  double workers = 1;  // a worker's whole step
  double build = 1;    // file read, preprocessing, emulated preprocessing
};

StageLanes LanesOf(const run::RunConfig& config, const run::TargetHost& target) {
  const double workers = std::max(1.0, target.input_workers.value);
  return {workers, config.input.source == run::InputSource::kFiles ? 1.0 : workers};
}

// A stage of real work on the target: its `workers` each take the CPU seconds per
// example (this machine's, over cpu_speed) plus any modeled seconds it waits out
// in turn. None (unlimited) when it costs nothing.
std::optional<double> CpuCapacity(const ProjectedStage& s, double cpu_s_per_example, double cpu_speed) {
  return LanesRate(s.workers.value_or(1), cpu_s_per_example / cpu_speed + s.modeled_s_per_example.value_or(0.0));
}

// Real work: CPU seconds per example on this machine, done by `lanes` target vCPUs
// each `cpu_speed` times one core of this machine.
ProjectedStage CpuStage(const char* name, double cpu_s, int64_t examples, double lanes, double cpu_speed) {
  ProjectedStage s;
  s.stage = name;
  s.cpu_s_per_example = PerExample(cpu_s, examples);
  s.workers = lanes;
  s.capacity_examples_per_s = CpuCapacity(s, *s.cpu_s_per_example, cpu_speed);
  return s;
}

// The storage model's rate (infeed/storage_model.h) for examples of `bytes` in
// `requests` each: its bandwidth over the bytes, and the requests it keeps in
// flight over their latency. A term whose figure is 0 (unlimited), or that the
// examples do not use, is left out.
std::optional<double> StorageRate(const infeed::StorageConfig& storage, double bytes, double requests) {
  std::optional<double> rate;
  auto keep_least = [&rate](double r) { rate = std::min(rate.value_or(r), r); };
  if (storage.bandwidth_mb_s > 0 && bytes > 0) keep_least(storage.bandwidth_mb_s * 1e6 / bytes);
  if (storage.latency_us > 0 && requests > 0) {
    keep_least(storage.concurrency / (storage.latency_us * 1e-6 * requests));
  }
  return rate;
}

ProjectedStage StorageStage(const infeed::StageCosts& c, const infeed::StorageConfig& storage) {
  ProjectedStage s;
  s.stage = "storage";
  s.modeled_s_per_example = PerExample(c.modeled_storage_s, c.examples);
  s.bytes_per_example = PerExample(static_cast<double>(c.file_bytes), c.examples);
  const double requests = PerExample(static_cast<double>(c.storage_requests), c.examples);
  s.capacity_examples_per_s = StorageRate(storage, *s.bytes_per_example, requests);
  return s;
}

// Modeled work is stated for the target (input.cpu_us_per_example is the user's
// figure), so cpu_speed does not scale it.
ProjectedStage EmulatedStage(const infeed::StageCosts& c, double lanes) {
  ProjectedStage s;
  s.stage = "emulated preprocessing";
  s.modeled_s_per_example = PerExample(c.modeled_preprocessing_s, c.examples);
  s.workers = lanes;
  s.capacity_examples_per_s = LanesRate(lanes, *s.modeled_s_per_example);
  return s;
}

// The files source's one stream (sim/host/input_pipeline.cc StepSequencer): a step's
// read, inflate, shuffle and modeled cost run in turn on one worker, so they are
// one stage whose time per example is their sum, not independent stages. A real
// run on this machine measured 44,310-50,468 examples/s (v4-8, zlib shards, quiet
// machine) where the slowest of the three alone said 117,448-127,826 and their sum
// 51,214-58,550.
// Its CPU is the stream's own thread CPU (StageCosts::stream_cpu_s), which holds
// what the three leave between them (allocations, bookkeeping); costs that do not
// say it fall back to the three's sum.
ProjectedStage FileStreamStage(const infeed::StageCosts& c, double cpu_speed) {
  ProjectedStage s;
  s.stage = "file stream";
  const double parts = c.file_read_cpu_s + c.preprocessing_cpu_s + c.shuffle_cpu_s;
  s.cpu_s_per_example = PerExample(c.stream_cpu_s > 0 ? c.stream_cpu_s : parts, c.examples);
  s.modeled_s_per_example = PerExample(c.modeled_preprocessing_s, c.examples);
  s.workers = 1;
  s.capacity_examples_per_s = CpuCapacity(s, *s.cpu_s_per_example, cpu_speed);
  return s;
}

// A worker's whole step: everything its thread spent building (StageCosts::
// build_cpu_s: the fill — read, inflate or generation, shuffle and what lies
// between them — and the packing) plus the modeled work it waited out, on the
// W workers. It binds when the parts, each below it, add up: a real zlib run on
// this machine with one worker (v4-8, sanitized build) measured 20,682 examples/s
// where the parts' least said 25,923 and the worker's step 20,048.
// Drawing tpusim's synthetic embedding ids (`id_generation_s`) is the
// simulator's own work, not the pod's: a pod's hosts read their ids, so it is
// taken out of the step.
ProjectedStage StepBuildStage(const infeed::StageCosts& c, double id_generation_s, double workers, double cpu_speed) {
  ProjectedStage s;
  s.stage = "step build";
  s.cpu_s_per_example = PerExample(std::max(0.0, c.build_cpu_s - id_generation_s), c.examples);
  s.modeled_s_per_example = PerExample(c.modeled_preprocessing_s, c.examples);
  s.workers = workers;
  s.capacity_examples_per_s = CpuCapacity(s, *s.cpu_s_per_example, cpu_speed);
  return s;
}

// The ids -> per-core COO of the embedding features (and their trailer bytes),
// on the workers, in CPU per example of the host's own ids; a part of the step
// build, like file read and preprocessing. None without ids.
std::optional<ProjectedStage> SparseEnqueueStage(const sim::SparseEnqueueCosts& c, double workers, double cpu_speed) {
  if (c.ids <= 0 || c.examples <= 0) return std::nullopt;
  ProjectedStage s = CpuStage("sparse enqueue", c.coo_cpu_s, c.examples, workers, cpu_speed);
  return s;
}

// input.max_examples_per_sec caps a host wherever it runs.
ProjectedStage RateCapStage(double max_examples_per_sec) {
  ProjectedStage s;
  s.stage = "rate cap";
  if (max_examples_per_sec > 0) s.capacity_examples_per_s = max_examples_per_sec;
  return s;
}

// host_to_device_gbps is the link from a host to one core (cluster/topology.h),
// so a host feeding n cores moves n links' worth.
ProjectedStage HostToDeviceStage(const HostCosts& h, double gbps) {
  ProjectedStage s;
  s.stage = "host-to-device";
  s.bytes_per_example = PerExample(static_cast<double>(h.costs.device_bytes), h.costs.examples);
  if (*s.bytes_per_example > 0 && gbps > 0 && h.fed_cores > 0) {
    s.capacity_examples_per_s = gbps * 1e9 / 8 * h.fed_cores / *s.bytes_per_example;
  }
  return s;
}

std::vector<ProjectedStage> StagesOf(const PodProjectionInputs& in, const HostCosts& h) {
  const infeed::StageCosts& c = h.costs;
  const StageLanes lanes = LanesOf(in.config, in.target);
  const double speed = in.target.cpu_speed.value;
  std::vector<ProjectedStage> stages = {
      StorageStage(c, in.config.input.storage),
      CpuStage("file read", c.file_read_cpu_s, c.examples, lanes.build, speed),
      CpuStage("preprocessing", c.preprocessing_cpu_s, c.examples, lanes.build, speed),
      EmulatedStage(c, lanes.build),
      RateCapStage(in.config.input.max_examples_per_sec),
      CpuStage("shuffle", c.shuffle_cpu_s, c.examples, 1, speed)};
  if (in.config.input.source == run::InputSource::kFiles) stages.push_back(FileStreamStage(c, speed));
  // Burnt modeled work is spun inside the builds, so their CPU holds it (a share
  // of it, on cores the workers share): the step cannot be told from its modeled
  // part and is left out.
  const bool burnt = in.config.input.cost_mode == run::InputConfig::CostMode::kBurn && c.modeled_preprocessing_s > 0;
  if (auto sparse = SparseEnqueueStage(h.sparse, lanes.workers, speed)) stages.push_back(*sparse);
  if (!burnt) stages.push_back(StepBuildStage(c, h.sparse.id_generation_cpu_s, lanes.workers, speed));
  // The sender's own CPU: enqueue_cpu_s holds the workers' packing too.
  stages.push_back(CpuStage("enqueue", c.enqueue_cpu_s - c.package_cpu_s, c.examples, 1, speed));
  stages.push_back(HostToDeviceStage(h, in.host_to_device_gbps));
  return stages;
}

// The least capacity and its stage (the first of equals): the host's projected
// rate. An unlimited stage (null) never binds; "none" when every stage is.
void SetBound(HostProjection& p) {
  p.bound_by = "none";
  p.projected_examples_per_s.reset();
  for (const ProjectedStage& s : p.stages) {
    const std::optional<double>& c = s.capacity_examples_per_s;
    if (c && (!p.projected_examples_per_s || *c < *p.projected_examples_per_s)) {
      p.projected_examples_per_s = c;
      p.bound_by = s.stage;
    }
  }
}

// The simulator's own cost here: the real stages' CPU per example, and the most
// examples/s this machine's cores could carry per host for the whole run.
void SetThisMachine(const infeed::StageCosts& c, const MachineShare& machine, HostProjection& p) {
  p.simulator_cpu_s_per_example = infeed::SimulatorCpuSecondsPerExample(c);
  if (machine.cpus > 0 && machine.tpu_hosts > 0 && p.simulator_cpu_s_per_example > 0) {
    p.this_machine_examples_per_s = machine.cpus / (machine.tpu_hosts * p.simulator_cpu_s_per_example);
  }
}

// A host on the target with its own measured costs; ShareEstimates then puts the
// estimate of its like hosts in place of each measured CPU figure.
HostProjection ProjectHost(const PodProjectionInputs& in, const HostCosts& h) {
  HostProjection p;
  p.host = h.host;
  p.examples_per_step = h.examples_per_step;
  p.stages = StagesOf(in, h);
  p.prefetch_steps = PrefetchSteps(in.config);
  p.prefetch_memory_gib =
      static_cast<double>(p.prefetch_steps * h.examples_per_step * RunExampleBytes(in.config)) / kBytesPerGib;
  p.fits_memory = p.prefetch_memory_gib <= in.target.memory_gib.value;
  SetThisMachine(h.costs, in.machine, p);
  return p;
}

ProjectedStage* FindStage(HostProjection& h, const std::string& name) {
  for (ProjectedStage& s : h.stages) {
    if (s.stage == name) return &s;
  }
  return nullptr;
}

// One measured stage over a group of like hosts: each host's stage takes the
// group's estimate of its CPU per example — the calibration's (`calibrated`),
// the median of the group's own figures beside it as run_median, or without one
// the median — and a host measuring kOutlierRatio x the median is named. Its own
// modeled costs (storage, emulated work, a slow host's factor) stay its own:
// those are inputs, not noise.
void ShareStage(const std::vector<HostProjection*>& group, const std::string& stage, std::optional<double> calibrated,
                double cpu_speed, std::vector<ProjectionOutlier>& outliers) {
  std::vector<double> own;
  for (HostProjection* h : group) {
    const ProjectedStage* s = FindStage(*h, stage);
    if (s && s->cpu_s_per_example) own.push_back(*s->cpu_s_per_example);
  }
  if (own.empty()) return;
  const double median = Median(own);
  const double estimate = calibrated.value_or(median);
  for (HostProjection* h : group) {
    ProjectedStage* s = FindStage(*h, stage);
    if (!s || !s->cpu_s_per_example) continue;
    s->shared_cpu_s_per_example = estimate;
    if (calibrated) s->run_median_cpu_s_per_example = median;
    s->capacity_examples_per_s = CpuCapacity(*s, estimate, cpu_speed);
    const double mine = *s->cpu_s_per_example;
    if (group.size() >= 3 && mine > 0 && mine > kOutlierRatio * median) {
      outliers.push_back({h->host, stage, mine, median, median > 0 ? mine / median : 0.0});
    }
  }
}

using ClassKey = std::pair<int64_t, int>;  // examples per step, fed cores

// The calibration of a class that measured something, or null.
const HostCalibration* CalibrationOf(const std::vector<HostCalibration>& calibrations, const ClassKey& key) {
  for (const HostCalibration& c : calibrations) {
    if (c.examples_per_step == key.first && c.fed_cores == key.second && c.costs.examples > 0) {
      return &c;
    }
  }
  return nullptr;
}

// The median over `hosts` of their packing's CPU per example: the part of a
// worker's step the calibration does not run (it fills, it does not pack),
// without drawing synthetic embedding ids (the simulator's own work).
double MedianPackingPerExample(const std::vector<const HostCosts*>& hosts) {
  std::vector<double> own;
  for (const HostCosts* h : hosts) {
    const double packing = std::max(0.0, h->costs.package_cpu_s - h->sparse.id_generation_cpu_s);
    own.push_back(PerExample(packing, h->costs.examples));
  }
  return own.empty() ? 0.0 : Median(own);
}

// The sparse enqueue's CPU per id in a class's calibration, if it encoded ids.
std::optional<double> CalibratedCpuPerId(const HostCalibration& c) {
  if (c.sparse.ids <= 0) return std::nullopt;
  return c.sparse.coo_cpu_s / static_cast<double>(c.sparse.ids);
}

// A stage's CPU per example in a class's calibration; none for the stages it
// does not run (enqueue: the sends need the cores, which the run measured).
std::optional<double> CalibratedCpu(const std::string& stage, const HostCalibration& c, double packing_per_example) {
  const infeed::StageCosts& k = c.costs;
  if (stage == "sparse enqueue") {
    if (c.sparse.ids <= 0) return std::nullopt;
    return PerExample(c.sparse.coo_cpu_s, c.sparse.examples);
  }
  if (stage == "file read") return PerExample(k.file_read_cpu_s, k.examples);
  if (stage == "preprocessing") return PerExample(k.preprocessing_cpu_s, k.examples);
  if (stage == "shuffle") return PerExample(k.shuffle_cpu_s, k.examples);
  if (stage == "file stream") {
    const double parts = k.file_read_cpu_s + k.preprocessing_cpu_s + k.shuffle_cpu_s;
    return PerExample(k.stream_cpu_s > 0 ? k.stream_cpu_s : parts, k.examples);
  }
  if (stage == "step build") return PerExample(k.build_cpu_s, k.examples) + packing_per_example;
  return std::nullopt;
}

// The stages of a group with real work, in data-flow order.
std::vector<std::string> MeasuredStages(const std::vector<HostProjection*>& group) {
  std::vector<std::string> measured;
  for (const HostProjection* h : group) {
    for (const ProjectedStage& s : h->stages) {
      if (s.cpu_s_per_example && std::find(measured.begin(), measured.end(), s.stage) == measured.end()) {
        measured.push_back(s.stage);
      }
    }
  }
  return measured;
}

// Hosts that run the same pipeline on the same shapes (the run's pipeline, the
// same examples per step and fed cores) share one estimate of each stage's CPU
// per example: their class's calibration or, without one, the median over them.
// So the answer does not follow the noise of one host on a machine that plays
// many (one host of 64 packed on 2 cores once measured 105 us/example of enqueue
// where the others took 0.4-4), nor how many hosts this machine plays.
std::vector<ProjectionOutlier> ShareEstimates(std::vector<HostProjection>& hosts, const PodProjectionInputs& in) {
  std::map<ClassKey, std::vector<HostProjection*>> groups;
  std::map<ClassKey, std::vector<const HostCosts*>> costs;
  for (size_t i = 0; i < hosts.size(); ++i) {
    const ClassKey key{in.hosts[i].examples_per_step, in.hosts[i].fed_cores};
    groups[key].push_back(&hosts[i]);
    costs[key].push_back(&in.hosts[i]);
  }
  std::vector<ProjectionOutlier> outliers;
  for (auto& [key, group] : groups) {
    const HostCalibration* calibration = CalibrationOf(in.calibrations, key);
    const double packing = MedianPackingPerExample(costs[key]);
    for (const std::string& stage : MeasuredStages(group)) {
      std::optional<double> calibrated;
      if (calibration) calibrated = CalibratedCpu(stage, *calibration, packing);
      ShareStage(group, stage, calibrated, in.target.cpu_speed.value, outliers);
    }
  }
  for (HostProjection& h : hosts) SetBound(h);
  std::sort(outliers.begin(), outliers.end(),
            [](const ProjectionOutlier& a, const ProjectionOutlier& b) { return a.ratio > b.ratio; });
  return outliers;
}

// Whether `c` measured something for a class some host of `in` is in.
bool CalibratesAHost(const PodProjectionInputs& in, const HostCalibration& c) {
  for (const HostCosts& h : in.hosts) {
    if (CalibrationOf({c}, {h.examples_per_step, h.fed_cores})) return true;
  }
  return false;
}

// Where the estimates came from, for the report: the calibrations, and whether
// any was used.
CostSource CostSourceOf(const PodProjectionInputs& in) {
  CostSource out;
  out.source = "run";
  for (const HostCalibration& c : in.calibrations) {
    out.calibrations.push_back({c.host, c.examples_per_step, c.fed_cores, c.workers, c.steps, c.costs.examples,
                                c.seconds, PerExample(c.costs.build_cpu_s, c.costs.examples),
                                CalibratedCpuPerId(c).value_or(0.0), c.note});
    if (CalibratesAHost(in, c)) out.source = "calibration";
    if (!c.note.empty() && out.note.empty()) out.note = c.note;
  }
  if (in.calibrations.empty()) {
    out.note = !in.config.report.calibrate ? "report.calibrate is false"
               : in.config.input.source == run::InputSource::kCached
                   ? "the cached source sends borrowed batches: nothing to re-run"
                   : "no calibration was measured";
  }
  return out;
}

// What `assumes` says of the estimates' source.
std::string CostSourceAssumption(const CostSource& source) {
  if (source.source == "calibration") {
    return "CPU per example from an isolated pass on this machine (cost_source: calibration): "
           "after the run one host per pipeline class re-ran its pipeline's fills on the run's "
           "workers while every other rank waited, so the figures are not inflated by the other "
           "hosts this machine plays at once; the packing and the enqueue are the run's median; "
           "each stage's run_median_cpu_s_per_example is the figure measured in the run";
  }
  return "CPU per example measured in the run (cost_source: run, the median over like hosts; "
         "no calibration: " +
         source.note +
         "): on a machine that plays many hosts at once, "
         "their contention inflates it";
}

// The least projected rate over the hosts, the host that has it and its stage.
void SetLeastHost(PodProjectionSection& p) {
  p.bound_by = "none";
  for (const HostProjection& h : p.hosts) {
    const std::optional<double>& rate = h.projected_examples_per_s;
    const std::optional<double>& least = p.projected_examples_per_s_per_host;
    if (rate && (!least || *rate < *least)) {
      p.projected_examples_per_s_per_host = rate;
      p.bound_host = h.host;
      p.bound_by = h.bound_by;
    }
  }
}

// The longest any host takes to build its step at its projected rate (0 when
// every host is unlimited), and the most examples a host builds per step.
double InputSecondsPerStep(const std::vector<HostProjection>& hosts) {
  double seconds = 0;
  for (const HostProjection& h : hosts) {
    if (!h.projected_examples_per_s) continue;
    seconds = std::max(seconds, static_cast<double>(h.examples_per_step) / *h.projected_examples_per_s);
  }
  return seconds;
}

int64_t MostExamplesPerStep(const std::vector<HostProjection>& hosts) {
  int64_t most = 0;
  for (const HostProjection& h : hosts) most = std::max(most, h.examples_per_step);
  return most;
}

// The projected step, with AU defined as the measured one is (the accelerator's
// work over wall time, report/report.cc UtilizationOf): the target's step is all
// work, and a host that builds its step more slowly than the step adds the
// difference as infeed wait. The verdict is the measured step's rule. Without a
// modeled device step the pod's step is unknown — the cross-replica sum on ICI
// alone (microseconds) is no step — so there is no demand and no verdict.
void SetStepFigures(PodProjectionSection& p) {
  const double step_s = p.target_step_s;
  p.projected_infeed_wait_s_per_step = std::max(0.0, InputSecondsPerStep(p.hosts) - step_s);
  if (p.device_step_s <= 0) {
    p.verdict = std::string("unknown: ") + kUnknownStepReason;
    return;
  }
  p.demand_examples_per_s_per_host = static_cast<double>(MostExamplesPerStep(p.hosts)) / step_s;
  const double wall_s = step_s + p.projected_infeed_wait_s_per_step;
  p.projected_infeed_fraction = p.projected_infeed_wait_s_per_step / wall_s;
  // The device works for the step but for what it waits on DCN, as it does not
  // work while it waits for infeed.
  p.projected_au = (step_s - (p.dcn ? p.dcn->exposed_s : 0.0)) / wall_s;
  p.verdict = Verdict(100 * *p.projected_infeed_fraction);
}

std::vector<std::string> Assumptions(const PodProjectionInputs& in) {
  const run::TargetHost& t = in.target;
  const StageLanes lanes = LanesOf(in.config, t);
  return {
      "stages independent and pipelined: every stage works at once at its own capacity, so the "
      "bound stage (the least capacity) sets the host's rate",
      fmt::format("no framework overhead beyond input_vcpus: the input pipeline has {:g} of the "
                  "host's {:g} vCPUs to itself ({})",
                  t.input_vcpus.value, t.vcpus.value, t.input_vcpus.source),
      fmt::format("cpu_speed as given: one target vCPU does {:g}x the work of one core of this "
                  "machine ({}); modeled costs (input.cpu_us_per_example, the storage model) are "
                  "the target's own and not scaled",
                  t.cpu_speed.value, t.cpu_speed.source),
      fmt::format("the target pipeline's workers: {:g} (target_host.input_workers, {}), not the "
                  "threads that emulate it here (infeed.parallelism {}); a worker's whole step "
                  "(its fill and packing, one after the other) on {:g}, file read, "
                  "preprocessing and emulated preprocessing on {:g}{}, shuffle and enqueue (one "
                  "sender thread per host) on 1",
                  t.input_workers.value, t.input_workers.source, in.config.infeed.parallelism, lanes.workers,
                  lanes.build,
                  in.config.input.source == run::InputSource::kFiles
                      ? " (the files source builds its one stream a step at a time, as its "
                        "pipeline is built: more workers do not speed it)"
                      : ""),
      fmt::format("hosts that run the same pipeline on the same shapes share one estimate of "
                  "each stage's CPU per example, the median over them (hosts at {:g}x the median "
                  "are named in outliers and do not bind); modeled costs stay each host's own",
                  kOutlierRatio),
      fmt::format("input.prefetch ({} steps) is memory, set against target_host.memory_gib; "
                  "it does not set the workers",
                  PrefetchSteps(in.config)),
      "the target's step is the device model's time (device.step_time, not as slept on this "
      "machine) plus the cross-replica sum on ICI plus, with an embedding, its all-to-all and "
      "the most-loaded core's lookups and updates (pod_projection.embedding), and the infeed "
      "transfer overlaps it",
      "a stage that cost nothing here is unlimited (capacity null) and left out of the least",
  };
}

// The sparse enqueue and Shampoo's service on the target, for a known step only
// (a zero device step leaves the target step unknown).
void AddWorkloads(const PodProjectionInputs& in, PodProjectionSection& p) {
  const double step_s = p.device_step_s > 0 ? p.target_step_s : 0.0;
  std::vector<SparseHostInput> sparse;
  for (const HostCosts& h : in.hosts) {
    const HostCalibration* calibration = CalibrationOf(in.calibrations, {h.examples_per_step, h.fed_cores});
    sparse.push_back(
        {h.host, h.examples_per_step, h.sparse, calibration ? CalibratedCpuPerId(*calibration) : std::nullopt});
  }
  p.sparse_enqueue =
      ProjectSparseEnqueue(sparse, LanesOf(in.config, in.target).workers, in.target.cpu_speed.value, step_s);
  p.shampoo = ProjectShampoo(in.shampoo, in.target.cpu_speed.value, step_s);
}

// The target's step: the device, the sum inside each slice on ICI and the
// embedding, then the all-reduce between slices added (dcn.overlap none) or
// hidden under the rest (full: the longer of the two).
// Sets the DCN term's exposed_s, what the step waits for it.
double TargetStepSeconds(const PodProjectionInputs& in, PodProjectionSection& p) {
  const double inside = in.device_step_s + in.ici_crs_s_per_step + (p.embedding ? p.embedding->step_s : 0.0);
  if (!p.dcn) return inside;
  const double step_s =
      in.dcn.overlap == run::DcnOverlap::kNone ? inside + p.dcn->s_per_step : std::max(inside, p.dcn->s_per_step);
  p.dcn->exposed_s = step_s - inside;
  return step_s;
}

std::string DcnAssumption(const DcnProjection& d) {
  return fmt::format(
      "{} slices join over the data-centre network once per step: each reduces inside itself on ICI, then "
      "2(S-1)/S of one slice's gradient bytes ({:.4g} MB) cross DCN, spread over its {} hosts at {:g} Gbit/s "
      "each ({}), plus 2(S-1) messages of {:g} us one after another ({}); dcn.overlap {}",
      d.slices, d.gradient_bytes_per_step / 1e6, d.hosts_per_slice, d.gbps_per_host, d.gbps_source, d.latency_s * 1e6,
      d.latency_source,
      d.overlap == "none" ? "none: it adds to the step" : "full: it hides under the rest of the step");
}

}  // namespace

std::optional<DcnProjection> ProjectDcn(const DcnInputs& in) {
  if (in.slices <= 1) return std::nullopt;
  DcnProjection d;
  const double s = in.slices;
  d.slices = in.slices;
  d.hosts_per_slice = in.hosts_per_slice;
  d.gradient_bytes_per_step = in.gradient_bytes_per_step;
  d.bytes_per_host_per_step = 2 * (s - 1) / s * in.gradient_bytes_per_step / std::max(in.hosts_per_slice, 1);
  d.gbps_per_host = in.gbps_per_host;
  d.gbps_source = in.gbps_source;
  d.latency_s = in.latency_us * 1e-6;
  d.latency_source = in.latency_source;
  d.bandwidth_s = in.gbps_per_host > 0 ? d.bytes_per_host_per_step / (in.gbps_per_host * 1e9 / 8) : 0.0;
  d.latency_total_s = 2 * (s - 1) * d.latency_s;
  d.s_per_step = d.bandwidth_s + d.latency_total_s;
  d.overlap = std::string(run::SpellingOf(in.overlap));
  return d;
}

PodProjectionSection ProjectPod(const PodProjectionInputs& in) {
  PodProjectionSection p;
  p.target_host = in.target;
  for (const HostCosts& h : in.hosts) p.hosts.push_back(ProjectHost(in, h));
  p.outliers = ShareEstimates(p.hosts, in);
  p.device_step_s = in.device_step_s;
  p.embedding = ProjectEmbeddingStep(in.embedding_cores, in.ici_link_gbps, in.hbm_gbps_per_core);
  if (p.embedding) {
    p.embedding->table_bytes_per_core = in.tables.bytes_per_core;
    if (in.tables.hbm_bytes_per_core > 0) {
      p.embedding->hbm_bytes_per_core = in.tables.hbm_bytes_per_core;
      p.embedding->tables_fit_hbm = in.tables.fit;
    }
    p.embedding->tables_line = in.tables.line;
  }
  p.dcn = ProjectDcn(in.dcn);
  p.target_step_s = TargetStepSeconds(in, p);
  if (p.dcn && p.device_step_s > 0) p.dcn->share_of_step = p.dcn->s_per_step / p.target_step_s;
  SetLeastHost(p);
  SetStepFigures(p);
  AddWorkloads(in, p);
  p.this_machine = {in.machine.cpus, in.machine.tpu_hosts,
                    "this machine (rank 0's), not the pod: its cores are shared by the TPU hosts "
                    "it plays; a host's this_machine_examples_per_s is the most its share could "
                    "carry at the simulator's own CPU per example, for the whole run"};
  p.assumes = Assumptions(in);
  if (p.dcn) p.assumes.push_back(DcnAssumption(*p.dcn));
  p.cost_source = CostSourceOf(in);
  p.assumes.push_back(CostSourceAssumption(*p.cost_source));
  return p;
}

}  // namespace tpusim::report
