// The one protobuf wire reader: values, nesting with absolute offsets, and every
// malformed case as an error naming its byte.
#include "base/proto_wire.h"

#include <string>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "base/error.h"

namespace tpusim {
namespace {

using ::testing::HasSubstr;

std::string ErrorReading(const std::string& bytes, void (*read)(ProtoReader&)) {
  ProtoReader reader(bytes, "m.pb: byte ");
  try {
    read(reader);
  } catch (const Error& e) {
    return e.what();
  }
  return "";
}

TEST(ProtoReaderTest, ReadsVarintsTagsAndFixed32) {
  // field 1 varint 300; field 2 fixed32 1.0f
  const std::string bytes("\x08\xac\x02\x15\x00\x00\x80\x3f", 8);
  ProtoReader r(bytes, "m.pb: byte ");
  ProtoReader::Tag t = r.NextTag();
  EXPECT_EQ(t.field, 1u);
  EXPECT_EQ(t.wire_type, kProtoVarint);
  EXPECT_EQ(t.at, 0u);
  EXPECT_EQ(r.Varint("v"), 300u);
  t = r.NextTag();
  EXPECT_EQ(t.field, 2u);
  EXPECT_EQ(t.wire_type, kProtoFixed32);
  EXPECT_EQ(t.at, 3u);
  EXPECT_EQ(r.Fixed32("f"), 0x3f800000u);
  EXPECT_TRUE(r.done());
}

TEST(ProtoReaderTest, NestedReadersKeepAbsoluteOffsets) {
  // field 1, length 4: { field 1 varint 1; field 9 varint 0 }, then field 2 varint 7
  const std::string bytes("\x0a\x04\x08\x01\x48\x00\x10\x07", 8);
  ProtoReader r(bytes, "m.pb: byte ");
  r.NextTag();
  ProtoReader inner = r.Delimited();
  EXPECT_EQ(inner.pos(), 2u);
  EXPECT_EQ(inner.rest(), std::string("\x08\x01\x48\x00", 4));
  const ProtoReader::Tag t = inner.NextTag();
  EXPECT_EQ(inner.Varint("v"), 1u);
  const ProtoReader::Tag skipped = inner.NextTag();
  EXPECT_EQ(skipped.at, 4u);
  inner.Skip(skipped.wire_type, skipped.at);
  EXPECT_TRUE(inner.done());
  EXPECT_EQ(t.field, 1u);
  r.NextTag();
  EXPECT_EQ(r.Varint("v"), 7u);
  EXPECT_TRUE(r.done());
}

TEST(ProtoReaderTest, MalformedBytesNameTheirByte) {
  EXPECT_EQ(ErrorReading("\x08\x80",
                         [](ProtoReader& r) {
                           r.NextTag();
                           r.Varint("x");
                         }),
            "m.pb: byte 1: truncated varint (x)");
  EXPECT_THAT(ErrorReading(std::string(10, '\xff') + "\x02", [](ProtoReader& r) { r.Varint("x"); }),
              HasSubstr("byte 0: varint overflows 64 bits (x)"));
  EXPECT_EQ(ErrorReading(std::string("\x00", 1), [](ProtoReader& r) { r.NextTag(); }),
            "m.pb: byte 0: invalid field tag 0");
  EXPECT_EQ(ErrorReading("\x0a\x58\x01",
                         [](ProtoReader& r) {
                           r.NextTag();
                           r.Delimited();
                         }),
            "m.pb: byte 1: length 88 runs past the end of its message (1 bytes remain)");
  EXPECT_EQ(ErrorReading("\x0a\x05\x01",
                         [](ProtoReader& r) {
                           r.NextTag();
                           r.Window(r.Varint("n"), "packed field");
                         }),
            "m.pb: byte 2: packed field needs 5 bytes but only 1 remain");
  EXPECT_EQ(ErrorReading("\x0b",
                         [](ProtoReader& r) {
                           auto t = r.NextTag();
                           r.Skip(t.wire_type, t.at);
                         }),
            "m.pb: byte 0: wire type 3 (groups or invalid) is not supported");
  EXPECT_EQ(ErrorReading("\x0d\x01",
                         [](ProtoReader& r) {
                           r.NextTag();
                           r.Fixed32("f");
                         }),
            "m.pb: byte 1: f needs 4 bytes but only 1 remain");
}

}  // namespace
}  // namespace tpusim
