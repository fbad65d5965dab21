// What the pod projection is given (report/pod_projection.h PodProjectionInputs),
// gathered from every rank's metrics: each building host's pipeline and sparse
// enqueue costs, the calibrations, the device model's step, the cross-replica
// sum on ICI, each core's embedding load and Shampoo's service metrics.
#pragma once

#include <vector>

#include "report/pod_projection.h"
#include "report/report.h"
#include "report/report_types.h"
#include "sim/metrics.h"

namespace tpusim::report::internal {

// The inputs of `in`'s run; `step_cores` are its step cores and `projection` its
// projection section (for the cross-replica sum on ICI). Throws Error as
// run::TargetHostOf does.
PodProjectionInputs PodProjectionInputsOf(const ReportInputs& in,
                                          const std::vector<const sim::CoreMetrics*>& step_cores,
                                          const ProjectionSection& projection);

}  // namespace tpusim::report::internal
