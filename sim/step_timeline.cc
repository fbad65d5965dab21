#include "sim/step_timeline.h"

#include <string>

#include "base/error.h"

namespace tpusim::sim {

using json = nlohmann::json;

TimelinePoint& TimelinePoint::operator+=(const TimelinePoint& other) {
  steps += other.steps;
  occupancy_sum += other.occupancy_sum;
  parts += other.parts;
  return *this;
}

void StepTimeline::Add(int64_t step, const StepParts& parts, int occupancy) {
  if (origin_ < 0) origin_ = step;
  int64_t index = (step - origin_) / steps_per_point_;
  while (index >= static_cast<int64_t>(kMaxPoints)) {
    Double();
    index = (step - origin_) / steps_per_point_;
  }
  while (static_cast<int64_t>(points_.size()) <= index) {
    points_.push_back({origin_ + static_cast<int64_t>(points_.size()) * steps_per_point_, 0, 0, {}});
  }
  TimelinePoint& point = points_[static_cast<size_t>(index)];
  point += TimelinePoint{step, 1, static_cast<double>(occupancy), parts};
}

void StepTimeline::CoarsenTo(int64_t steps_per_point) {
  while (steps_per_point_ < steps_per_point) Double();
}

void StepTimeline::Double() {
  std::vector<TimelinePoint> merged;
  for (size_t i = 0; i < points_.size(); i += 2) {
    TimelinePoint point = points_[i];
    if (i + 1 < points_.size()) point += points_[i + 1];
    merged.push_back(point);
  }
  points_ = std::move(merged);
  steps_per_point_ *= 2;
}

// A point travels as one array, [first_step, steps, occupancy_sum, parts in
// kStepParts' order...]: a core's 64 points in a few kilobytes of the gather.
void to_json(json& j, const StepTimeline& t) {
  json points = json::array();
  for (const TimelinePoint& p : t.points_) {
    json row = {p.first_step, p.steps, p.occupancy_sum};
    ForEachPart(p.parts, [&row](std::string_view, double seconds) { row.push_back(seconds); });
    points.push_back(std::move(row));
  }
  j = {{"steps_per_point", t.steps_per_point_}, {"origin", t.origin_}, {"points", std::move(points)}};
}

void from_json(const json& j, StepTimeline& t) {
  j.at("steps_per_point").get_to(t.steps_per_point_);
  j.at("origin").get_to(t.origin_);
  t.points_.clear();
  for (const json& row : j.at("points")) {
    if (!row.is_array() || row.size() != 3 + kStepParts.size()) {
      Fail("StepTimeline: a point has {} values, not {}", row.size(), 3 + kStepParts.size());
    }
    TimelinePoint& p = t.points_.emplace_back();
    p.first_step = row[0].get<int64_t>();
    p.steps = row[1].get<int64_t>();
    p.occupancy_sum = row[2].get<double>();
    size_t i = 3;
    ForEachPart(p.parts, [&](std::string_view, double& seconds) { seconds = row[i++].get<double>(); });
  }
}

}  // namespace tpusim::sim
