#include "infeed/tf_example.h"

#include <cstring>

#include "base/error.h"
#include "base/proto_wire.h"

namespace tpusim::infeed {
namespace {

float FloatOfBits(uint32_t bits) {
  float f;
  std::memcpy(&f, &bits, 4);
  return f;
}

void ParseBytesList(ProtoReader in, ExampleFeature& out) {
  while (!in.done()) {
    const auto tag = in.NextTag();
    if (tag.field == 1 && tag.wire_type == kProtoLengthDelimited) {
      out.bytes.push_back(in.Delimited().rest());
    } else {
      in.Skip(tag.wire_type, tag.at);
    }
  }
}

void ParseFloatList(ProtoReader in, ExampleFeature& out) {
  while (!in.done()) {
    const auto tag = in.NextTag();
    if (tag.field == 1 && tag.wire_type == kProtoLengthDelimited) {  // packed
      ProtoReader packed = in.Delimited();
      if (packed.rest().size() % 4 != 0) packed.Reject(packed.pos(), "packed float list length is not a multiple of 4");
      while (!packed.done()) out.floats.push_back(FloatOfBits(packed.Fixed32("float value")));
    } else if (tag.field == 1 && tag.wire_type == kProtoFixed32) {  // unpacked
      out.floats.push_back(FloatOfBits(in.Fixed32("float value")));
    } else {
      in.Skip(tag.wire_type, tag.at);
    }
  }
}

void ParseInt64List(ProtoReader in, ExampleFeature& out) {
  while (!in.done()) {
    const auto tag = in.NextTag();
    if (tag.field == 1 && tag.wire_type == kProtoLengthDelimited) {  // packed
      ProtoReader packed = in.Delimited();
      while (!packed.done()) out.int64s.push_back(static_cast<int64_t>(packed.Varint("int64 value")));
    } else if (tag.field == 1 && tag.wire_type == kProtoVarint) {  // unpacked
      out.int64s.push_back(static_cast<int64_t>(in.Varint("int64 value")));
    } else {
      in.Skip(tag.wire_type, tag.at);
    }
  }
}

// A oneof member replaces a value of another kind and merges into one of its own.
void ParseFeature(ProtoReader in, ExampleFeature& out) {
  while (!in.done()) {
    const auto tag = in.NextTag();
    if (tag.wire_type != kProtoLengthDelimited || tag.field < 1 || tag.field > 3) {
      in.Skip(tag.wire_type, tag.at);
      continue;
    }
    const auto kind = static_cast<FeatureKind>(tag.field - 1);
    if (kind != out.kind) out = ExampleFeature{kind, {}, {}, {}};
    if (kind == FeatureKind::kBytes) ParseBytesList(in.Delimited(), out);
    if (kind == FeatureKind::kFloat) ParseFloatList(in.Delimited(), out);
    if (kind == FeatureKind::kInt64) ParseInt64List(in.Delimited(), out);
  }
}

// A map entry: the key and the Feature; a missing key is "" and a missing value
// an empty BytesList (the defaults), and the entry replaces an earlier one.
void ParseEntry(ProtoReader in, ParsedExample& out) {
  std::string_view key;
  ExampleFeature feature;
  while (!in.done()) {
    const auto tag = in.NextTag();
    if (tag.field == 1 && tag.wire_type == kProtoLengthDelimited) {
      key = in.Delimited().rest();
    } else if (tag.field == 2 && tag.wire_type == kProtoLengthDelimited) {
      ParseFeature(in.Delimited(), feature);
    } else {
      in.Skip(tag.wire_type, tag.at);
    }
  }
  out[key] = std::move(feature);
}

void ParseFeatures(ProtoReader in, ParsedExample& out) {
  while (!in.done()) {
    const auto tag = in.NextTag();
    if (tag.field == 1 && tag.wire_type == kProtoLengthDelimited) {
      ParseEntry(in.Delimited(), out);
    } else {
      in.Skip(tag.wire_type, tag.at);
    }
  }
}

void PutVarint(std::string& out, uint64_t v) {
  while (v >= 0x80) {
    out.push_back(static_cast<char>((v & 0x7f) | 0x80));
    v >>= 7;
  }
  out.push_back(static_cast<char>(v));
}

void PutDelimited(std::string& out, uint32_t field, std::string_view bytes) {
  PutVarint(out, (uint64_t{field} << 3) | kProtoLengthDelimited);
  PutVarint(out, bytes.size());
  out.append(bytes);
}

std::string EncodeList(const NamedFeature& f) {
  std::string list;
  std::string packed;
  switch (f.kind) {
    case FeatureKind::kBytes:
      for (const std::string& b : f.bytes) PutDelimited(list, 1, b);
      return list;
    case FeatureKind::kFloat:
      for (float v : f.floats) {
        uint32_t bits;
        std::memcpy(&bits, &v, 4);
        for (int i = 0; i < 4; ++i) packed.push_back(static_cast<char>((bits >> (8 * i)) & 0xff));
      }
      break;
    case FeatureKind::kInt64:
      for (int64_t v : f.int64s) PutVarint(packed, static_cast<uint64_t>(v));
      break;
  }
  if (!packed.empty()) PutDelimited(list, 1, packed);  // proto3 omits an empty packed field
  return list;
}

}  // namespace

std::string_view FeatureKindName(FeatureKind kind) {
  switch (kind) {
    case FeatureKind::kFloat:
      return "float";
    case FeatureKind::kInt64:
      return "int64";
    case FeatureKind::kBytes:
      break;
  }
  return "bytes";
}

size_t ExampleFeature::size() const {
  switch (kind) {
    case FeatureKind::kFloat:
      return floats.size();
    case FeatureKind::kInt64:
      return int64s.size();
    case FeatureKind::kBytes:
      break;
  }
  return bytes.size();
}

ParsedExample ParseExample(std::string_view data) {
  ParsedExample out;
  ProtoReader in(data, "tf.train.Example: malformed at byte offset ");
  while (!in.done()) {
    const auto tag = in.NextTag();
    if (tag.field == 1 && tag.wire_type == kProtoLengthDelimited) {
      ParseFeatures(in.Delimited(), out);
    } else {
      in.Skip(tag.wire_type, tag.at);
    }
  }
  return out;
}

std::string EncodeExample(const std::vector<NamedFeature>& features) {
  std::string map;
  for (const NamedFeature& f : features) {
    std::string feature;
    PutDelimited(feature, static_cast<uint32_t>(f.kind) + 1, EncodeList(f));
    std::string entry;
    PutDelimited(entry, 1, f.key);
    PutDelimited(entry, 2, feature);
    PutDelimited(map, 1, entry);
  }
  std::string example;
  PutDelimited(example, 1, map);
  return example;
}

}  // namespace tpusim::infeed
