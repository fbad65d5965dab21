// The parts of one core step (StepParts) and the one list of them (kStepParts)
// that the metrics' JSON, their sums, the steps CSV and the report's timeline walk.
#pragma once

#include <array>
#include <concepts>
#include <string_view>
#include <type_traits>

namespace tpusim::sim {

// The parts of one core step, seconds. A step runs from its dequeue to its
// outfeed (and, at a loop's end, its post-loop); `idle` is what is left. Its
// fields are listed once, in kStepParts below: the JSON, the sums and the steps
// CSV all walk that list (ForEachPart).
struct StepParts {
  double infeed_wait_s = 0;
  double compute_s = 0;             // forward and backward
  double embedding_lookup_s = 0;    // embedding lookups (forward)
  double embedding_exchange_s = 0;  // embedding gradient exchange and table update
  double crs_s = 0;                 // gradient reduction (within the replica, then across)
  double crs_sync_s = 0;            // of crs_s: waiting for the slowest member of the sum
  double apply_s = 0;               // adjustment, accumulation, optimizer
  double device_s = 0;              // modeled accelerator time
  double outfeed_s = 0;
  double post_loop_s = 0;  // waiting for Shampoo's preconditioners after the loop
  double step_s = 0;       // the whole step

  // Accelerator work: everything a TPU core would be busy with (compute,
  // embedding, the reduction's own work, apply, device time); waiting for
  // input, for a slower peer, for the host and idle gaps are not.
  double busy_s() const {
    return compute_s + embedding_lookup_s + embedding_exchange_s + (crs_s - crs_sync_s) + apply_s + device_s;
  }
  double idle_s() const;
  // Adds every part of `other` to this one's.
  StepParts& operator+=(const StepParts& other);
};

// One part of a step: its name (its JSON key and its --steps-csv column) and its field.
struct StepPart {
  const char* name;
  double StepParts::*field;
};

// Every field of StepParts, once, in the order of its JSON and of the steps CSV's
// columns (users parse both: names and order stay as they are).
inline constexpr auto kStepParts = std::to_array<StepPart>({
    {"infeed_wait_s", &StepParts::infeed_wait_s},
    {"compute_s", &StepParts::compute_s},
    {"embedding_lookup_s", &StepParts::embedding_lookup_s},
    {"embedding_exchange_s", &StepParts::embedding_exchange_s},
    {"crs_s", &StepParts::crs_s},
    {"crs_sync_s", &StepParts::crs_sync_s},
    {"apply_s", &StepParts::apply_s},
    {"device_s", &StepParts::device_s},
    {"outfeed_s", &StepParts::outfeed_s},
    {"post_loop_s", &StepParts::post_loop_s},
    {"step_s", &StepParts::step_s},
});
static_assert(sizeof(StepParts) == kStepParts.size() * sizeof(double),
              "a field of StepParts is missing from kStepParts");

// Calls `f(name, part)` for every part of `parts` in kStepParts' order, `part` a
// reference to the field (const when `parts` is).
template <class Parts, class F>
requires std::same_as<std::remove_const_t<Parts>, StepParts>
void ForEachPart(Parts& parts, F&& f) {
  for (const StepPart& part : kStepParts) f(std::string_view(part.name), parts.*part.field);
}

// Calls `f(column, seconds)` for the step-part columns of --steps-csv: every part
// in kStepParts' order, with the derived idle_s (what the others leave of the
// step) right before step_s.
template <class F>
void ForEachCsvPart(const StepParts& parts, F&& f) {
  ForEachPart(parts, [&](std::string_view name, const double& seconds) {
    if (&seconds == &parts.step_s) f(std::string_view("idle_s"), parts.idle_s());
    f(name, seconds);
  });
}

}  // namespace tpusim::sim
