// A core's steps over the whole run, folded into at most StepTimeline::kMaxPoints
// points: the series behind the report's `timeline` (the HTML page's step over
// time and queue heat strip). A point holds `steps_per_point` consecutive infeed
// steps; when the run outgrows the points, neighbours merge and steps_per_point
// doubles, so a rank's memory and its gathered metrics stay bounded however long
// the run (a run of at most kMaxPoints steps keeps every step).
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

#include <nlohmann/json.hpp>

#include "sim/step_parts.h"

namespace tpusim::sim {

// The steps [first_step, first_step + steps) of one core, summed.
struct TimelinePoint {
  int64_t first_step = 0;
  int64_t steps = 0;
  double occupancy_sum = 0;  // queue slots already full at each dequeue
  StepParts parts;           // sums over the point's steps

  TimelinePoint& operator+=(const TimelinePoint& other);
};

class StepTimeline {
 public:
  static constexpr size_t kMaxPoints = 64;

  // Folds in infeed step `step` (steps come in increasing order; the first one
  // seen is the timeline's origin).
  void Add(int64_t step, const StepParts& parts, int occupancy);
  // Merges neighbours until steps_per_point() is at least `steps_per_point` (a
  // power of two): how rank 0 puts cores of different lengths on one grid.
  void CoarsenTo(int64_t steps_per_point);

  int64_t steps_per_point() const { return steps_per_point_; }
  int64_t origin() const { return origin_; }
  // Point i covers the steps from origin() + i * steps_per_point() on.
  const std::vector<TimelinePoint>& points() const { return points_; }

  friend void to_json(nlohmann::json& j, const StepTimeline& t);
  friend void from_json(const nlohmann::json& j, StepTimeline& t);

 private:
  void Double();

  int64_t steps_per_point_ = 1;
  int64_t origin_ = -1;  // -1: no step yet
  std::vector<TimelinePoint> points_;
};

}  // namespace tpusim::sim
