#include "report/recommendation.h"

#include <algorithm>
#include <cmath>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include <fmt/format.h>

namespace tpusim::report {
namespace {

// A config key the user may raise to lift the stage that binds: its value now and
// the most it may take.
struct Knob {
  std::string key;
  double current = 0;
  double high = 0;
};

constexpr const char* kWorkers = "target_host.input_workers";
constexpr const char* kInputVcpus = "target_host.input_vcpus";
constexpr const char* kBandwidth = "input.storage.bandwidth_mb_s";
constexpr const char* kConcurrency = "input.storage.concurrency";
constexpr const char* kRateCap = "input.max_examples_per_sec";

// The run as the recommendation changes it: a copy of the config and the target
// host, and the changes made so far.
struct Candidate {
  run::RunConfig config;
  run::TargetHost target;
  std::vector<SetChange> changes;
};

PodProjectionSection Project(const PodProjectionInputs& in, const Candidate& c) {
  return ProjectPod({c.config, c.target, in.host_to_device_gbps, in.hosts, in.device_step_s, in.ici_crs_s_per_step,
                     in.machine, in.calibrations, in.embedding_cores, in.ici_link_gbps, in.hbm_gbps_per_core,
                     in.shampoo, in.tables, in.dcn});
}

// `key` = `value` on the candidate, as `--set key=value` would set it. More
// workers than input vCPUs take the input vCPUs with them (at most the host's).
void Apply(const std::string& key, double value, Candidate& c) {
  if (key == kWorkers) {
    if (value > c.target.input_vcpus.value) {
      c.target.input_vcpus = {value, "recommended"};
      c.changes.push_back({kInputVcpus, value});
    }
    c.target.input_workers = {value, "recommended"};
    c.config.target_host.input_workers = static_cast<int>(value);
  } else if (key == kBandwidth) {
    c.config.input.storage.bandwidth_mb_s = value;
  } else if (key == kConcurrency) {
    c.config.input.storage.concurrency = static_cast<int>(value);
  } else if (key == kRateCap) {
    c.config.input.max_examples_per_sec = value;
  }
  c.changes.push_back({key, value});
}

const HostProjection* BoundHost(const PodProjectionSection& p) {
  for (const HostProjection& h : p.hosts) {
    if (p.bound_host && h.host == *p.bound_host) return &h;
  }
  return nullptr;
}

const ProjectedStage* StageOf(const HostProjection& h, const std::string& name) {
  for (const ProjectedStage& s : h.stages) {
    if (s.stage == name) return &s;
  }
  return nullptr;
}

// The storage model's term that binds: bandwidth over the bytes, or the requests
// in flight over their latency (pod_projection.cc StorageRate).
std::optional<Knob> StorageKnob(const ProjectedStage& s, const infeed::StorageConfig& storage) {
  const double bytes = s.bytes_per_example.value_or(0);
  const double by_bandwidth = storage.bandwidth_mb_s > 0 && bytes > 0 ? storage.bandwidth_mb_s * 1e6 / bytes : HUGE_VAL;
  if (s.capacity_examples_per_s && by_bandwidth <= *s.capacity_examples_per_s) {
    return Knob{kBandwidth, std::ceil(storage.bandwidth_mb_s), 1e7};
  }
  return Knob{kConcurrency, static_cast<double>(storage.concurrency), 1e6};
}

// The key that lifts `stage`, or none when no key a user sets does: the one
// sender or shuffle thread, the files source's one stream, the host's link.
std::optional<Knob> KnobFor(const ProjectedStage& stage, const Candidate& c) {
  const std::string& name = stage.stage;
  const bool on_workers =
      name == "step build" || (c.config.input.source != run::InputSource::kFiles &&
                               (name == "file read" || name == "preprocessing" || name == "emulated preprocessing"));
  if (on_workers) {
    return Knob{kWorkers, c.target.input_workers.value, std::floor(c.target.vcpus.value)};
  }
  if (name == "storage") return StorageKnob(stage, c.config.input.storage);
  if (name == "rate cap") return Knob{kRateCap, std::ceil(c.config.input.max_examples_per_sec), 1e9};
  return std::nullopt;
}

// The least integer in [low, high] for which `holds` (which holds for every value
// above one that it holds for), or none.
std::optional<double> Smallest(double low, double high, const std::function<bool(double)>& holds) {
  if (low > high || !holds(high)) return std::nullopt;
  while (low < high) {
    const double mid = std::floor((low + high) / 2);
    if (holds(mid)) {
      high = mid;
    } else {
      low = mid + 1;
    }
  }
  return low;
}

std::string SetLine(const std::vector<SetChange>& changes) {
  std::string out;
  for (const SetChange& c : changes) out += fmt::format(" --set {}={:.0f}", c.key, c.value);
  return out.empty() ? out : out.substr(1);
}

double LeastRate(const PodProjectionSection& p) { return p.projected_examples_per_s_per_host.value_or(HUGE_VAL); }

Recommendation Headroom(const PodProjectionSection& p, double target_au) {
  Recommendation r;
  r.kind = "headroom";
  r.projected_au = p.projected_au;
  if (p.projected_examples_per_s_per_host) r.headroom = LeastRate(p) / *p.demand_examples_per_s_per_host;
  r.text = r.headroom ? fmt::format(
                            "meets the target AU {:.0f}%: headroom {:.2f}x (the least host's "
                            "capacity {:.0f} examples/s over the demand {:.0f})",
                            target_au * 100, *r.headroom, LeastRate(p), *p.demand_examples_per_s_per_host)
                      : fmt::format(
                            "meets the target AU {:.0f}%: no stage of the input pipeline "
                            "limits it (headroom unlimited)",
                            target_au * 100);
  return r;
}

// Why no key reaches the target from here, in the user's terms.
std::string WhyNotReachable(const ProjectedStage& s, const Candidate& c, double demand) {
  const double cap = s.capacity_examples_per_s.value_or(HUGE_VAL);
  if (s.stage == "host-to-device") {
    return fmt::format(
        "not reachable by the host: the host-to-device link carries at most {:.0f} "
        "examples/s per host ({:.0f} bytes per example) against a demand of {:.0f}; "
        "fewer bytes per example or fewer examples per host (more hosts)",
        cap, s.bytes_per_example.value_or(0), demand);
  }
  if (s.stage == "step build" || s.stage == "preprocessing" || s.stage == "file read" ||
      s.stage == "emulated preprocessing") {
    if (c.config.input.source != run::InputSource::kFiles) {
      return fmt::format(
          "not reachable on this host: {} needs more input workers than the host's "
          "{:g} vCPUs ({:.0f} examples/s per host with all of them, demand {:.0f}); "
          "more hosts (fewer examples per host) or cheaper preprocessing",
          s.stage, c.target.vcpus.value, cap, demand);
    }
  }
  if (s.stage == "file stream" || c.config.input.source == run::InputSource::kFiles) {
    return fmt::format(
        "not reachable by input workers: the files source builds its one stream a "
        "step at a time, at most {:.0f} examples/s per host ({}) against a demand "
        "of {:.0f}; fewer examples per host (more hosts) or a parallel source "
        "(input.source: tfrecord)",
        cap, s.stage, demand);
  }
  return fmt::format(
      "not reachable by input workers: {} runs on one thread per host, at most "
      "{:.0f} examples/s at target_host.cpu_speed {:g}, against a demand of "
      "{:.0f}; it needs a host CPU {:.2f}x as fast or fewer examples per host "
      "(more hosts)",
      s.stage, cap, c.target.cpu_speed.value, demand, demand / cap);
}

Recommendation NotReachable(const PodProjectionSection& p, const Candidate& c) {
  Recommendation r;
  r.kind = "not reachable";
  const HostProjection* host = BoundHost(p);
  const ProjectedStage* s = host ? StageOf(*host, p.bound_by) : nullptr;
  const double demand = p.demand_examples_per_s_per_host.value_or(0);
  r.text = s ? WhyNotReachable(*s, c, demand) : "not reachable: no stage to change";
  if (!c.changes.empty()) {
    r.text += fmt::format(" (after {}, which lifts the stages before it; projected AU {:.1f}%)", SetLine(c.changes),
                          p.projected_au.value_or(0) * 100);
  }
  return r;
}

Recommendation Reached(const PodProjectionSection& p, const Candidate& c, const run::TargetHost& was,
                       double target_au) {
  Recommendation r;
  r.kind = "set";
  r.changes = c.changes;
  r.key = c.changes.front().key;
  r.value = c.changes.front().value;
  r.projected_au = p.projected_au;
  r.text = fmt::format(
      "{}: projected {:.0f} examples/s per host against a demand of {:.0f}, AU "
      "{:.1f}% (target {:.0f}%, reached with the measured CPU costs {:.0f}% higher)",
      SetLine(c.changes), LeastRate(p), p.demand_examples_per_s_per_host.value_or(0), p.projected_au.value_or(0) * 100,
      target_au * 100, (kRecommendationMargin - 1) * 100);
  if (c.target.input_vcpus.value > was.input_vcpus.value) {
    r.text += fmt::format(
        "; it needs more workers than the {:g} input vCPUs ({}): only if the "
        "framework can spare them, otherwise more hosts",
        was.input_vcpus.value, was.input_vcpus.source);
  }
  return r;
}

// The most AU any host reaches when the step waits `exposed_s` on DCN: the
// device's share of its own step.
double DcnCeiling(const PodProjectionSection& p) {
  return p.dcn && p.target_step_s > 0 ? (p.target_step_s - p.dcn->exposed_s) / p.target_step_s : 1.0;
}

Recommendation DcnBound(const PodProjectionSection& p, double target_au) {
  Recommendation r;
  r.kind = "not reachable";
  r.projected_au = p.projected_au;
  r.text = fmt::format(
      "not reachable by the hosts: the {} slices' all-reduce on DCN keeps the device waiting {:.3f} ms of "
      "its {:.3f} ms step (dcn.overlap {}), so the AU is at most {:.1f}% against the target {:.0f}% whatever "
      "the hosts do; fewer slices, more examples per slice, fewer gradient bytes, or dcn.overlap: full if "
      "the step overlaps it",
      p.dcn->slices, p.dcn->exposed_s * 1e3, p.target_step_s * 1e3, p.dcn->overlap, DcnCeiling(p) * 100,
      target_au * 100);
  return r;
}

}  // namespace

bool MeetsTarget(const PodProjectionSection& p, double target_au, double margin) {
  if (p.device_step_s <= 0 || p.target_step_s <= 0) return false;
  // The AU is the device's work over the wall (pod_projection.cc SetStepFigures):
  // the step less what it waits on DCN, over the step or the input, the longer.
  const double work_s = p.target_step_s - (p.dcn ? p.dcn->exposed_s : 0.0);
  if (work_s < target_au * p.target_step_s * (1 - 1e-12)) return false;
  for (const HostProjection& h : p.hosts) {
    if (!h.projected_examples_per_s) continue;
    const double seconds = margin * static_cast<double>(h.examples_per_step) / *h.projected_examples_per_s;
    if (seconds > work_s / target_au * (1 + 1e-12)) return false;
  }
  return true;
}

Recommendation Recommend(const PodProjectionInputs& in, const PodProjectionSection& pod, double target_au) {
  if (pod.device_step_s <= 0) return {"unknown", {}, {}, {}, {}, {}, kUnknownStepReason};
  if (DcnCeiling(pod) < target_au) return DcnBound(pod, target_au);
  if (MeetsTarget(pod, target_au, 1.0)) return Headroom(pod, target_au);
  Candidate c{in.config, in.target, {}};
  // Each round lifts the stage that binds: to the target if its key can, else
  // until another stage binds, which the next round lifts.
  for (int round = 0; round < 4; ++round) {
    const PodProjectionSection p = Project(in, c);
    if (MeetsTarget(p, target_au, kRecommendationMargin)) return Reached(p, c, in.target, target_au);
    const HostProjection* host = BoundHost(p);
    const ProjectedStage* stage = host ? StageOf(*host, p.bound_by) : nullptr;
    const std::optional<Knob> knob = stage ? KnobFor(*stage, c) : std::nullopt;
    if (!knob) return NotReachable(p, c);
    auto with = [&](double v) {
      Candidate next = c;
      Apply(knob->key, v, next);
      return Project(in, next);
    };
    std::optional<double> v = Smallest(knob->current + 1, knob->high, [&](double x) {
      return MeetsTarget(with(x), target_au, kRecommendationMargin);
    });
    if (!v) {
      v = Smallest(knob->current + 1, knob->high, [&](double x) { return with(x).bound_by != p.bound_by; });
    }
    if (!v) return NotReachable(with(knob->high), c);  // the stage at the key's most
    Apply(knob->key, *v, c);
  }
  return NotReachable(Project(in, c), c);
}

}  // namespace tpusim::report
