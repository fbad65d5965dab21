#include "sim/shampoo/host_service.h"

#include <algorithm>
#include <chrono>
#include <set>
#include <thread>

#include "base/clock.h"
#include "base/error.h"
#include "cluster/message_tags.h"
#include "sim/shampoo/wire.h"

namespace tpusim::sim::shampoo {
namespace {

using RowMajorMatrixXf = Eigen::Matrix<float, Eigen::Dynamic, Eigen::Dynamic, Eigen::RowMajor>;

// The float32 statistics as the float64 matrix the root is computed in.
Eigen::MatrixXd ToDouble(std::span<const float> values, int64_t n) {
  return Eigen::Map<const RowMajorMatrixXf>(values.data(), n, n).cast<double>();
}

}  // namespace

HostService::HostService(const run::KeyTable& table, const cluster::Transport& world, const HostServiceOptions& options)
    : table_(table), world_(world), options_(options), planner_(table, options.host) {
  metrics_.host = options.host;
  metrics_.threads = options.threads;
  metrics_.keys_owned = static_cast<int64_t>(planner_.owned().size());
  optim::PreconditionerService::Options service;
  service.threads = options.threads;
  service.method = table.service().method;
  service.extra_delay_us = options.extra_delay_us;
  service.supersede = table.service().mode == optim::PreconditionerMode::kAsync;
  service_ = std::make_unique<optim::PreconditionerService>(service);
}

HostService::~HostService() = default;

void HostService::AfterLoop(const wire::LoopOutfeed& outfeed) {
  int64_t step = 0;
  for (const wire::OutfeedMessage& m : outfeed.records) step = std::max(step, m.record.global_step);
  SubmitStatistics(outfeed, step);
  planner_.AddBoundary(outfeed.loop, step, MonotonicSeconds() - options_.origin_s);
  Progress();
}

// Lingvo's invoke_async_preconditioner_computation with the loop's global step.
void HostService::SubmitStatistics(const wire::LoopOutfeed& outfeed, int64_t step) {
  std::set<int> seen;
  for (const wire::OutfeedMessage& m : outfeed.records) {
    if (m.payload.empty()) continue;
    for (const KeyMatrix& k : DecodeStatistics(m.payload, table_)) {
      const run::KeyEntry& entry = table_.key(k.key);
      if (entry.owner != options_.host) {
        Fail("shampoo: host {} got the statistics of '{}', which host {} owns", options_.host, entry.spec.key,
             entry.owner);
      }
      optim::RootRequest request{entry.spec.key,
                                 step,
                                 ToDouble(k.values, entry.spec.size),
                                 entry.spec.exponent,
                                 entry.spec.matrix_epsilon,
                                 entry.spec.inverse_failure_threshold};
      if (!service_->Submit(std::move(request))) ++metrics_.roots_deduplicated;
      seen.insert(k.key);
    }
  }
  for (int key : planner_.owned()) {
    if (!seen.count(key)) {
      Fail("shampoo: loop {}'s outfeed on host {} carries no statistics for '{}'", outfeed.loop, options_.host,
           table_.key(key).spec.key);
    }
  }
}

void HostService::Record(const optim::RootResult& result) {
  const RootTiming timing{table_.Find(result.key),
                          result.step,
                          result.finite ? optim::InverseRootMethodName(result.method) : "-",
                          result.start_s - options_.origin_s,
                          result.end_s - options_.origin_s,
                          result.worker,
                          result.accepted,
                          result.finite};
  if (options_.on_root) options_.on_root(timing);
  methods_.Add(timing.method, result.end_s - result.start_s);
  KeyCounts& counts = key_counts_[timing.key];
  ++counts.roots;
  if (!result.accepted) ++counts.rejected;
  ++metrics_.roots_done;
  metrics_.root_s_total += result.end_s - result.start_s;
  if (result.finite) AddRootCost(table_.key(timing.key).spec.size, result);
  if (!result.accepted) ++metrics_.roots_rejected;
  if (!result.finite) ++metrics_.roots_nonfinite;
  planner_.Record(result);
}

void HostService::AddRootCost(int64_t size, const optim::RootResult& result) {
  auto it = std::find_if(metrics_.root_costs.begin(), metrics_.root_costs.end(),
                         [size](const RootCost& c) { return c.size == size; });
  if (it == metrics_.root_costs.end()) {
    metrics_.root_costs.push_back({size, 0, 0, 0});
    it = metrics_.root_costs.end() - 1;
  }
  ++it->count;
  it->cpu_s_total += result.cpu_s;
  it->wall_s_total += result.end_s - result.start_s;
}

// One delivery to every training core, from one buffer kept until all complete.
void HostService::Send(std::vector<std::byte> bytes) {
  InFlight& out = in_flight_.emplace_back();
  out.bytes = std::move(bytes);
  for (int rank : options_.core_ranks) {
    out.sends.push_back(
        world_.Isend(out.bytes, rank, cluster::kTagPreconditioners, "MPI_Isend (shampoo preconditioners)"));
  }
  ++delivered_;
}

void HostService::TickBusy() { busy_.Tick(MonotonicSeconds(), service_->running() > 0); }

double HostService::BusySeconds() {
  TickBusy();
  return busy_.busy_s();
}

void HostService::Progress() {
  TickBusy();
  for (const optim::RootResult& r : service_->TakeFinished()) Record(r);
  double ready_s = 0;
  while (std::optional<std::vector<std::byte>> delivery = planner_.Next(&ready_s)) {
    metrics_.held_s_total += MonotonicSeconds() - options_.origin_s - ready_s;
    Send(std::move(*delivery));
  }
  while (!in_flight_.empty()) {
    std::vector<cluster::Request>& sends = in_flight_.front().sends;
    const bool all = std::all_of(sends.begin(), sends.end(), [](cluster::Request& r) { return r.Test(); });
    if (!all) return;
    in_flight_.pop_front();
  }
}

bool HostService::Done() const { return delivered_ == options_.num_loops && in_flight_.empty(); }

void HostService::Drain() {
  // Every delivery is out: roots that have not started would never be assigned.
  metrics_.roots_cancelled += service_->CancelQueued();
  while (service_->outstanding() > 0) {
    TickBusy();
    for (const optim::RootResult& r : service_->TakeFinished()) Record(r);
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
}

ServiceMetrics HostService::Metrics() const {
  ServiceMetrics m = metrics_;
  m.roots_superseded = service_->superseded();
  m.methods = methods_.Summary();
  m.busy_s = busy_.busy_s();
  for (int key : planner_.owned()) {
    const run::KeyEntry& entry = table_.key(key);
    const auto counts = key_counts_.find(key);
    const KeyCounts c = counts == key_counts_.end() ? KeyCounts{} : counts->second;
    m.keys.push_back({key, entry.spec.key, entry.owner, entry.spec.size, c.roots, c.rejected, planner_.staleness(key)});
  }
  return m;
}

}  // namespace tpusim::sim::shampoo
