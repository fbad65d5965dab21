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

TEST(PrintableTest, LongTextIsCut) {
  EXPECT_EQ(Printable(std::string(500, 'k'), 10), std::string(10, 'k') + "...");
  const std::string message = PrintableError(std::string(20'000, 'x') + "\n" + std::string(10, 'y'));
  EXPECT_EQ(message.size(), kErrorMessageChars + 3);
  EXPECT_EQ(message.find('\n'), std::string::npos);
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
