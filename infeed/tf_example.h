// tf.train.Example (tensorflow/core/example/example.proto, feature.proto) read and
// written in the protobuf wire format by a small hand-written codec:
//   Example  { Features features = 1; }
//   Features { map<string, Feature> feature = 1; }   (entries: key = 1, value = 2)
//   Feature  { oneof kind { BytesList bytes_list = 1; FloatList float_list = 2;
//                           Int64List int64_list = 3; } }
//   BytesList { repeated bytes value = 1; }  FloatList { repeated float value = 1; }
//   Int64List { repeated int64 value = 1; }
// Why not libprotobuf: these five messages are all tpusim ever reads, a generated
// parser would bring a protoc step and a large runtime for them, and a reader that
// returns byte views into the record (no copies of JPEG bytes) is what the input
// pipeline wants. The reader follows the wire format's rules as protobuf's own
// parser does: unknown fields are skipped, an embedded message that appears twice
// is merged (features of both kept, list values appended), a later map entry with
// the same key replaces an earlier one, a oneof keeps the kind set last, and
// repeated scalars are accepted packed (wire type 2, what proto3 and TensorFlow
// write) and unpacked (one tag per value, what proto2 writers without
// [packed = true] emit) — a conforming parser must take both.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

namespace tpusim::infeed {

enum class FeatureKind { kBytes, kFloat, kInt64 };

// "bytes", "float", "int64".
std::string_view FeatureKindName(FeatureKind kind);

// One feature of a parsed Example. Bytes values view the record's data: valid
// while the buffer passed to ParseExample lives.
struct ExampleFeature {
  FeatureKind kind = FeatureKind::kBytes;
  std::vector<std::string_view> bytes;
  std::vector<float> floats;
  std::vector<int64_t> int64s;

  // How many values the feature holds, of its kind.
  size_t size() const;
};

using ParsedExample = std::unordered_map<std::string_view, ExampleFeature>;

// Parses a serialized tf.train.Example. Returns the features by key (keys view
// `data`). Throws Error "tf.train.Example: ..." naming what is malformed and the
// byte offset (a truncated varint or field, a length past the end, wire types 3,
// 4, 6, 7, a packed float list whose length is not a multiple of 4).
ParsedExample ParseExample(std::string_view data);

// One feature to encode: key and values of `kind`.
struct NamedFeature {
  std::string key;
  FeatureKind kind = FeatureKind::kBytes;
  std::vector<std::string> bytes;
  std::vector<float> floats;
  std::vector<int64_t> int64s;
};

// The serialized Example holding `features` in order, lists packed, as
// TensorFlow's SerializeToString writes them (map entries in the order given).
std::string EncodeExample(const std::vector<NamedFeature>& features);

}  // namespace tpusim::infeed
