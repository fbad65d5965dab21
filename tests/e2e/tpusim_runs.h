// Running `tpusim run` under mpirun from an end-to-end test and reading what it
// wrote: placement-log lines, --steps-csv rows, --params-out arrays, and the
// largest difference between two runs' parameters. Shared by the e2e test binaries.
#pragma once

#include <cmath>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <map>
#include <sstream>
#include <string>
#include <vector>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "base/npy.h"
#include "tests/e2e/shell.h"

namespace tpusim::e2e {

// The MPI ranks `tpusim run` needs for the run file at `config_path` with
// `set_args` (--set options only: the topology, the layout) on top; a failed
// `tpusim ranks` is a test failure showing its output.
inline int MpiRanksAt(const std::string& config_path, const std::string& set_args = "") {
  const Result r = Shell(Tpusim() + " ranks " + config_path + " " + set_args);
  EXPECT_EQ(r.rc, 0) << r.output;
  return r.rc == 0 ? std::stoi(r.output) : 1;
}

// The same for `config` under the source tree.
inline int MpiRanks(const std::string& config, const std::string& set_args) {
  return MpiRanksAt(Source(config), set_args);
}

// tpusim run under mpirun with `np` ranks (0 = what the config needs).
inline Result RunTpusim(const std::string& config, const std::string& args, int np = 0, int seconds = 120) {
  if (np == 0) np = MpiRanksAt(config);
  return Shell("timeout -k 5 " + std::to_string(seconds) + " mpirun -np " + std::to_string(np) +
               " --oversubscribe --bind-to none " + Tpusim() + " run " + config + " --quiet " + args);
}

// Trains a small MLP (hidden [16, 8], learning rate 0.05) on `config` for 2 loops
// of 3 steps with `args` on top, writes its parameters into TempDir()/params-NAME
// and returns that folder; a failed run is a test failure showing its output.
inline std::string TrainParams(const std::string& name, const std::string& config, const std::string& args,
                               int np = 0) {
  const std::string dir = TempDir() + "/params-" + name;
  std::filesystem::remove_all(dir);
  Result r = RunTpusim(Source(config),
                       "--set train.steps=6 --set train.iterations_per_loop=3 --set model.hidden=[16,8] "
                       "--set train.optimizer.learning_rate=0.05 " +
                           args + " --params-out " + dir,
                       np);
  EXPECT_EQ(r.rc, 0) << r.output;
  return dir;
}

// --set arguments for a small MLP trained by Shampoo that preconditions from step 2
// on; `service` is the body of shampoo.preconditioner, `extra` more shampoo keys.
inline std::string ShampooArgs(const std::string& service, const std::string& extra = "") {
  return "--set model.hidden=[16,8] --set 'train.optimizer={name: shampoo, learning_rate: 0.05, "
         "shampoo: {start_preconditioning_steps: 2, " +
         extra + "preconditioner: {" + service + "}}}'";
}

inline std::vector<nlohmann::json> ReadLines(const std::string& path) {
  std::vector<nlohmann::json> lines;
  std::ifstream in(path);
  for (std::string line; std::getline(in, line);) lines.push_back(nlohmann::json::parse(line));
  return lines;
}

inline nlohmann::json ReadJson(const std::string& path) { return nlohmann::json::parse(std::ifstream(path)); }

// A CSV file (the steps CSV) as rows of column -> value; a row with more cells
// than the header throws std::out_of_range.
inline std::vector<std::map<std::string, std::string>> ReadCsvRows(const std::string& path) {
  std::ifstream in(path);
  std::string line;
  std::getline(in, line);
  std::vector<std::string> header;
  std::stringstream h(line);
  for (std::string cell; std::getline(h, cell, ',');) header.push_back(cell);
  std::vector<std::map<std::string, std::string>> rows;
  while (std::getline(in, line)) {
    std::stringstream s(line);
    std::map<std::string, std::string> row;
    size_t i = 0;
    for (std::string cell; std::getline(s, cell, ',');) row[header.at(i++)] = cell;
    rows.push_back(row);
  }
  return rows;
}

// One float32 .npy file's values.
inline std::vector<float> ReadFloats(const std::string& path) {
  NpyArray a = ReadNpy(path);
  std::vector<float> values(a.data.size() / sizeof(float));
  std::memcpy(values.data(), a.data.data(), a.data.size());
  return values;
}

// Every array written by --params-out, by path relative to `dir`; with
// `with_slots` false the optimizer slots (slots/...) are left out.
inline std::map<std::string, std::vector<float>> ReadParams(const std::string& dir, bool with_slots = false) {
  std::map<std::string, std::vector<float>> params;
  for (const auto& entry : std::filesystem::recursive_directory_iterator(dir)) {
    if (entry.path().extension() != ".npy") continue;
    const std::string name = std::filesystem::relative(entry.path(), dir).string();
    if (!with_slots && name.rfind("slots/", 0) == 0) continue;
    params[name] = ReadFloats(entry.path().string());
  }
  return params;
}

// Largest |a - b| over every element of every parameter (inf if the sets differ).
inline double MaxDifference(const std::string& dir_a, const std::string& dir_b, bool with_slots = false) {
  auto a = ReadParams(dir_a, with_slots), b = ReadParams(dir_b, with_slots);
  if (a.size() != b.size() || a.empty()) return INFINITY;
  double worst = 0;
  for (const auto& [name, values] : a) {
    if (!b.count(name) || b[name].size() != values.size()) return INFINITY;
    for (size_t i = 0; i < values.size(); ++i) {
      worst = std::max(worst, std::fabs(double(values[i]) - b[name][i]));
    }
  }
  return worst;
}

}  // namespace tpusim::e2e
