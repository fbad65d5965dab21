#include "sim/host/input_pipeline.h"

#include <algorithm>
#include <cmath>
#include <condition_variable>
#include <map>
#include <mutex>
#include <optional>

#include "base/error.h"
#include "infeed/cached_source.h"
#include "infeed/file_pipeline.h"
#include "infeed/file_source.h"
#include "infeed/modeled_worker_pool.h"
#include "infeed/tfrecord_source.h"
#include "run/model_inputs.h"
#include "run/run_features.h"

namespace tpusim::sim::host {

// Outside the anonymous namespace: InputPipeline::Impl holds one, and a unity
// build's Impl must not have a member of an internal-linkage type (-Wsubobject-linkage).
namespace internal {

// Runs the file pipeline's steps one at a time in step order, whichever worker
// gets which step, so a host's stream (and its shuffle) does not depend on timing.
// A failed step fails every later one instead of leaving their workers waiting.
class StepSequencer {
 public:
  template <typename F>
  void Run(int64_t step, F&& work) {
    std::unique_lock lock(mu_);
    turn_.wait(lock, [&] { return next_ == step || failed_; });
    if (failed_) Fail("input pipeline: step {} not built, an earlier step failed", step);
    Guarded(work);
    ++next_;
    turn_.notify_all();
  }

  // Runs `work` between two steps' turns, whichever step is next: a step's
  // later draws from the stream (records that replace corrupt ones).
  template <typename F>
  void Exclusive(F&& work) {
    std::lock_guard lock(mu_);
    if (failed_) Fail("input pipeline: an earlier step failed");
    Guarded(work);
  }

 private:
  // Runs `work` with mu_ held; its failure fails every later step.
  template <typename F>
  void Guarded(F& work) {
    try {
      work();
    } catch (...) {
      failed_ = true;
      turn_.notify_all();
      throw;
    }
  }

  std::mutex mu_;
  std::condition_variable turn_;
  int64_t next_ = 0;
  bool failed_ = false;
};

}  // namespace internal

namespace {

// faults.slow_hosts of `host`: how much longer its workers take from a step on.
double SlowHostFactor(const std::vector<run::FaultsConfig::SlowHost>& slow_hosts, int host, int64_t step) {
  double factor = 1;
  for (const run::FaultsConfig::SlowHost& h : slow_hosts) {
    if (h.host == host && step >= h.from_step) factor *= h.factor;
  }
  return factor;
}

// One pass of the pool: the example ids of the first cache_steps steps' host batches.
std::vector<std::vector<int64_t>> PoolIds(const run::RunConfig& run, const infeed::InfeedPlan& plan,
                                          const infeed::HostPlan& host) {
  std::vector<std::vector<int64_t>> ids;
  for (int64_t p = 0; p < run.input.cache_steps; ++p) ids.push_back(plan.ExampleIds(p, host));
  return ids;
}

// What the stream's read and CRC stages took between two readings.
infeed::TfRecordStageCosts StreamDelta(const infeed::TfRecordStageCosts& before,
                                       const infeed::TfRecordStageCosts& after) {
  infeed::TfRecordStageCosts d;
  d.read = {after.read.wall_s - before.read.wall_s, after.read.cpu_s - before.read.cpu_s};
  d.crc = {after.crc.wall_s - before.crc.wall_s, after.crc.cpu_s - before.crc.cpu_s};
  d.records_read = after.records_read - before.records_read;
  d.skipped_records = after.skipped_records - before.skipped_records;
  d.file_bytes = after.file_bytes - before.file_bytes;
  return d;
}

// The tfrecord source's stages as the host's StageCosts count them.
infeed::StageCosts AsStageCosts(const infeed::TfRecordStageCosts& c) {
  infeed::StageCosts costs;
  costs.file_read_cpu_s = c.read.cpu_s + c.crc.cpu_s;
  costs.preprocessing_cpu_s = c.parse.cpu_s + c.decode.cpu_s + c.resize.cpu_s + c.batch.cpu_s;
  costs.file_bytes = c.file_bytes;
  return costs;
}

// The tfrecord source's figures for the report: per-example stage costs.
TfRecordStages TfRecordReport(const infeed::TfRecordSource& source, const infeed::TfRecordStageCosts& c) {
  TfRecordStages out;
  out.files_total = static_cast<int64_t>(source.files().size());
  out.files = source.files();
  out.records_read = c.records_read;
  out.skipped_records = c.skipped_records;
  out.examples = c.examples;
  out.sharding_note = source.sharding_note();
  const double n = c.examples > 0 ? static_cast<double>(c.examples) : 1.0;
  auto per = [n](const infeed::TfRecordStageCosts::Stage& s) {
    return TfRecordStages::PerExample{s.wall_s / n, s.cpu_s / n};
  };
  out.read = per(c.read);
  out.crc = per(c.crc);
  out.parse = per(c.parse);
  out.decode = per(c.decode);
  out.resize = per(c.resize);
  out.batch = per(c.batch);
  return out;
}

}  // namespace

struct InputPipeline::Impl {
  SteadyClock clock;
  const run::RunConfig& run;
  const infeed::InfeedPlan& plan;
  const int host;
  const infeed::HostPlan* host_plan = nullptr;
  int64_t first_step = 0;                         // --resume: the infeed position this run starts at
  std::optional<infeed::ModeledWorkerPool> pool;  // cost_mode emulate
  std::optional<infeed::SyntheticSource> synthetic;
  std::optional<infeed::FileSource> files;
  std::optional<infeed::FilePipeline> file_pipeline;
  std::optional<infeed::CachedSource> cached;
  std::optional<infeed::TfRecordSource> tfrecord;
  mutable std::mutex decode_mu_;
  infeed::TfRecordStageCosts decode_costs;                    // the workers' parse, decode, resize, batch
  std::map<int64_t, infeed::TfRecordStageCosts> step_costs_;  // built, not yet sent
  internal::StepSequencer sequencer;
  infeed::StageCostsSum worker_costs;  // of synthetic fills and slow-host work
  // The sources' costs (worker_costs', the files and tfrecord streams', the
  // tfrecord workers') of the steps before the report's window (InWarmup).
  int64_t window_first_step = 0;
  infeed::StageCostsSum warmup_costs;

