#include "sim/host/pipeline_calibration.h"

#include <algorithm>
#include <barrier>
#include <exception>
#include <map>
#include <mutex>
#include <string>
#include <thread>
#include <utility>

#include "base/clock.h"
#include "base/error.h"
#include "base/median.h"
#include "infeed/cpu_timer.h"
#include "infeed/feature_spec.h"

namespace tpusim::sim::host {
namespace {

// The sources' costs so far (the transport's part, none here, left empty).
infeed::StageCosts SourceCosts(const InputPipeline& pipeline) {
  const std::optional<PipelineStages> stages = pipeline.Stages(infeed::HostFeedStats{});
  return stages ? stages->costs : infeed::StageCosts{};
}

// Runs the calibration on `workers` threads, each of which builds its warm-up
// step and then, once every worker has (a barrier), measured steps until the
// limits say stop. Warm-up and measurement run on the same threads: a thread's
// first fill pays for its own set-up (allocator caches, the decoder's state), which
// a measured step on a fresh thread would count: in the sanitized build, JPEG
// passes of one step on a fresh thread measured ~6 ms per example, of two steps
// ~3.9 ms.
class Calibration {
 public:
  Calibration(InputPipeline& pipeline, const infeed::InfeedPlan& plan, int64_t rows, int workers,
              const CalibrationLimits& limits)
      : pipeline_(pipeline),
        fill_(pipeline.Filler()),
        plan_(plan),
        rows_(rows),
        workers_(workers),
        limits_(limits),
        warmed_(workers, OnWarmed{this}) {}

  PipelineCalibration Run(int host) {
    std::vector<std::thread> threads;
    for (int w = 0; w < workers_; ++w) threads.emplace_back([this] { Work(); });
    for (std::thread& t : threads) t.join();
    return Result(host);
  }

 private:
  struct OnWarmed {
    Calibration* self;
    void operator()() noexcept { self->StartMeasuring(); }
  };

  void Work() {
    infeed::Batch batch = infeed::MakeBatch(plan_.features(), rows_);
    std::vector<int64_t> ids(static_cast<size_t>(rows_));
    double unused_cpu_s = 0;
    int64_t step = 0;
    if (Take(step)) Fill(step, batch, ids, unused_cpu_s);  // the warm-up step
    warmed_.arrive_and_wait();
    double cpu_s = 0;
    int64_t steps = 0;
    while (Take(step) && Fill(step, batch, ids, cpu_s)) ++steps;
    std::lock_guard lock(mu_);
    fill_cpu_s_ += cpu_s;
    steps_ += steps;
  }

  // One fill, its thread CPU added to `cpu_s`; false (and the failure kept) if it threw.
  bool Fill(int64_t step, infeed::Batch& batch, std::vector<int64_t>& ids, double& cpu_s) {
    try {
      infeed::ScopedCpuTimer timer(&cpu_s);
      fill_(step, batch, ids);
      return true;
    } catch (const std::exception& e) {
      std::lock_guard lock(mu_);
      if (failure_.empty()) failure_ = e.what();
      stopped_ = true;
      return false;
    }
  }

  // On the barrier's completion, once: the costs and the time the measurement starts from.
  void StartMeasuring() {
    first_measured_ = next_;
    before_ = SourceCosts(pipeline_);
    start_s_ = MonotonicSeconds();
  }

  // The next step, if one is still wanted; once none is, none after. Under the
  // lock, so steps are taken in order: the files and tfrecord sources build steps
  // strictly in turn, and a step skipped while a later one was taken would leave
  // that one's worker waiting for ever. Warm-up: the first `workers` steps.
  bool Take(int64_t& step) {
    std::lock_guard lock(mu_);
    if (stopped_ || !Wanted(next_)) {
      stopped_ = first_measured_ >= 0;  // before the barrier, only the measurement's start is awaited
      return false;
    }
    step = next_++;
    return true;
  }

  bool Wanted(int64_t step) const {
    if (step < workers_) return true;                    // a warm-up step
    if (first_measured_ < 0) return false;               // warm-up done; wait at the barrier
    if (step < first_measured_ + workers_) return true;  // one measured step per worker
    const double wall = MonotonicSeconds() - start_s_;
    if (wall >= limits_.max_wall_s) return false;
    return wall < limits_.min_wall_s || (step - first_measured_) * rows_ < limits_.enough_examples;
  }

