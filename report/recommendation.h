// The answer's recommendation (docs/report.md, "answer"): when the pod is projected
// below the target accelerator utilization, the smallest change a user can pass
// back with `--set key=value` that brings it to the target — more input workers for
// a stage the workers run, more storage bandwidth or concurrency for the storage
// model, a higher rate cap — found by projecting the pod again with each candidate
// value (ProjectPod is pure arithmetic). When no such key reaches the target (the
// host-to-device link, the one sender or shuffle thread, the files source's one
// stream, more workers than the host has vCPUs), it says so and why. When the pod
// meets the target, the headroom: the least capacity over the demand.
#pragma once

#include "report/pod_projection.h"
#include "report/report_types.h"

namespace tpusim::report {

// A recommendation must reach the target with the hosts' measured CPU costs this
// much higher: two runs of one config measure them within 15 % of each other, so a
// change found on one run still reaches the target on the next.
inline constexpr double kRecommendationMargin = 1.15;

// The recommendation for `pod`, the projection of `in`, against `target_au` (in
// (0, 1]). Never throws. With every change of `changes` applied to `in`,
// ProjectPod's projected AU is `projected_au` >= target_au.
Recommendation Recommend(const PodProjectionInputs& in, const PodProjectionSection& pod, double target_au);

// Whether every building host of `p` carries its examples per step within the
// device's work per step (the target's step less what it waits on DCN) divided
// by `target_au`, its measured CPU costs `margin` times as high: that is, the
// projected AU is at least target_au with the margin. False without a modeled
// device step, or when the DCN wait alone holds the AU under the target.
bool MeetsTarget(const PodProjectionSection& p, double target_au, double margin);

}  // namespace tpusim::report
