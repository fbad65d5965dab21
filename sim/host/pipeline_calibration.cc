#include "sim/host/pipeline_calibration.h"

#include <algorithm>
#include <exception>
#include <map>
#include <mutex>
#include <string>
#include <thread>
#include <utility>

#include "base/clock.h"
#include "base/error.h"
#include "infeed/cpu_timer.h"
#include "infeed/feature_spec.h"

namespace tpusim::sim::host {
namespace {

// What the workers of one phase did: their thread CPU over the fills, the steps
// they built and the first failure, if any.
struct PhaseResult {
  double fill_cpu_s = 0;
  int64_t steps = 0;
  std::string failure;
};

// Hands out steps from `first` on until `more(step)` says no, to `workers`
// threads that each fill the steps they take into their own batch.
class Phase {
 public:
  Phase(InputPipeline& pipeline, const infeed::InfeedPlan& plan, int64_t rows)
      : fill_(pipeline.Filler()), plan_(plan), rows_(rows) {}

  template <typename More>
  PhaseResult Run(int workers, int64_t first, More more) {
    next_ = first;
    stopped_ = false;
    std::vector<std::thread> threads;
    for (int w = 0; w < workers; ++w) threads.emplace_back([&] { Work(more); });
    for (std::thread& t : threads) t.join();
    return std::exchange(result_, {});
  }

 private:
  template <typename More>
  void Work(More& more) {
    infeed::Batch batch = infeed::MakeBatch(plan_.features(), rows_);
    std::vector<int64_t> ids(static_cast<size_t>(rows_));
    double cpu_s = 0;
    int64_t steps = 0;
    std::string failure;
    for (int64_t step = 0; Take(more, step);) {
      try {
        infeed::ScopedCpuTimer timer(&cpu_s);
        fill_(step, batch, ids);
        ++steps;
      } catch (const std::exception& e) {
        failure = e.what();
        break;
      }
    }
    std::lock_guard lock(mu_);
    result_.fill_cpu_s += cpu_s;
    result_.steps += steps;
    if (result_.failure.empty()) result_.failure = failure;
  }

  // The next step, if `more` still wants one; once it does not, none after. Under
  // the lock, so steps are taken in the order `more` judged them: the files and
  // tfrecord sources build steps strictly in turn, and a step skipped while a
  // later one was taken would leave that one's worker waiting for ever.
  template <typename More>
  bool Take(More& more, int64_t& step) {
    std::lock_guard lock(take_mu_);
    if (stopped_ || !more(next_)) {
      stopped_ = true;
      return false;
    }
    step = next_++;
    return true;
  }

  infeed::BatchFiller fill_;
  const infeed::InfeedPlan& plan_;
  int64_t rows_;
  std::mutex take_mu_;
  int64_t next_ = 0;
  bool stopped_ = false;
  std::mutex mu_;
  PhaseResult result_;
};

// The sources' costs so far (the transport's part, none here, left empty).
infeed::StageCosts SourceCosts(const InputPipeline& pipeline) {
  const std::optional<PipelineStages> stages = pipeline.Stages(infeed::HostFeedStats{});
  return stages ? stages->costs : infeed::StageCosts{};
}

// One pass's share of CalibrationLimits.
struct PassLimits {
  double max_wall_s;
  double min_wall_s;
  int64_t enough_examples;
};

// One measured pass from step `first` on, every worker building at least one
// step: `base` with the pass's steps, examples, seconds and costs; on a failure
// of the source, `base` with no costs and the note naming it.
PipelineCalibration MeasurePass(Phase& phase, const InputPipeline& pipeline, const PipelineCalibration& base,
                                int64_t first, int64_t rows, const PassLimits& limits) {
  const infeed::StageCosts before = SourceCosts(pipeline);
  const double start = MonotonicSeconds();
  const PhaseResult measured = phase.Run(base.workers, first, [&](int64_t step) {
    const double wall = MonotonicSeconds() - start;
    if (step < first + base.workers) return true;
    if (wall >= limits.max_wall_s) return false;
    return wall < limits.min_wall_s || (step - first) * rows < limits.enough_examples;
  });
  PipelineCalibration pass = base;
  if (!measured.failure.empty()) {
    pass.note = "the pipeline failed when run again: " + measured.failure;
    return pass;
  }
  pass.seconds = MonotonicSeconds() - start;
  pass.costs = SourceCosts(pipeline);
  pass.costs -= before;
  pass.steps = measured.steps;
  pass.examples = measured.steps * rows;
  pass.costs.examples = pass.examples;
  pass.costs.build_cpu_s = measured.fill_cpu_s;
  return pass;
}

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

PipelineCalibration CalibratePipeline(InputPipeline& pipeline, const infeed::InfeedPlan& plan,
                                      int host, int workers, const CalibrationLimits& limits) {
  PipelineCalibration out;
  out.host = host;
  out.workers = std::max(workers, 1);
  const int64_t rows = plan.host_plan(host)->rows_per_step;
  Phase phase(pipeline, plan, rows);
  const PhaseResult warmup = phase.Run(out.workers, 0, [&](int64_t step) { return step < out.workers; });
  if (!warmup.failure.empty()) {
    out.note = "the pipeline failed when run again: " + warmup.failure;
    return out;
  }
  const int passes = std::max(limits.passes, 1);
  const PassLimits share{limits.max_wall_s / passes, limits.min_wall_s / passes,
                         std::max<int64_t>(limits.enough_examples / passes, 1)};
  const PipelineCalibration base = out;
  int64_t first = out.workers;
  for (int p = 0; p < passes; ++p) {
    const PipelineCalibration pass = MeasurePass(phase, pipeline, base, first, rows, share);
    if (!pass.note.empty()) return pass;
    first += pass.steps;
    if (out.examples == 0 || pass.costs.build_cpu_s * static_cast<double>(out.examples) <
                                 out.costs.build_cpu_s * static_cast<double>(pass.examples)) {
      out = pass;
    }
  }
  return out;
}

}  // namespace tpusim::sim::host
