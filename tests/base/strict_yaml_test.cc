// Strict YAML: what yaml-cpp would accept silently (a repeated key, a list used as
// a key, a second document, an alias bomb) is one clear error with file and line.
#include "base/strict_yaml.h"

#include <gtest/gtest.h>

#include "tests/common/error_of.h"

namespace tpusim {
namespace {

using testing::ErrorOf;

TEST(StrictYamlTest, ADuplicateKeyNamesBothLines) {
  EXPECT_EQ(ErrorOf([] { LoadStrictYaml("a: 1\nb:\n  c: 2\n  c: 3\n", "run.yaml"); }),
            "run.yaml:4:3: duplicate key 'c' (first at line 3); each key may appear once");
}

TEST(StrictYamlTest, AKeyMustBeAPlainString) {
  EXPECT_EQ(ErrorOf([] { LoadStrictYaml("? [a, b]\n: 1\n", "run.yaml"); }),
            "run.yaml:1:3: a key must be a plain string, got a list");
  EXPECT_EQ(ErrorOf([] { LoadStrictYaml("{x: 1}: 2\n", "t.yaml"); }),
            "t.yaml:1:1: a key must be a plain string, got a map");
}

TEST(StrictYamlTest, MalformedYamlAndSecondDocumentsAreErrors) {
  EXPECT_EQ(ErrorOf([] { LoadStrictYaml("a: [1, 2\n", "run.yaml"); }),
            "run.yaml:2:1: malformed YAML: end of sequence flow not found");
  EXPECT_EQ(ErrorOf([] { LoadStrictYaml("a: 1\n---\nb: 2\n", "run.yaml"); }),
            "run.yaml: holds more than one YAML document (separated by '---'); a config is one document");
  // yaml-cpp itself would read ",a" as an empty document (and LoadAll would never return).
  EXPECT_EQ(ErrorOf([] { LoadStrictYaml(",a", "--set x=,a"); }), "--set x=,a:1:1: malformed YAML: unexpected ','");
  // yaml-cpp ends this message with the escaped character itself: shown, one line.
  const std::string escape = ErrorOf([] { LoadStrictYaml("a: \"\\\x01\"\n", "run.yaml"); });
  EXPECT_NE(escape.find("malformed YAML: unknown escape character: \\x"), std::string::npos) << escape;
  EXPECT_EQ(escape.find_first_of("\n\x01"), std::string::npos) << escape;
}

TEST(StrictYamlTest, AliasesThatExpandWithoutBoundAreRefused) {
  std::string bomb = "a: &a [x, x, x, x, x, x, x, x, x, x]\n";
  for (char level = 'b'; level <= 'h'; ++level) {
    std::string prev(1, static_cast<char>(level - 1));
    bomb += std::string(1, level) + ": &" + level + " [*" + prev + ", *" + prev + ", *" + prev + ", *" + prev + ", *" +
            prev + ", *" + prev + ", *" + prev + ", *" + prev + ", *" + prev + ", *" + prev + "]\n";
  }
  EXPECT_EQ(ErrorOf([&] { LoadStrictYaml(bomb, "bomb.yaml"); }),
            "bomb.yaml: the document expands to more than 1000000 nodes (aliases counted at every use)");
}

TEST(StrictYamlTest, AnEmptyDocumentIsNull) {
  EXPECT_TRUE(LoadStrictYaml("", "e.yaml").IsNull());
  EXPECT_TRUE(LoadStrictYaml("# only a comment\n", "e.yaml").IsNull());
}

}  // namespace
}  // namespace tpusim
