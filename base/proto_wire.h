// Protocol buffers' wire format, read: the one reader behind every decoder of
// protobuf bytes in tpusim (tf.train.Example records, TensorFlow's
// TopologyProto). A ProtoReader walks a window [begin, end) of one message's
// bytes and checks every bound before it reads, so malformed or hostile bytes
// are an Error naming the byte offset within the whole message, never a read
// past the end. Nested messages are readers over a smaller window of the same
// bytes (Delimited), so offsets stay absolute.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

namespace tpusim {

enum ProtoWireType : uint32_t {
  kProtoVarint = 0,
  kProtoFixed64 = 1,
  kProtoLengthDelimited = 2,
  kProtoFixed32 = 5,
};

class ProtoReader {
 public:
  // A field's tag: its number, wire type and the offset where the tag began.
  struct Tag {
    uint64_t field = 0;
    uint32_t wire_type = 0;
    size_t at = 0;
  };

  // Reads all of `message`. Errors read "<error_prefix><offset>: <what>", e.g.
  // prefix "tf.train.Example: malformed at byte offset ". The bytes must outlive
  // the reader and every view it returns.
  ProtoReader(std::string_view message, std::string error_prefix);

  bool done() const { return pos_ >= end_; }
  size_t pos() const { return pos_; }  // the offset of the next byte in the whole message
  size_t remaining() const { return end_ - pos_; }

  // A base-128 varint of at most 10 bytes whose value fits in 64 bits; `what`
  // names it in errors ("truncated varint (num_tasks)"), which name its first byte.
  uint64_t Varint(std::string_view what);
  // The next field's tag; a field number of 0 or one beyond 2^29 - 1 is an error.
  Tag NextTag();
  // Advances past `n` bytes and returns them; an error at the current offset
  // ("packed field needs 5 bytes but only 1 remain") when fewer remain.
  std::string_view Take(uint64_t n, std::string_view what);
  // The same `n` bytes as a reader of their own (a packed repeated field).
  ProtoReader Window(uint64_t n, std::string_view what);
  // A length-prefixed field: a reader over its bytes; an error at the length's
  // own offset ("length 88 runs past the end of its message") when they do not fit.
  ProtoReader Delimited();
  // A little-endian fixed32 (floats travel as their bits).
  uint32_t Fixed32(std::string_view what);
  // Passes over a field of `wire_type` whose tag began at `tag_at`; groups and
  // unknown wire types are an error there.
  void Skip(uint32_t wire_type, size_t tag_at);
  // What is left of this reader's window, without reading it.
  std::string_view rest() const { return bytes_.substr(pos_, end_ - pos_); }

  // Throws Error "<prefix><at>: <what>".
  [[noreturn]] void Reject(size_t at, std::string_view what) const;

 private:
  ProtoReader(std::string_view bytes, size_t begin, size_t end, const std::string& error_prefix);

  std::string_view bytes_;  // the whole message
  size_t pos_;
  size_t end_;
  std::string error_prefix_;
};

}  // namespace tpusim