  PipelineCalibration Result(int host) const {
    PipelineCalibration out;
    out.host = host;
    out.workers = workers_;
    if (!failure_.empty()) {
      out.note = "the pipeline failed when run again: " + failure_;
      return out;
    }
    out.seconds = MonotonicSeconds() - start_s_;
    out.costs = SourceCosts(pipeline_);
    out.costs -= before_;
    out.steps = steps_;
    out.examples = steps_ * rows_;
    out.costs.examples = out.examples;
    out.costs.build_cpu_s = fill_cpu_s_;
    return out;
  }

  InputPipeline& pipeline_;
  infeed::BatchFiller fill_;
  const infeed::InfeedPlan& plan_;
  int64_t rows_;
  int workers_;
  CalibrationLimits limits_;
  std::barrier<OnWarmed> warmed_;
  std::mutex mu_;
  int64_t next_ = 0;
  int64_t first_measured_ = -1;
  bool stopped_ = false;
  std::string failure_;
  infeed::StageCosts before_;
  double start_s_ = 0;
  double fill_cpu_s_ = 0;
  int64_t steps_ = 0;
};

}  // namespace

std::vector<int> CalibratingHosts(const infeed::InfeedPlan& plan, int num_hosts) {
  std::map<std::pair<int64_t, size_t>, int> first_of_class;
  for (int h = 0; h < num_hosts; ++h) {
    const infeed::HostPlan* hp = plan.host_plan(h);
    if (hp && hp->rows_per_step > 0) first_of_class.try_emplace({hp->rows_per_step, hp->shards.size()}, h);
  }
  std::vector<int> hosts;
  for (const auto& [shape, host] : first_of_class) hosts.push_back(host);
  std::sort(hosts.begin(), hosts.end());
  return hosts;
}

// At least this many measured steps: the figure is their median, so one step
// another process preempted does not set it (three 65,536-example DLRM runs, 8
// Dec, read 12.5, 11.7 and 19.2 ns per id from the sum of two steps each).
constexpr int64_t kSparseSteps = 5;

SparseEnqueueCosts CalibrateSparseEnqueue(const embedding::EmbeddingConfig& config, uint64_t seed,
                                          const infeed::InfeedPlan& plan, int host, const CalibrationLimits& limits) {
  const infeed::HostPlan& hp = *plan.host_plan(host);
  wire::EmbeddingEnqueue enqueue(config, seed, /*window_first_step=*/1);
  std::vector<int64_t> ids(static_cast<size_t>(hp.rows_per_step));
  std::vector<std::byte> trailer;
  std::vector<double> coo_s_per_id;  // each measured step's
  double start_s = 0;
  for (int64_t step = 0;; ++step) {
    if (step == 1) start_s = MonotonicSeconds();
    const wire::EnqueueCosts before = enqueue.costs();
    plan.ExampleIds(step, hp, ids);
    for (const infeed::ShardRoute& route : hp.shards) enqueue.Encode(step, ids, route, trailer);
    if (step == 0) continue;  // the warm-up step
    const wire::EnqueueCosts after = enqueue.costs();
    if (after.ids > before.ids) {
      coo_s_per_id.push_back(static_cast<double>(after.coo_cpu_ns - before.coo_cpu_ns) * 1e-9 /
                             static_cast<double>(after.ids - before.ids));
    }
    const double wall = MonotonicSeconds() - start_s;
    if (wall >= kSparseSteps * limits.max_wall_s) break;  // a bound for very large batches
    if (step < kSparseSteps) continue;
    if (wall >= limits.max_wall_s) break;
    if (wall >= limits.min_wall_s && step * hp.rows_per_step >= limits.enough_examples) break;
  }
  SparseEnqueueCosts costs = SparseEnqueueOf(enqueue.costs());
  if (!coo_s_per_id.empty()) costs.coo_cpu_s = Median(coo_s_per_id) * static_cast<double>(costs.ids);
  return costs;
}

SparseEnqueueCosts SparseEnqueueOf(const wire::EnqueueCosts& c) {
  return {c.ids, c.examples, static_cast<double>(c.id_generation_cpu_ns) * 1e-9,
          static_cast<double>(c.coo_cpu_ns) * 1e-9};
}

PipelineCalibration CalibratePipeline(InputPipeline& pipeline, const infeed::InfeedPlan& plan, int host, int workers,
                                      const CalibrationLimits& limits) {
  const int64_t rows = plan.host_plan(host)->rows_per_step;
  return Calibration(pipeline, plan, rows, std::max(workers, 1), limits).Run(host);
}

}  // namespace tpusim::sim::host