  Impl(const run::RunConfig& r, const infeed::InfeedPlan& p, int h, int num_hosts, int modeled_workers,
       infeed::SharedStorage* shared_storage)
      : run(r), plan(p), host(h) {
    host_plan = plan.host_plan(host);
    if (!host_plan) return;
    const run::InputConfig& input = run.input;
    if (input.cost_mode == run::InputConfig::CostMode::kEmulate) pool.emplace(modeled_workers, clock);
    if (input.source == run::InputSource::kFiles) {
      OpenFiles(num_hosts, shared_storage);
    } else if (input.source == run::InputSource::kTfRecord) {
      OpenTfRecords(num_hosts);
    } else if (input.source == run::InputSource::kCached) {
      cached.emplace(MakeSyntheticData(run), PoolIds(run, plan, *host_plan));
    } else {
      infeed::SyntheticConfig config;
      config.seed = input.seed;
      config.features = FeatureSpecs(input);
      config.label = RunLabel(run);
      config.max_examples_per_sec = input.max_examples_per_sec;
      config.cpu_us_per_example = input.cpu_us_per_example;
      config.pool = pool ? &*pool : nullptr;
      synthetic.emplace(std::move(config), clock);
    }
  }

  void OpenFiles(int num_hosts, infeed::SharedStorage* shared_storage) {
    const run::InputConfig& input = run.input;
    // Per-host mode: every host reads its own shards; single-host: host 0 reads all.
    int readers = plan.per_host() ? num_hosts : 1;
    files.emplace(input.data_dir, RunFeatureSpecs(run), host, readers, input.storage, &clock, shared_storage);
    infeed::FilePipelineOptions options;
    options.shuffle_buffer = input.shuffle_buffer;
    // Each host shuffles with its own draws.
    options.seed = input.seed ^ (static_cast<uint64_t>(host) << 32);
    options.cpu_us_per_example = input.cpu_us_per_example;
    options.max_examples_per_sec = input.max_examples_per_sec;
    options.pool = pool ? &*pool : nullptr;
    file_pipeline.emplace(*files, options, clock);
  }

  void OpenTfRecords(int num_hosts) {
    const run::InputConfig& input = run.input;
    const int readers = plan.per_host() ? num_hosts : 1;
    tfrecord.emplace(infeed::ExpandFilePatterns(input.files), ExampleFeatureSpecs(input), host, readers,
                     TfRecordOptionsOf(input), run.infeed.parallelism, input.shuffle_buffer,
                     infeed::TfRecordHostSeed(input.seed, host), &clock);
  }

