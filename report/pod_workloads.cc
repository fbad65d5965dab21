#include "report/pod_workloads.h"

#include <algorithm>
#include <cmath>
#include <map>
#include <string>

#include <fmt/format.h>

#include "base/median.h"

namespace tpusim::report {
namespace {

constexpr double kStatisticsBytesPerGib = 1024.0 * 1024.0 * 1024.0;

// A synchronous service keeps up while its roots stall the cores for at most this
// share of a loop (the moderate input-bound mark of report/verdict.h).
constexpr double kKeepsUpStallShare = 0.05;

double Ratio(double a, double b) { return b > 0 ? a / b : 0.0; }

SparseEnqueueHost SparseHostOf(const SparseHostInput& h) {
  const sim::SparseEnqueueCosts& c = h.costs;
  const double ids = static_cast<double>(c.ids);
  return {h.host, c.ids, c.examples, Ratio(c.coo_cpu_s, ids), Ratio(c.id_generation_cpu_s, ids)};
}

std::vector<std::string> SparseAssumptions(const SparseEnqueueProjection& p) {
  return {
      "the sparse enqueue is the thread CPU of turning a host's ids into per-core COO and its "
      "trailer bytes (Lingvo's CreateTpuEmbeddingEnqueueOps), timed apart from drawing tpusim's "
      "synthetic ids (id_generation_cpu_s_per_id: the simulator's own work, not projected; a "
      "pod's hosts read their ids)",
      fmt::format("ids per example as measured here ({:.2f}), the most examples a host builds "
                  "per step ({}) and the target step ({:.3f} ms)",
                  p.ids_per_example, p.examples_per_host_per_step, p.target_step_s * 1e3),
      fmt::format("the CPU per id is {} (the {} hosts' own in the run: median {:.3g} s, max/min "
                  "{:.2f}), run on the target's input workers ({:g}, target_host.input_workers) "
                  "at cpu_speed {:g}; the step build's CPU holds it too, without the id generation",
                  p.cpu_s_per_id_source == "calibration"
                      ? "the calibration's: each class's host re-ran its enqueue alone after the run"
                      : "the median over the hosts that enqueued ids",
                  p.hosts.size(), p.run_median_cpu_s_per_id, p.host_spread, p.workers, p.cpu_speed),
  };
}

// The ids every host shares (their sum over their examples) and the most
// examples a host builds per step.
void SetDemandFigures(const std::vector<SparseHostInput>& hosts, SparseEnqueueProjection& p) {
  int64_t ids = 0;
  int64_t examples = 0;
  for (const SparseHostInput& h : hosts) {
    ids += h.costs.ids;
    examples += h.costs.examples;
    p.examples_per_host_per_step = std::max(p.examples_per_host_per_step, h.examples_per_step);
  }
  p.ids_per_example = Ratio(static_cast<double>(ids), static_cast<double>(examples));
}

void SetHostSpread(const std::vector<SparseHostInput>& hosts, SparseEnqueueProjection& p) {
  std::vector<double> per_id;
  std::vector<double> estimate;
  std::vector<double> generation;
  bool calibrated = false;
  for (size_t i = 0; i < p.hosts.size(); ++i) {
    const SparseEnqueueHost& h = p.hosts[i];
    per_id.push_back(h.cpu_s_per_id);
    estimate.push_back(hosts[i].calibrated_cpu_s_per_id.value_or(h.cpu_s_per_id));
    calibrated = calibrated || hosts[i].calibrated_cpu_s_per_id.has_value();
    generation.push_back(h.id_generation_cpu_s_per_id);
  }
  const auto [least, most] = std::minmax_element(per_id.begin(), per_id.end());
  p.run_median_cpu_s_per_id = Median(per_id);
  p.cpu_s_per_id = Median(estimate);
  p.cpu_s_per_id_source = calibrated ? "calibration" : "run";
  p.host_min_cpu_s_per_id = *least;
  p.host_max_cpu_s_per_id = *most;
  p.host_spread = *least > 0 ? *most / *least : 1.0;
  p.id_generation_cpu_s_per_id = Median(generation);
}

std::string Millions(double per_s) { return fmt::format("{:.2f} M", per_s / 1e6); }

// Root work per loop of each owner host on one target thread: its keys' roots.
struct OwnerLoad {
  int host = 0;
  int64_t keys = 0;
  double root_s = 0;
  double longest_root_s = 0;
  double statistics_bytes = 0;
};

// The model per block size from every root timed here (thread CPU), and the
// fitted seconds per n^3 over all of them.
std::map<int64_t, RootSizeCost> RootModel(const ShampooInputs& in, double cpu_speed, double& per_n3) {
  std::map<int64_t, RootSizeCost> sizes;
  std::map<int64_t, double> cpu;
  double cpu_total = 0;
  double n3_total = 0;
  for (const sim::shampoo::ServiceMetrics& h : in.hosts) {
    for (const sim::shampoo::RootCost& c : h.root_costs) {
      sizes[c.size].size = c.size;
      sizes[c.size].roots_timed += c.count;
      cpu[c.size] += c.cpu_s_total;
      cpu_total += c.cpu_s_total;
      n3_total += static_cast<double>(c.count) * std::pow(static_cast<double>(c.size), 3);
    }
  }
  for (const run::KeyEntry& k : in.keys->keys()) sizes[k.spec.size].size = k.spec.size;
  per_n3 = Ratio(cpu_total, n3_total);
  for (auto& [n, s] : sizes) {
    s.model_cpu_s = per_n3 * std::pow(static_cast<double>(n), 3);
    if (s.roots_timed > 0) s.measured_cpu_s = cpu[n] / static_cast<double>(s.roots_timed);
    s.target_s = s.measured_cpu_s.value_or(s.model_cpu_s) / cpu_speed;
  }
  return sizes;
}

// The owner host with the most root work per loop, and how many keys of each
// size it holds (into `sizes`).
OwnerLoad BusiestOwner(const run::KeyTable& keys, std::map<int64_t, RootSizeCost>& sizes) {
  std::map<int, OwnerLoad> owners;
  for (const run::KeyEntry& k : keys.keys()) {
    OwnerLoad& o = owners[k.owner];
    o.host = k.owner;
    ++o.keys;
    const double root_s = sizes.at(k.spec.size).target_s;
    o.root_s += root_s;
    o.longest_root_s = std::max(o.longest_root_s, root_s);
    o.statistics_bytes += 4.0 * static_cast<double>(k.spec.size * k.spec.size);
  }
  OwnerLoad busiest;
  for (const auto& [host, o] : owners) {
    if (o.root_s > busiest.root_s || busiest.keys == 0) busiest = o;
  }
  for (const run::KeyEntry& k : keys.keys()) {
    if (k.owner == busiest.host) ++sizes.at(k.spec.size).keys;
  }
  return busiest;
}

// Staleness, stall and verdict on a loop of `loop_s` (docs/design.md §2a's modes):
// async assigns at the first post-loop after the roots finish (at least the
// next); delay d at the post-loop d loops on, waiting for what is late; sync at
// the same loop's post-loop, waiting for all of it.
void SetLoopVerdict(ShampooPodProjection& p, optim::PreconditionerMode mode) {
  const double loop_s = *p.loop_s;
  if (mode == optim::PreconditionerMode::kAsync) {
    const int64_t loops = std::max<int64_t>(1, static_cast<int64_t>(std::ceil(p.makespan_s / loop_s)));
    p.projected_staleness_loops = loops;
    p.keeps_up = p.makespan_s <= loop_s;
  } else {
    const int64_t d = mode == optim::PreconditionerMode::kSync ? 0 : p.delay_loops;
    p.projected_staleness_loops = d;
    p.stall_s_per_loop = std::max(0.0, p.makespan_s - static_cast<double>(d) * loop_s);
    p.keeps_up = *p.stall_s_per_loop <= kKeepsUpStallShare * loop_s;
  }
  p.projected_staleness_steps = *p.projected_staleness_loops * p.iterations_per_loop;
}

// What the run measured of staleness, and the keys and roots it leaves out.
void SetMeasured(const std::vector<sim::shampoo::ServiceMetrics>& hosts, ShampooPodProjection& p) {
  for (const sim::shampoo::ServiceMetrics& h : hosts) {
    p.roots_rejected += h.roots_rejected;
    for (const sim::shampoo::KeyMetrics& k : h.keys) {
      if (k.staleness.deliveries == 0) p.keys_never_refreshed.push_back(k.name);
      if (k.rejected > 0) p.keys_with_rejected_roots.push_back(k.name);
      if (k.staleness.deliveries > 0) {
        p.measured_max_staleness_steps = std::max(p.measured_max_staleness_steps, k.staleness.max_steps);
      }
    }
  }
}

std::vector<std::string> ShampooAssumptions(const ShampooPodProjection& p) {
  return {
      fmt::format("the pod host computes roots on {:g} threads (target_host.preconditioner_threads, "
                  "{}), each at cpu_speed {:g}; not this machine's "
                  "train.optimizer.shampoo.preconditioner.threads",
                  p.preconditioner_threads.value, p.preconditioner_threads.source, p.cpu_speed),
      fmt::format("a root costs its size's mean thread CPU timed here, or without one "
                  "{:.3g} s x (n/1000)^3 (fitted to every root timed here: ~n^3)",
                  p.cpu_s_per_n3 * 1e9),
      "every key's root is computed once per loop, the busiest owner host's roots spread over "
      "its threads with none split (makespan: the greater of their sum over the threads and the "
      "longest root)",
      fmt::format("the pod's loop is iterations_per_loop ({}) x the target step ({:.3f} ms); "
                  "statistics are one float32 n x n per key per loop over the host's link to "
                  "one core, held as float64 statistics and root",
                  p.iterations_per_loop, p.target_step_s * 1e3),
  };
}

}  // namespace

std::optional<SparseEnqueueProjection> ProjectSparseEnqueue(const std::vector<SparseHostInput>& hosts, double workers,
                                                            double cpu_speed, double target_step_s) {
  std::vector<SparseHostInput> enqueuing;
  for (const SparseHostInput& h : hosts) {
    if (h.costs.ids > 0) enqueuing.push_back(h);
  }
  if (enqueuing.empty()) return std::nullopt;
  SparseEnqueueProjection p;
  for (const SparseHostInput& h : enqueuing) p.hosts.push_back(SparseHostOf(h));
  SetDemandFigures(enqueuing, p);
  SetHostSpread(enqueuing, p);
  p.target_step_s = target_step_s;
  p.workers = std::max(1.0, workers);
  p.cpu_speed = cpu_speed;
  p.capacity_ids_per_s_per_host = Ratio(p.workers * cpu_speed, p.cpu_s_per_id);
  if (target_step_s > 0) {
    p.demand_ids_per_s_per_host = p.ids_per_example * static_cast<double>(p.examples_per_host_per_step) / target_step_s;
    if (p.capacity_ids_per_s_per_host > 0) {
      p.share_of_workers = *p.demand_ids_per_s_per_host / p.capacity_ids_per_s_per_host;
    }
  }
  p.assumes = SparseAssumptions(p);
  return p;
}

std::optional<EmbeddingStepProjection> ProjectEmbeddingStep(const std::vector<EmbeddingCoreLoad>& cores,
                                                            double ici_link_gbps, double hbm_gbps_per_core) {
  if (cores.empty()) return std::nullopt;
  EmbeddingStepProjection p;
  for (const EmbeddingCoreLoad& c : cores) {
    p.all_to_all_bytes_per_step += c.all_to_all_bytes_per_step;
    p.hot_core_all_to_all_bytes_per_step = std::max(p.hot_core_all_to_all_bytes_per_step, c.all_to_all_bytes_per_step);
    p.mean_core_hbm_bytes_per_step += c.hbm_bytes_per_step;
    p.hot_core_hbm_bytes_per_step = std::max(p.hot_core_hbm_bytes_per_step, c.hbm_bytes_per_step);
  }
  const double n = static_cast<double>(cores.size());
  p.mean_core_all_to_all_bytes_per_step = p.all_to_all_bytes_per_step / n;
  p.mean_core_hbm_bytes_per_step /= n;
  p.hot_core_ratio =
      p.mean_core_hbm_bytes_per_step > 0 ? p.hot_core_hbm_bytes_per_step / p.mean_core_hbm_bytes_per_step : 1.0;
  p.ici_link_gbps = ici_link_gbps;
  p.all_to_all_s = Ratio(p.hot_core_all_to_all_bytes_per_step, ici_link_gbps * 1e9 / 8);
  p.step_s = p.all_to_all_s;
  if (hbm_gbps_per_core > 0) {
    p.hbm_gbps_per_core = hbm_gbps_per_core;
    p.lookup_update_s = p.hot_core_hbm_bytes_per_step / (hbm_gbps_per_core * 1e9 / 8);
    p.balanced_lookup_update_s = p.mean_core_hbm_bytes_per_step / (hbm_gbps_per_core * 1e9 / 8);
    p.step_s += *p.lookup_update_s;
  }
  p.assumes = {
      "the embedding's exchange and table work are not in device.step_time_us and do not "
      "overlap the rest of the step: the target step adds all_to_all_s and lookup_update_s",
      "the all-to-all: the core that sends the most (forward rows and backward gradients, as "
      "this run's own dedup and sharding gave them) over one ICI link at ici_link_gbps, as the "
      "cross-replica sum's model",
      "lookups read rows x dim x 4 bytes and the gradient scatter reads and writes the rows "
      "and their optimizer slots, over HBM at hbm_gbps_per_core; the most-loaded core sets the "
      "step (hot_core_ratio: its bytes over the mean core's)",
  };
  if (hbm_gbps_per_core <= 0) {
    p.assumes.push_back("the topology gives no hbm_gbps_per_core: the lookups and updates are left out");
  }
  return p;
}

std::optional<ShampooPodProjection> ProjectShampoo(const ShampooInputs& in, double cpu_speed, double target_step_s) {
  if (!in.keys || in.keys->empty()) return std::nullopt;
  ShampooPodProjection p;
  p.preconditioner_threads = in.threads;
  p.cpu_speed = cpu_speed;
  std::map<int64_t, RootSizeCost> sizes = RootModel(in, cpu_speed, p.cpu_s_per_n3);
  const OwnerLoad busiest = BusiestOwner(*in.keys, sizes);
  for (const auto& [n, s] : sizes) p.sizes.push_back(s);
  p.busiest_host = busiest.host;
  p.keys_on_busiest_host = busiest.keys;
  p.root_s_per_loop = busiest.root_s;
  p.makespan_s = std::max(busiest.root_s / std::max(1.0, in.threads.value), busiest.longest_root_s);
  const optim::PreconditionerServiceConfig& service = in.keys->service();
  p.mode = std::string(optim::PreconditionerModeName(service.mode));
  p.delay_loops = service.delay_loops;
  p.iterations_per_loop = in.iterations_per_loop;
  p.target_step_s = target_step_s;
  p.statistics_bytes_per_loop = busiest.statistics_bytes;
  p.statistics_link_s_per_loop = Ratio(busiest.statistics_bytes, in.host_to_device_gbps * 1e9 / 8);
  p.statistics_memory_gib = busiest.statistics_bytes * 4 / kStatisticsBytesPerGib;  // float64 x 2
  const bool timed = p.cpu_s_per_n3 > 0;
  if (target_step_s > 0 && in.iterations_per_loop > 0 && timed) {
    p.loop_s = static_cast<double>(in.iterations_per_loop) * target_step_s;
    SetLoopVerdict(p, service.mode);
  }
  SetMeasured(in.hosts, p);
  p.assumes = ShampooAssumptions(p);
  if (!timed) p.assumes.push_back("no root was timed here: no keeps-up verdict");
  return p;
}

WorkloadAnswer SparseEnqueueAnswer(const SparseEnqueueProjection& p) {
  WorkloadAnswer a;
  const std::string capacity = Millions(p.capacity_ids_per_s_per_host);
  if (!p.demand_ids_per_s_per_host) {
    a.text = fmt::format(
        "sparse enqueue needs an unknown number of ids/s per host (no modeled "
        "device step), the target's workers give {} ids/s",
        capacity);
    return a;
  }
  a.keeps_up = *p.demand_ids_per_s_per_host <= p.capacity_ids_per_s_per_host;
  a.text = fmt::format(
      "sparse enqueue needs {} ids/s per host, the target's workers give {} "
      "({:.1f}% of their {:g} workers at {:.1f} ns per id)",
      Millions(*p.demand_ids_per_s_per_host), capacity, p.share_of_workers.value_or(0.0) * 100, p.workers,
      p.cpu_s_per_id * 1e9);
  return a;
}

WorkloadAnswer PreconditionerAnswer(const ShampooPodProjection& p) {
  WorkloadAnswer a;
  a.keeps_up = p.keeps_up;
  const std::string work = fmt::format("a loop's roots take {:.3f} s on host {}'s {:g} threads", p.makespan_s,
                                       p.busiest_host, p.preconditioner_threads.value);
  if (!p.keeps_up) {
    a.text = "preconditioners: unknown on the pod (" +
             std::string(p.loop_s ? "no root was timed here" : "no modeled device step") + "); " + work;
  } else if (*p.keeps_up) {
    a.text = fmt::format(
        "preconditioners keep up on the pod: {}, a pod loop is {:.3f} s "
        "(staleness {} pod steps)",
        work, *p.loop_s, *p.projected_staleness_steps);
  } else {
    a.text = fmt::format(
        "preconditioners are {} steps stale on the pod{}: {}, a pod loop is {:.3f} s", *p.projected_staleness_steps,
        p.stall_s_per_loop ? fmt::format(" and stall the cores {:.3f} s per loop", *p.stall_s_per_loop) : std::string(),
        work, *p.loop_s);
  }
  return a;
}

}  // namespace tpusim::report
