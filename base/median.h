// The median of a sample: the middle value, or the mean of the middle two for an
// even count; 0 for an empty sample. One definition for the pod projection's
// shared per-host estimates (report/pod_projection.cc, report/pod_workloads.cc).
#pragma once

#include <algorithm>
#include <vector>

namespace tpusim {

inline double Median(std::vector<double> values) {
  if (values.empty()) return 0;
  std::sort(values.begin(), values.end());
  const size_t n = values.size();
  return n % 2 == 1 ? values[n / 2] : (values[n / 2 - 1] + values[n / 2]) / 2;
}

}  // namespace tpusim
