#include "tests/report/golden_compare.h"

#include <algorithm>
#include <cctype>
#include <cmath>
#include <fstream>
#include <sstream>
#include <stdexcept>

#include <fmt/format.h>

#include "base/error.h"
#include "report/json_shape.h"
#include "report/report_types.h"
#include "source_dir.h"

namespace tpusim::golden {
namespace {

using json = nlohmann::json;

// The sections whose floats do not come from a clock.
const char* const kExactFloatSections[] = {"config", "training", "replicas", "loops"};

std::string Trim(const std::string& s) {
  const size_t begin = s.find_first_not_of(" \t");
  if (begin == std::string::npos) return "";
  return s.substr(begin, s.find_last_not_of(" \t") - begin + 1);
}

std::vector<std::string> Split(const std::string& s, char separator) {
  std::vector<std::string> parts;
  std::stringstream in(s);
  for (std::string part; std::getline(in, part, separator);) parts.push_back(part);
  return parts;
}

// "hosts[3].stages" -> "hosts[].stages".
// (A loop, not std::regex: GCC 12 warns maybe-uninitialized inside libstdc++'s
// regex automaton.)
std::string WithoutIndices(const std::string& path) {
  std::string out;
  for (size_t i = 0; i < path.size(); ++i) {
    size_t end = i + 1;
    while (path[i] == '[' && end < path.size() && std::isdigit(static_cast<unsigned char>(path[end]))) ++end;
    if (path[i] == '[' && end > i + 1 && end < path.size() && path[end] == ']') {
      out += "[]";
      i = end;
    } else {
      out += path[i];
    }
  }
  return out;
}

std::string Section(const std::string& path) { return path.substr(0, path.find_first_of(".[")); }

bool AllowedToDiffer(const std::string& path, const json& golden) {
  const std::string general = WithoutIndices(path);
  for (const MayDiffer& field : kMayDiffer) {
    if (general == field.path) return true;
  }
  if (!golden.is_number_float()) return false;
  for (const char* section : kExactFloatSections) {
    if (Section(path) == section) return false;
  }
  return true;
}

}  // namespace

const std::vector<MayDiffer> kMayDiffer = {
    {"provenance.created_utc", "when the report was written"},
    {"provenance.config_file", "the absolute path of the checkout that ran the case"},
    {"provenance.git_commit", "the commit the binary was built from"},
    {"environment.git_commit", "the commit the binary was built from"},
    {"environment.mpi_version", "the machine's MPI library"},
    {"environment.build_type", "a release or a debug build"},
    {"verdict", "from the measured infeed wait"},
    {"window.steady", "false when the measured begin times of the cores lie far apart"},
    {"window.steady_note", "quotes the measured begin times of the cores"},
    {"stragglers.cause", "quotes the measured ratio and wait"},
    {"stragglers.slowest_core.host", "the core with the most measured work"},
    {"stragglers.slowest_core.ordinal", "the core with the most measured work"},
    {"stragglers.slowest_core.replica", "the core with the most measured work"},
    {"accelerator_utilization.worst_core.host", "the core with the lowest measured utilization"},
    {"accelerator_utilization.worst_core.ordinal", "the core with the lowest measured utilization"},
    {"accelerator_utilization.worst_core.replica", "the core with the lowest measured utilization"},
    {"training.loops[].end_s", "a clock reading (losses and steps are deterministic)"},
    {"replicas.checksums[].checksum",
     "the trained parameters' last bits follow the CPU (Eigen blocks its matrix products by the "
     "CPU's cache sizes, which orders their sums): the replicas must agree with each other"},
};

const std::vector<MayDiffer> kNotCompared = {
    {"pod_projection",
     "projected from this run's CPU seconds per example: which stage binds, which stages cost "
     "nothing (null) and the verdict follow the machine; pod_projection_test.cc checks the "
     "arithmetic, report_golden_test that every fresh report has the section"},
    {"answer",
     "the pod_projection's verdict, capacities and recommendation, which follow the machine as "
     "it does; pod_projection_test.cc checks the arithmetic, report_golden_test that every "
     "fresh report has an answer whose basis follows its device step"},
};

namespace {

// Erases `path` ("a.b") below `j`, if it is there.
void Erase(json& j, const std::string& path) {
  const size_t dot = path.find('.');
  const std::string key = path.substr(0, dot);
  if (!j.is_object() || !j.contains(key)) return;
  if (dot == std::string::npos) {
    j.erase(key);
  } else {
    Erase(j[key], path.substr(dot + 1));
  }
}

}  // namespace

json WithoutUncompared(json report) {
  for (const MayDiffer& field : kNotCompared) Erase(report, field.path);
  return report;
}

void PrintTo(const GoldenCase& c, std::ostream* os) { *os << c.name << " (" << c.config << ")"; }

std::vector<GoldenCase> ReadCases(const std::string& path) {
  std::ifstream in(path);
  if (!in) throw std::runtime_error("cannot read " + path);
  std::vector<GoldenCase> cases;
  int number = 0;
  for (std::string line; std::getline(in, line);) {
    ++number;
    if (Trim(line).empty() || Trim(line)[0] == '#') continue;
    const std::vector<std::string> fields = Split(line, '|');
    if (fields.size() < 2 || fields.size() > 3 || Trim(fields[0]).empty()) {
      throw std::runtime_error(fmt::format("{}:{}: expected NAME | CONFIG | OVERRIDES", path, number));
    }
    GoldenCase c{Trim(fields[0]), Trim(fields[1]), {}};
    if (fields.size() == 3) {
      for (const std::string& word : Split(Trim(fields[2]), ' ')) {
        if (!word.empty()) c.overrides.push_back(word);
      }
    }
    cases.push_back(c);
  }
  return cases;
}

std::string TestName(const GoldenCase& c) {
  std::string name = c.name;
  for (char& ch : name) ch = std::isalnum(static_cast<unsigned char>(ch)) ? ch : '_';
  return name;
}

std::string GoldenDir() { return std::string(TPUSIM_SOURCE_DIR) + "/tests/report/golden"; }

std::string GoldenPath(const std::string& name) { return GoldenDir() + "/" + name + ".json"; }

json ReadGolden(const std::string& name) { return json::parse(std::ifstream(GoldenPath(name))); }

std::string ReportReadError(const json& j) {
  try {
    (void)j.get<report::Report>();
  } catch (const Error& e) {
    return e.what();
  }
  return "";
}

namespace {

// The training's floats (losses) move with the CPU as the checksums do: 5e-9 for the
// embedding case, 4e-5 for shampoo-sync after 3 loops (its inverse roots amplify the
// products' last bits), between two VMs of this project on 1 and 2 Dec 2026. A change
// of what is computed moves them further.
constexpr double kTrainingRelativeTolerance = 1e-4;

bool WithinTrainingTolerance(const std::string& path, const json& g, const json& f) {
  if (Section(path) != "training" || !g.is_number_float() || !f.is_number_float()) return false;
  const double a = g.get<double>(), b = f.get<double>();
  return std::abs(a - b) <= kTrainingRelativeTolerance * std::max(std::abs(a), std::abs(b));
}

// The invariant that stands in for the golden checksums: every replica of the
// fresh run ends with replica 0's parameters.
std::vector<std::string> ReplicaDisagreements(const json& fresh) {
  std::vector<std::string> out;
  if (!fresh.contains("replicas") || !fresh["replicas"].contains("checksums")) return out;
  const json& checksums = fresh["replicas"]["checksums"];
  for (size_t i = 1; i < checksums.size(); ++i) {
    if (checksums[i]["checksum"] != checksums[0]["checksum"]) {
      out.push_back(fmt::format("replicas.checksums[{}].checksum: {} now, replica 0 has {}", i,
                                checksums[i]["checksum"].dump(), checksums[0]["checksum"].dump()));
    }
  }
  return out;
}

}  // namespace

std::vector<std::string> GoldenDifferences(const json& golden, const json& fresh) {
  std::vector<std::string> values;
  std::vector<std::string> out = report::ShapeDifferences(
      WithoutUncompared(golden), WithoutUncompared(fresh),
      [&values](const std::string& path, const json& g, const json& f) {
        if (g.dump() == f.dump() || AllowedToDiffer(path, g) || WithinTrainingTolerance(path, g, f)) {
          return;
        }
        values.push_back(fmt::format("{}: {} in the golden report, {} now", path, g.dump(), f.dump()));
      });
  out.insert(out.end(), values.begin(), values.end());
  const std::vector<std::string> replicas = ReplicaDisagreements(fresh);
  out.insert(out.end(), replicas.begin(), replicas.end());
  return out;
}

const std::vector<std::string> kTrainingSections = {"training", "replicas"};

nlohmann::json WithTrainingOf(const nlohmann::json& golden, const nlohmann::json& fresh) {
  json out = golden;
  for (const std::string& section : kTrainingSections) {
    if (fresh.contains(section)) out[section] = fresh[section];
  }
  return out;
}

nlohmann::json WithAddedFields(const nlohmann::json& golden, const nlohmann::json& fresh) {
  json out = golden;
  if (golden.is_object() && fresh.is_object()) {
    for (const auto& [key, value] : fresh.items()) {
      out[key] = golden.contains(key) ? WithAddedFields(golden[key], value) : value;
    }
  } else if (golden.is_array() && fresh.is_array()) {
    for (size_t i = 0; i < std::min(golden.size(), fresh.size()); ++i) {
      out[i] = WithAddedFields(golden[i], fresh[i]);
    }
  }
  return out;
}

}  // namespace tpusim::golden
