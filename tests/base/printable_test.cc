// Text from an input made safe for a one-line message (base/printable.h): control
// characters as \xNN, so no forged line or terminal escape; the length bounded.
#include "base/printable.h"

#include <string>

#include <gtest/gtest.h>

namespace tpusim {
namespace {

TEST(PrintableTest, ControlCharactersAreShownNotSent) {
  EXPECT_EQ(Printable("key\n\x1b[31mtpusim: error: INJECTED"), "key\\x0a\\x1b[31mtpusim: error: INJECTED");
  EXPECT_EQ(Printable(std::string("a\0b\x7f", 4)), "a\\x00b\\x7f");
  EXPECT_EQ(Printable("plain text"), "plain text");
}

TEST(PrintableTest, BytesThatAreNotUtf8AreShownAndUtf8IsKept) {
  EXPECT_EQ(Printable("donn\xc3\xa9"
                      "es \xe2\x82\xac \xf0\x9f\x98\x80"),
            "donn\xc3\xa9"
            "es \xe2\x82\xac \xf0\x9f\x98\x80");
  EXPECT_EQ(Printable("\x0a\xa0\x9c\x04"), "\\x0a\\xa0\\x9c\\x04");  // a varint's bytes, not text
  EXPECT_EQ(Printable("a\xc2\x9b"
                      "31mb"),
            "a\\xc2\\x9b31mb");                             // U+009B, a C1 CSI
  EXPECT_EQ(Printable("\xe2\x82"), "\\xe2\\x82");           // cut short
  EXPECT_EQ(Printable("\xed\xa0\x80"), "\\xed\\xa0\\x80");  // a UTF-16 surrogate
}

TEST(PrintableTest, LongTextIsCut) {
  EXPECT_EQ(Printable(std::string(500, 'k'), 10), std::string(10, 'k') + "...");
  std::string words;
  for (int i = 0; i < 2'000; ++i) words += "xxxxxxxxx ";
  const std::string message = PrintableError(words + "\n" + std::string(10, 'y'));
  EXPECT_EQ(message.size(), kErrorMessageChars + 3);
  EXPECT_EQ(message.find('\n'), std::string::npos);
}

// A key, value or name of thousands of characters quoted whole in a message keeps
// its start and end, so the line stays a few hundred characters.
TEST(PrintableTest, LongWordsOfAnErrorMessageAreCut) {
  const std::string key(5000, 'k');
  const std::string message = PrintableError("config.yaml: '" + key + "': unknown key");
  EXPECT_EQ(message, "config.yaml: '" + std::string(99, 'k') + "..." + std::string(55, 'k') + "': unknown key");
  const std::string path = "/tmp/" + std::string(120, 'd') + "/x.json:";  // 133 characters: whole
  EXPECT_EQ(PrintableError(path + " cannot write"), path + " cannot write");
  EXPECT_EQ(PrintableError("a  b "), "a  b ");
}

TEST(PrintableTest, AnErrorMessageOfManyLinesPrintsAsOne) {
  std::string lines;
  for (int i = 0; i < 20'000; ++i) lines += "nested\n";
  const std::string message = PrintableError(lines);
  EXPECT_EQ(message.find('\n'), std::string::npos);
  EXPECT_LE(message.size(), kErrorMessageChars + 3);
}

}  // namespace
}  // namespace tpusim
