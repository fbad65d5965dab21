// The main of e2e_tests, the one binary that holds every end-to-end test file
// (tests/e2e/meson.build: one binary compiles GoogleTest's and nlohmann/json's
// templates once instead of once per file). `--file=NAME_test.cc` runs the tests
// defined in that file only, each meson test one file as before; a --gtest_filter
// given too narrows the file's tests further, and gtest's sharding
// (GTEST_TOTAL_SHARDS, GTEST_SHARD_INDEX) splits what is left. A file none of whose
// tests is left fails (exit 1): a misspelt name must not pass with no test run.
#include <cstdio>
#include <cstring>
#include <string>
#include <string_view>
#include <vector>

#include <gtest/gtest.h>

namespace {

// gtest's filter syntax: '*' any run of characters, '?' one character.
bool GlobMatches(std::string_view pattern, std::string_view name) {
  if (pattern.empty()) return name.empty();
  if (pattern[0] == '*') {
    for (size_t skip = 0; skip <= name.size(); ++skip) {
      if (GlobMatches(pattern.substr(1), name.substr(skip))) return true;
    }
    return false;
  }
  if (name.empty() || (pattern[0] != '?' && pattern[0] != name[0])) return false;
  return GlobMatches(pattern.substr(1), name.substr(1));
}

std::vector<std::string> SplitPatterns(std::string_view list) {
  std::vector<std::string> patterns;
  while (!list.empty()) {
    const size_t colon = list.find(':');
    patterns.emplace_back(list.substr(0, colon));
    list = colon == std::string_view::npos ? std::string_view() : list.substr(colon + 1);
  }
  return patterns;
}

bool AnyMatches(const std::vector<std::string>& patterns, const std::string& name) {
  for (const std::string& p : patterns) {
    if (GlobMatches(p, name)) return true;
  }
  return false;
}

// The filter that runs the tests of `file` that the user's filter (POSITIVE[-NEGATIVE])
// lets through: their full names, then the user's negative patterns.
std::string FileFilter(const std::string& file, const std::string& user_filter) {
  const size_t dash = user_filter.find('-');
  const std::vector<std::string> positive = SplitPatterns(user_filter.substr(0, dash));
  const std::string negative = dash == std::string::npos ? "" : user_filter.substr(dash);
  std::string filter;
  const testing::UnitTest& all = *testing::UnitTest::GetInstance();
  for (int s = 0; s < all.total_test_suite_count(); ++s) {
    const testing::TestSuite& suite = *all.GetTestSuite(s);
    for (int t = 0; t < suite.total_test_count(); ++t) {
      const testing::TestInfo& test = *suite.GetTestInfo(t);
      const std::string name = std::string(suite.name()) + "." + test.name();
      const std::string_view path = test.file();
      const bool in_file = path.size() >= file.size() + 1 && path.substr(path.size() - file.size()) == file &&
                           path[path.size() - file.size() - 1] == '/';
      if (!in_file || (!positive.empty() && !AnyMatches(positive, name))) continue;
      filter += (filter.empty() ? "" : ":") + name;
    }
  }
  return filter.empty() ? filter : filter + negative;
}

}  // namespace

int main(int argc, char** argv) {
  testing::InitGoogleTest(&argc, argv);
  std::string file;
  for (int i = 1; i < argc; ++i) {
    if (std::strncmp(argv[i], "--file=", 7) == 0) {
      file = argv[i] + 7;
    } else {
      fprintf(stderr, "e2e_tests: unknown argument %s (give --file=NAME_test.cc and gtest's flags)\n", argv[i]);
      return 2;
    }
  }
  if (!file.empty()) {
    const std::string filter = FileFilter(file, GTEST_FLAG_GET(filter));
    // A misspelt file, or a filter that leaves none of its tests, must not pass.
    if (filter.empty()) {
      fprintf(stderr, "e2e_tests: no test of %s passes the filter '%s'\n", file.c_str(),
              GTEST_FLAG_GET(filter).c_str());
      return 1;
    }
    GTEST_FLAG_SET(filter, filter);
  }
  return RUN_ALL_TESTS();
}
