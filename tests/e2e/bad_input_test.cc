// The bad-input corpus (tests/e2e/bad_inputs/cases.txt): every adversarial input
// a user might give — configs, --set values, topologies, .npy files, command-line
// values, output paths — run through the real tpusim binary, each with the exact
// one line it must print, its exit code and a time limit (5 s for input errors).
// A case whose command is `tpusim validate RUN ...` is also run as
// `tpusim launch --dry-run RUN ...`, which must agree line for line.
//
// cases.txt: blocks separated by blank lines, one `key: value` per line:
//   case:    name (letters, digits, '-')
//   setup:   a shell command run first in the case's empty temporary folder (repeatable)
//   run:     the shell command under test, run in the same folder
//   expect:  its whole output (stdout and stderr), one line; {*} matches any text
//   exit:    its exit code (default 2)
//   timeout: CPU seconds it may take (default 5); wall time is cut at 3x that + 30 s,
//            so a hang fails too without a loaded machine failing a fast case
//   launch:  no — do not also run it through `tpusim launch --dry-run`
// In setup, run and expect: $TPUSIM is the binary, $SRC the source tree, $DIR the
// corpus folder, $RUN the default run file, $TMP the case's temporary folder.
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <map>
#include <sstream>

#include <gtest/gtest.h>
#include "source_dir.h"

namespace tpusim::e2e::bad_input {
namespace {

namespace fs = std::filesystem;

struct Case {
  std::string name;
  std::vector<std::string> setup;
  std::string run;
  std::string expect;
  int exit = 2;
  double timeout_s = 5;
  bool launch = true;
};

// gtest prints a case by its name, not its bytes.
void PrintTo(const Case& c, std::ostream* os) { *os << c.name; }

const std::string kSource = TPUSIM_SOURCE_DIR;
const std::string kCorpus = kSource + "/tests/e2e/bad_inputs";

void AddField(Case& c, const std::string& key, const std::string& value) {
  if (key == "case")
    c.name = value;
  else if (key == "setup")
    c.setup.push_back(value);
  else if (key == "run")
    c.run = value;
  else if (key == "expect")
    c.expect = value;
  else if (key == "exit")
    c.exit = std::stoi(value);
  else if (key == "timeout")
    c.timeout_s = std::stod(value);
  else if (key == "launch")
    c.launch = value != "no";
  else
    throw std::runtime_error("cases.txt: unknown field '" + key + "'");
}

std::vector<Case> LoadCases() {
  std::vector<Case> cases;
  std::ifstream in(kCorpus + "/cases.txt");
  Case current;
  for (std::string line; std::getline(in, line);) {
    if (line.empty()) {
      if (!current.name.empty()) cases.push_back(current);
      current = Case{};
      continue;
    }
    if (line[0] == '#') continue;
    size_t colon = line.find(':');
    if (colon == std::string::npos) throw std::runtime_error("cases.txt: no 'key:' in: " + line);
    AddField(current, line.substr(0, colon), line.substr(line.find_first_not_of(' ', colon + 1)));
  }
  if (!current.name.empty()) cases.push_back(current);
  return cases;
}

std::map<std::string, std::string> Variables(const std::string& tmp) {
  return {{"$TPUSIM", fs::absolute(std::getenv("TPUSIM_BIN") ? std::getenv("TPUSIM_BIN") : "tpusim").string()},
          {"$SRC", kSource},
          {"$DIR", kCorpus},
          {"$RUN", kSource + "/configs/runs/v3-8-per-host.yaml"},
          {"$TMP", tmp}};
}

std::string Substitute(std::string text, const std::string& tmp) {
  const std::map<std::string, std::string> vars = Variables(tmp);
  for (const auto& [var, value] : vars) {
    for (size_t at = text.find(var); at != std::string::npos; at = text.find(var, at + value.size())) {
      text.replace(at, var.size(), value);
    }
  }
  return text;
}

struct Result {
  int rc = -1;
  std::string output;
  double cpu_seconds = 0;  // user + system of the command and everything it waited for
};

double ChildrenCpuSeconds() {
  rusage usage{};
  getrusage(RUSAGE_CHILDREN, &usage);
  auto seconds = [](const timeval& t) { return static_cast<double>(t.tv_sec) + static_cast<double>(t.tv_usec) * 1e-6; };
  return seconds(usage.ru_utime) + seconds(usage.ru_stime);
}

// Runs `command` with sh in `dir` under a hard timeout; stdout and stderr together.
Result RunShell(const std::string& command, const std::string& dir, double timeout_s) {
  std::string script = dir + "/.command.sh";
  std::ofstream(script) << command << "\n";
  std::string line =
      "cd '" + dir + "' && timeout -k 2 " + std::to_string(3 * timeout_s + 30) + " sh '" + script + "' 2>&1";
  double start = ChildrenCpuSeconds();
  Result r;
  FILE* pipe = popen(line.c_str(), "r");
  std::array<char, 4096> buffer;
  while (size_t n = fread(buffer.data(), 1, buffer.size(), pipe)) r.output.append(buffer.data(), n);
  int status = pclose(pipe);
  r.cpu_seconds = ChildrenCpuSeconds() - start;
  r.rc = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
  return r;
}

// No input makes a line longer than this (issue 52: "~300 characters"), counting
// the corpus's paths as their names ($TMP, $SRC, ...): their length is this
// machine's, not the message's.
constexpr size_t kLongestLine = 300;

size_t LongestLine(std::string text, const std::string& tmp) {
  std::vector<std::pair<std::string, std::string>> by_length;  // value, name: the longest value first
  for (const auto& [var, value] : Variables(tmp)) by_length.emplace_back(value, var);
  std::sort(by_length.begin(), by_length.end(),
            [](const auto& a, const auto& b) { return a.first.size() > b.first.size(); });
  for (const auto& [value, var] : by_length) {
    for (size_t at = text.find(value); at != std::string::npos; at = text.find(value, at + var.size())) {
      text.replace(at, value.size(), var);
    }
  }
  size_t longest = 0;
  std::istringstream lines(text);
  for (std::string line; std::getline(lines, line);) longest = std::max(longest, line.size());
  return longest;
}

// Whether `text` equals `pattern`, where each {*} in the pattern matches any text.
bool Matches(const std::string& pattern, const std::string& text) {
  size_t star = pattern.find("{*}");
  if (star == std::string::npos) return pattern == text;
  if (text.compare(0, star, pattern, 0, star) != 0) return false;
  std::string rest = pattern.substr(star + 3);
  for (size_t at = star; at <= text.size(); ++at) {
    if (Matches(rest, text.substr(at))) return true;
  }
  return false;
}

class BadInputCorpus : public ::testing::TestWithParam<Case> {
 protected:
  void SetUp() override {
    tmp_ = (fs::temp_directory_path() / ("tpusim_bad_" + GetParam().name + "_" + std::to_string(getpid()))).string();
    fs::remove_all(tmp_);
    fs::create_directories(tmp_);
  }
  void TearDown() override { fs::remove_all(tmp_); }

