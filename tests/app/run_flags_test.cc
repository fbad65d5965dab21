// The one table of `tpusim run`'s options (app/run_flags.h): every entry's example
// parses into run::RunOptions and renders back to the same arguments, so what
// `tpusim launch` gives mpirun is what the user gave; and `run`'s command line has
// exactly the table's options.
#include "app/run_flags.h"

#include <algorithm>
#include <set>
#include <string>
#include <vector>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

namespace tpusim::app {
namespace {

// `tpusim run CONFIG ARGS` parsed as run's command line builds it.
run::RunOptions Parse(const std::vector<std::string>& args) {
  CLI::App app;
  run::RunOptions options;
  app.add_option("CONFIG", options.config)->required();
  AddRunFlags(&app, options);
  std::vector<std::string> argv{"CONFIG"};
  argv.insert(argv.end(), args.begin(), args.end());
  std::reverse(argv.begin(), argv.end());  // CLI11 takes a vector in reverse order
  app.parse(argv);
  return options;
}

TEST(RunFlagsTest, EveryOptionsExampleComesBackAsGiven) {
  for (const RunFlag& flag : RunFlags()) {
    SCOPED_TRACE(flag.name);
    ASSERT_FALSE(flag.example.empty());
    EXPECT_EQ(flag.example.front(), flag.name);
    EXPECT_EQ(RunFlagArgs(Parse(flag.example)), flag.example);
  }
}

TEST(RunFlagsTest, DefaultsGiveNoArguments) { EXPECT_THAT(RunFlagArgs(Parse({})), testing::IsEmpty()); }

TEST(RunFlagsTest, AllExamplesTogetherComeBackInTableOrder) {
  std::vector<std::string> all;
  for (const RunFlag& flag : RunFlags()) all.insert(all.end(), flag.example.begin(), flag.example.end());
  EXPECT_EQ(RunFlagArgs(Parse(all)), all);
}

TEST(RunFlagsTest, RepeatedSetsTravelEachAsItsOwnSet) {
  EXPECT_EQ(RunFlagArgs(Parse({"--set", "a=1", "b=[1, 2]", "--set", "c=x"})),
            (std::vector<std::string>{"--set", "a=1", "--set", "b=[1, 2]", "--set", "c=x"}));
}

TEST(RunFlagsTest, TheCommandLineHasExactlyTheTablesOptions) {
  CLI::App app;
  run::RunOptions options;
  AddRunFlags(&app, options);
  std::set<std::string> registered, table;
  for (const CLI::Option* o : app.get_options()) {
    if (o->get_name() != "--help") registered.insert(o->get_name());
  }
  for (const RunFlag& flag : RunFlags()) table.insert(flag.name);
  EXPECT_EQ(registered, table);
  for (const char* name : {"--resume", "--quiet", "--au", "--expect-au", "--all-rows", "--set"}) {
    EXPECT_TRUE(table.count(name)) << name;
  }
}

}  // namespace
}  // namespace tpusim::app
