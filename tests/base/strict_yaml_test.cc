// Strict YAML: what yaml-cpp would accept silently (a repeated key, a list used as
// a key, a second document, an alias bomb) is one clear error with file and line;
// the tree libyaml's events build reads as yaml-cpp's node of the same text would.
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

TEST(StrictYamlTest, ColumnsCountBytesAsYamlCppDoes) {
  // "é" is two bytes: the second key starts at byte 13 of its line, character 11.
  EXPECT_EQ(ErrorOf([] { LoadStrictYaml("a: {\xc3\xa9\xc3\xa9: 1, \xc3\xa9\xc3\xa9: 2}\n", "u.yaml"); }),
            "u.yaml:1:14: duplicate key '\xc3\xa9\xc3\xa9' (first at line 1); each key may appear once");
}

TEST(StrictYamlTest, NestingDeeperThanYamlCppReadsIsMalformed) {
  const std::string deep = std::string(600, '[') + std::string(600, ']');
  EXPECT_NE(ErrorOf([&] { LoadStrictYaml(deep, "d.yaml"); }).find("d.yaml:1:"), std::string::npos);
  EXPECT_NE(ErrorOf([&] { LoadStrictYaml(deep, "d.yaml"); }).find(": malformed YAML: "), std::string::npos);
  const std::string shallow = std::string(400, '[') + std::string(400, ']');
  EXPECT_TRUE(LoadStrictYaml(shallow, "d.yaml").IsSequence());
}

TEST(StrictYamlTest, ValuesReadAsYamlCppReadsThem) {
  const YamlNode root =
      LoadStrictYaml("a: ~\nb: null\nc:\nd: 'null'\ne: \"\"\nf: !!str\ng: [1, 0x10, 010]\nh: {x: yes}\n", "v.yaml");
  for (const char* key : {"a", "b", "c"}) EXPECT_TRUE(root[key].IsNull()) << key;
  EXPECT_EQ(root["d"].Scalar(), "null");
  EXPECT_TRUE(root["e"].IsScalar());
  EXPECT_TRUE(root["f"].IsScalar());
  EXPECT_FALSE(root["missing"]);
  ASSERT_EQ(root["g"].size(), 3u);
  EXPECT_EQ(root["g"][1].as<int>(), 16);
  EXPECT_EQ(root["g"][2].as<int>(), 8);
  EXPECT_TRUE(root["h"]["x"].as<bool>());
  EXPECT_EQ(root.Key(6).Scalar(), "g");
  EXPECT_EQ(root["g"].Mark().line, 6);
  EXPECT_EQ(root["g"].Mark().column, 3);
}

TEST(StrictYamlTest, DumpKeepsStylesTagsAndSharedAliases) {
  const YamlNode root = LoadStrictYaml("a: &x [1, 2]\nb: *x\nc:\n  - !foo q\nd: {k: v}\n", "s.yaml");
  EXPECT_EQ(root.Dump(), YAML::Dump(YAML::Load("a: &x [1, 2]\nb: *x\nc:\n  - !foo q\nd: {k: v}\n")));
  EXPECT_EQ(root["b"].Mark().line, 0);  // an alias is the node it names
}

TEST(StrictYamlTest, WithEntryChangesACopy) {
  const YamlNode root = LoadStrictYaml("a: {b: 1}\nc: 2\n", "w.yaml");
  const YamlNode value = LoadStrictYaml("[3, 4]", "--set");
  const YamlNode replaced = root["a"].WithEntry("b", value);
  EXPECT_EQ(replaced.Root().Dump(), "a: {b: [3, 4]}\nc: 2");
  const YamlNode added = root.WithEntry("d", YamlNode::EmptyMap());
  YAML::Node expected = YAML::Load("a: {b: 1}\nc: 2\n");  // what yaml-cpp's node[key] = value gives
  expected["d"] = YAML::Node(YAML::NodeType::Map);
  EXPECT_EQ(added.Dump(), YAML::Dump(expected));
  EXPECT_EQ(root.Dump(), "a: {b: 1}\nc: 2");
}

}  // namespace
}  // namespace tpusim
