// The golden reports (tests/report/golden/): the cases in cases.txt and the
// comparison of a fresh report with the one an earlier tpusim wrote for the same
// case — the same keys everywhere, arrays of the same length, leaves of the same
// type, and the same value for every leaf that does not come from a clock.
// Floats compare exactly under `config`, `training`, `replicas` and `loops` (the
// training is deterministic) and elsewhere by presence and type only; strings,
// integers and bools compare exactly except the few fields kMayDiffer lists.
#pragma once

#include <ostream>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

namespace tpusim::golden {

// One line of cases.txt: NAME | CONFIG | --set overrides (space-separated).
struct GoldenCase {
  std::string name;
  std::string config;                  // relative to the source tree
  std::vector<std::string> overrides;  // key=value, one per --set
};

// How gtest names a case in its messages.
void PrintTo(const GoldenCase& c, std::ostream* os);

// The cases of `path` (cases.txt; '#' starts a comment line). Throws
// std::runtime_error naming the line on a malformed one.
std::vector<GoldenCase> ReadCases(const std::string& path);

// The case's name as a test name ("per-host" -> "per_host").
std::string TestName(const GoldenCase& c);

// The source tree's golden directory, the golden report of case `name` and its
// JSON (throws nlohmann::json::exception if it does not parse).
std::string GoldenDir();
std::string GoldenPath(const std::string& name);
nlohmann::json ReadGolden(const std::string& name);

// The message of the Error the typed report's strict from_json throws on `j`
// ("" when `j` reads).
std::string ReportReadError(const nlohmann::json& j);

// Fields (array indices written as []) whose values differ between two runs of
// the same case without anything being wrong, each with the reason.
struct MayDiffer {
  const char* path;
  const char* why;
};
extern const std::vector<MayDiffer> kMayDiffer;

// Sections ("a.b") the comparison leaves out of both
// reports, and the golden files leave out, each with the reason: their shape
// itself follows the machine (their own tests check them).
extern const std::vector<MayDiffer> kNotCompared;

// `report` without the fields of kNotCompared.
nlohmann::json WithoutUncompared(nlohmann::json report);

// Every difference between `golden` and `fresh`, both without the fields of
// kNotCompared, that the rules above do not allow, one line each
// ("loops.num_loops: 3 in the golden report, 2 now", "unknown field
// 'hosts[0].stagez'"); empty when they agree.
std::vector<std::string> GoldenDifferences(const nlohmann::json& golden, const nlohmann::json& fresh);

// The sections whose values follow from the synthetic data (the losses and the
// trained parameters' checksums).
extern const std::vector<std::string> kTrainingSections;

// `golden` with the sections of kTrainingSections taken from `fresh` and nothing
// else changed: for a change of the synthetic generator's values, which changes
// what the training computes but nothing else a report says.
nlohmann::json WithTrainingOf(const nlohmann::json& golden, const nlohmann::json& fresh);

// `golden` with every field that only `fresh` has (a field added to the report
// since the golden one was written), at any depth and in array elements present
// in both; a value `golden` already holds is never changed.
nlohmann::json WithAddedFields(const nlohmann::json& golden, const nlohmann::json& fresh);

}  // namespace tpusim::golden