  // The stream (read, CRC, shuffle) one step at a time in step order; the
  // per-example work on this worker, beside the other workers' steps.
  void FillTfRecord(int64_t step, infeed::Batch& batch, std::span<int64_t> ids) {
    std::vector<infeed::RawRecord> records;
    infeed::TfRecordStageCosts step_costs;
    sequencer.Run(step, [&] {
      const infeed::TfRecordStageCosts before = tfrecord->stream_costs();
      records = tfrecord->NextRecords(static_cast<int64_t>(ids.size()));
      step_costs = StreamDelta(before, tfrecord->stream_costs());
    });
    infeed::TfRecordStageCosts costs;
    // With skip_corrupt, corrupt records are replaced by the stream's next ones,
    // drawn after whichever steps drew before them (with several workers, which
    // step a replacement lands in depends on their timing).
    tfrecord->Decode(records, batch, ids, costs, [&](int64_t n) {
      std::vector<infeed::RawRecord> more;
      sequencer.Exclusive([&] {
        const infeed::TfRecordStageCosts before = tfrecord->stream_costs();
        more = tfrecord->NextRecords(n);
        step_costs += StreamDelta(before, tfrecord->stream_costs());
      });
      return more;
    });
    step_costs += costs;
    if (InWarmup(step)) warmup_costs.Add(AsStageCosts(step_costs));
    std::lock_guard lock(decode_mu_);
    decode_costs += costs;
    step_costs_[step] = step_costs;
  }

  infeed::TfRecordStageCosts TakeStepCosts(int64_t step) {
    std::lock_guard lock(decode_mu_);
    auto found = step_costs_.find(step);
    if (found == step_costs_.end()) return {};
    infeed::TfRecordStageCosts costs = found->second;
    step_costs_.erase(found);
    return costs;
  }

  // All stages of the tfrecord source: the stream's and the workers'.
  infeed::TfRecordStageCosts TfRecordCosts() const {
    infeed::TfRecordStageCosts costs = tfrecord->stream_costs();
    std::lock_guard lock(decode_mu_);
    costs += decode_costs;
    return costs;
  }

  bool InWarmup(int64_t step) const { return step < window_first_step; }

  void AddWorkerCosts(int64_t step, const infeed::StageCosts& costs) {
    worker_costs.Add(costs);
    if (InWarmup(step)) warmup_costs.Add(costs);
  }

  // A slow host's factor on the modeled work per example: emulated, its workers
  // wait out factor x the work; burnt, the work is spun as configured and the
  // factor comes in after the build (SlowDown), as it always has. A factor below
  // 1 changes nothing in either mode.
  double CostFactor(int64_t step) const {
    return pool ? std::max(1.0, SlowHostFactor(run.faults.slow_hosts, host, step)) : 1.0;
  }

  // A dataset's labels (tfrecord, or files not written by gen-data) against the
  // loss; the synthetic teacher's always fit it.
  void CheckDatasetLabels(int64_t step, const infeed::Batch& batch, std::span<const int64_t> ids) const {
    if (!batch.Contains(run::kLabel)) return;
    const infeed::Tensor& labels = batch.at(run::kLabel);
    run::CheckLabels(run, {run::kLabel, labels.dtype(), {}}, labels.bytes().data(), ids, step);
  }

  void Fill(int64_t step, infeed::Batch& batch, std::span<int64_t> ids) {
    if (tfrecord) {
      FillTfRecord(step, batch, ids);
      CheckDatasetLabels(step, batch, ids);
      return;
    }
    if (file_pipeline) {
      sequencer.Run(step, [&] {
        const infeed::StageCosts before = file_pipeline->costs();
        file_pipeline->Next(batch, ids, CostFactor(step));
        if (!InWarmup(step)) return;
        infeed::StageCosts step_costs = file_pipeline->costs();
        step_costs -= before;
        warmup_costs.Add(step_costs);
      });
      CheckDatasetLabels(step, batch, ids);
      return;
    }
    if (!synthetic)
      Fail("input pipeline: the {} source sends borrowed batches, not filled ones", run::SpellingOf(run.input.source));
    plan.ExampleIds(first_step + step, *host_plan, ids);
    infeed::StageCosts costs;
    synthetic->ReadInto(ids, batch, CostFactor(step), &costs);
    AddWorkerCosts(step, costs);
  }

  bool SlowFromSomeStep() const {
    for (const run::FaultsConfig::SlowHost& h : run.faults.slow_hosts) {
      if (h.host == host && h.factor > 1) return true;
    }
    return false;
  }

  // faults.slow_hosts after a worker built `step`: the rest of "its workers take
  // factor x as long". Burnt, (factor - 1) x the build's wall time is spun (the
  // modeled work spun in it included); emulated, the modeled work was already
  // paid x factor, so (factor - 1) x the build's real CPU is waited out on a
  // modeled worker.
  void SlowDown(int64_t step, double build_s, double build_cpu_s) {
    const double factor = SlowHostFactor(run.faults.slow_hosts, host, step);
    if (factor <= 1) return;
    infeed::StageCosts extra;
    if (pool) {
      const int64_t us = std::llround((factor - 1) * build_cpu_s * 1e6);
      pool->Charge(us);
      extra.modeled_preprocessing_s = static_cast<double>(us) * 1e-6;
    } else {
      const auto us = static_cast<int64_t>((factor - 1) * build_s * 1e6);
      clock.SpinUs(us);
      extra.modeled_preprocessing_s = static_cast<double>(us) * 1e-6;
    }
    AddWorkerCosts(step, extra);
  }

