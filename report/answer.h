// The report's `answer` (docs/report.md): the pod's verdict first, in one section a
// user reads before anything measured here — the slice and workload (global batch,
// device step and where it came from), the projected verdict and AU, the demand
// against the building hosts' projected capacity (min, median, max), the stage that
// binds and the recommendation (report/recommendation.h). Its basis is `unknown`,
// with the key to set, when the run models no device time: the pod's step is then
// unknown and no verdict is given.
#pragma once

#include <string>

#include "report/pod_projection.h"
#include "report/report_types.h"

namespace tpusim::report {

// The slice the answer is for.
struct SliceFacts {
  std::string name;  // the topology's name
  int hosts = 0;     // its TPU hosts
};

// The answer for `pod`, the projection of `in`, on `slice`. Never throws.
AnswerSection BuildAnswer(const PodProjectionInputs& in, const PodProjectionSection& pod, const SliceFacts& slice);

// Where the device step comes from, in the config's keys (and its
// device.step_time_source when given), for the answer to quote.
std::string DeviceStepSource(const run::DeviceConfig& device);

}  // namespace tpusim::report