  void Expect(const std::string& command) {
    const Case& c = GetParam();
    Result r = RunShell(Substitute(command, tmp_), tmp_, c.timeout_s);
    std::string expected = Substitute(c.expect, tmp_) + "\n";
    EXPECT_EQ(r.rc, c.exit) << command << "\n" << r.output;
    EXPECT_TRUE(Matches(expected, r.output)) << command << "\nexpected: " << ::testing::PrintToString(expected)
                                             << "\nactual:   " << ::testing::PrintToString(r.output);
    EXPECT_LT(r.cpu_seconds, c.timeout_s) << command;
    EXPECT_LE(LongestLine(r.output, tmp_), kLongestLine) << command << "\n" << r.output;
  }

  std::string tmp_;
};

TEST_P(BadInputCorpus, PrintsItsOneLine) {
  const Case& c = GetParam();
  for (const std::string& setup : c.setup) {
    Result r = RunShell(Substitute(setup, tmp_), tmp_, 120);
    ASSERT_EQ(r.rc, 0) << "setup failed: " << setup << "\n" << r.output;
  }
  Expect(c.run);
  const std::string validate = "$TPUSIM validate ";
  if (c.launch && c.exit != 0 && c.run.rfind(validate, 0) == 0) {
    Expect("$TPUSIM launch --dry-run " + c.run.substr(validate.size()));
  }
}

std::string CaseName(const ::testing::TestParamInfo<Case>& info) {
  std::string name = info.param.name;
  for (char& ch : name) {
    if (!std::isalnum(static_cast<unsigned char>(ch))) ch = '_';
  }
  return name;
}

INSTANTIATE_TEST_SUITE_P(Corpus, BadInputCorpus, ::testing::ValuesIn(LoadCases()), CaseName);

}  // namespace

}  // namespace tpusim::e2e::bad_input