  const infeed::Batch& Borrow(int64_t step, std::span<int64_t> ids) const {
    plan.ExampleIds(step, *host_plan, ids);
    return cached->BatchFor(step);
  }

  infeed::StageTimes Times(const infeed::HostFeedStats& feed) const {
    infeed::StageTimes times;
    if (file_pipeline) {
      times = file_pipeline->times();
    } else if (tfrecord) {
      // The stream runs on one worker at a time; the per-example work on all of
      // them at once, so its time counts per worker.
      const infeed::TfRecordStageCosts c = TfRecordCosts();
      times.file_read_s = c.read.wall_s + c.crc.wall_s;
      times.preprocessing_s =
          (c.parse.wall_s + c.decode.wall_s + c.resize.wall_s + c.batch.wall_s) / run.infeed.parallelism;
    } else if (!cached) {
      // Generating a step is all its building: the workers' time building steps
      // (filling, allocating, encoding), per worker. The cached source builds
      // nothing: its steps are borrowed, and the hand-off is no stage of the
      // pipeline (under load it can outlast the enqueue and would name a bound
      // that does not exist).
      times.preprocessing_s = feed.build_s / run.infeed.parallelism;
    }
    times.enqueue_s = feed.send_s;
    return times;
  }

  // The transport's costs (enqueue, examples, device bytes) with the sources'.
  infeed::StageCosts Costs(const infeed::HostFeedStats& feed) const {
    infeed::StageCosts costs = feed.costs;
    costs += worker_costs.total();
    if (file_pipeline) costs += file_pipeline->costs();
    if (tfrecord) costs += AsStageCosts(TfRecordCosts());
    return costs;
  }

  // Costs(feed) over the report's window: the warm-up's left out.
  infeed::StageCosts WindowCosts(const infeed::HostFeedStats& feed) const {
    infeed::StageCosts costs = Costs(feed);
    costs -= feed.warmup_costs;
    costs -= warmup_costs.total();
    return costs;
  }
};

InputPipeline::InputPipeline(const run::RunConfig& config, const infeed::InfeedPlan& plan, int host, int num_hosts,
                             int modeled_workers, infeed::SharedStorage* shared_storage)
    : impl_(std::make_unique<Impl>(config, plan, host, num_hosts, modeled_workers, shared_storage)) {}

InputPipeline::~InputPipeline() = default;

void InputPipeline::StartAt(int64_t first_step) { impl_->first_step = first_step; }

infeed::BatchFiller InputPipeline::Filler() {
  return [impl = impl_.get()](int64_t step, infeed::Batch& batch, std::span<int64_t> ids) {
    impl->Fill(step, batch, ids);
  };
}

void InputPipeline::Configure(infeed::TransportOptions& options) {
  options.prefetch = impl_->run.input.prefetch;
  impl_->window_first_step = options.window_first_step;
  if (!impl_->cached) return;
  options.borrow_batch = [impl = impl_.get()](int64_t step, std::span<int64_t> ids) -> const infeed::Batch& {
    return impl->Borrow(step, ids);
  };
}

void InputPipeline::StepBuilt(int64_t step, double build_s, double build_cpu_s) {
  if (impl_->SlowFromSomeStep()) impl_->SlowDown(step, build_s, build_cpu_s);
}

infeed::TfRecordStageCosts InputPipeline::TakeStepCosts(int64_t step) {
  return impl_->tfrecord ? impl_->TakeStepCosts(step) : infeed::TfRecordStageCosts{};
}

std::optional<PipelineStages> InputPipeline::Stages(const infeed::HostFeedStats& feed) const {
  if (!impl_->host_plan) return std::nullopt;
  PipelineStages out;
  out.stages = impl_->Times(feed);
  out.costs = impl_->Costs(feed);
  out.window_costs = impl_->WindowCosts(feed);
  out.bound_by = infeed::BoundBy(out.stages, feed.build_wait_s);
  out.cost_mode = impl_->pool ? "emulate" : "burn";
  out.modeled_workers = impl_->pool ? impl_->pool->workers() : 0;
  out.simulator_cpu_s_per_example = infeed::SimulatorCpuSecondsPerExample(out.window_costs);
  if (impl_->tfrecord) out.tfrecord = TfRecordReport(*impl_->tfrecord, impl_->TfRecordCosts());
  if (impl_->files && impl_->run.input.storage.direct_io) {
    const std::string refusal = impl_->files->direct_io_refusal();
    out.direct_io = DirectIoStatus{refusal.empty(), refusal};
  }
  return out;
}

}  // namespace tpusim::sim::host
