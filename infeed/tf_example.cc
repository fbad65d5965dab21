#include "infeed/tf_example.h"

#include <cstring>

#include "base/error.h"

namespace tpusim::infeed {
namespace {

enum WireType : uint32_t { kVarint = 0, kFixed64 = 1, kLengthDelimited = 2, kFixed32 = 5 };

// A bounded cursor over one message's bytes; `base` is the message's offset in the
// whole Example, so errors name absolute byte offsets.
class WireCursor {
 public:
  WireCursor(std::string_view bytes, size_t base) : bytes_(bytes), base_(base) {}

  bool done() const { return at_ >= bytes_.size(); }
  size_t offset() const { return base_ + at_; }

  uint64_t Varint() {
    uint64_t value = 0;
    for (int shift = 0; shift < 70; shift += 7) {
      if (done()) Bad("varint runs past the end of its message");
      const auto byte = static_cast<unsigned char>(bytes_[at_++]);
      if (shift == 63 && byte > 1) Bad("varint longer than 64 bits");
      value |= static_cast<uint64_t>(byte & 0x7f) << shift;
      if (!(byte & 0x80)) return value;
    }
    Bad("varint longer than 10 bytes");
  }

  // The field's tag: number and wire type.
  struct Tag {
    uint64_t field;
    uint32_t wire_type;
  };
  Tag NextTag() {
    const uint64_t tag = Varint();
    if ((tag >> 3) == 0) Bad("field number 0");
    return {tag >> 3, static_cast<uint32_t>(tag & 7)};
  }

  // A length-delimited field's bytes, with their absolute offset.
  WireCursor Delimited() {
    const size_t start = at_;
    const uint64_t length = Varint();
    if (length > bytes_.size() - at_) {
      at_ = start;  // name the length's own offset
      Bad(fmt::format("length {} runs past the end of its message", length));
    }
    WireCursor inner(bytes_.substr(at_, length), base_ + at_);
    at_ += length;
    return inner;
  }

  std::string_view rest() const { return bytes_.substr(at_); }

  uint32_t Fixed32() {
    if (bytes_.size() - at_ < 4) Bad("fixed32 runs past the end of its message");
    uint32_t v = 0;
    for (int i = 3; i >= 0; --i) v = (v << 8) | static_cast<unsigned char>(bytes_[at_ + i]);
    at_ += 4;
    return v;
  }

  void Skip(uint32_t wire_type) {
    switch (wire_type) {
      case kVarint: Varint(); return;
      case kFixed64:
        if (bytes_.size() - at_ < 8) Bad("fixed64 runs past the end of its message");
        at_ += 8;
        return;
      case kLengthDelimited: Delimited(); return;
      case kFixed32: Fixed32(); return;
      default: Bad(fmt::format("wire type {} (groups and unknown wire types are not tf.train.Example)", wire_type));
    }
  }

  [[noreturn]] void Bad(const std::string& what) const {
    Fail("tf.train.Example: malformed at byte offset {}: {}", offset(), what);
  }

 private:
  std::string_view bytes_;
  size_t base_;
  size_t at_ = 0;
};

float FloatOfBits(uint32_t bits) {
  float f;
  std::memcpy(&f, &bits, 4);
  return f;
}

void ParseBytesList(WireCursor in, ExampleFeature& out) {
  while (!in.done()) {
    const auto tag = in.NextTag();
    if (tag.field == 1 && tag.wire_type == kLengthDelimited) {
      out.bytes.push_back(in.Delimited().rest());
    } else {
      in.Skip(tag.wire_type);
    }
  }
}

void ParseFloatList(WireCursor in, ExampleFeature& out) {
  while (!in.done()) {
    const auto tag = in.NextTag();
    if (tag.field == 1 && tag.wire_type == kLengthDelimited) {  // packed
      WireCursor packed = in.Delimited();
      if (packed.rest().size() % 4 != 0) packed.Bad("packed float list length is not a multiple of 4");
      while (!packed.done()) out.floats.push_back(FloatOfBits(packed.Fixed32()));
    } else if (tag.field == 1 && tag.wire_type == kFixed32) {  // unpacked
      out.floats.push_back(FloatOfBits(in.Fixed32()));
    } else {
      in.Skip(tag.wire_type);
    }
  }
}

void ParseInt64List(WireCursor in, ExampleFeature& out) {
  while (!in.done()) {
    const auto tag = in.NextTag();
    if (tag.field == 1 && tag.wire_type == kLengthDelimited) {  // packed
      WireCursor packed = in.Delimited();
      while (!packed.done()) out.int64s.push_back(static_cast<int64_t>(packed.Varint()));
    } else if (tag.field == 1 && tag.wire_type == kVarint) {  // unpacked
      out.int64s.push_back(static_cast<int64_t>(in.Varint()));
    } else {
      in.Skip(tag.wire_type);
    }
  }
}

// A oneof member replaces a value of another kind and merges into one of its own.
void ParseFeature(WireCursor in, ExampleFeature& out) {
  while (!in.done()) {
    const auto tag = in.NextTag();
    if (tag.wire_type != kLengthDelimited || tag.field < 1 || tag.field > 3) {
      in.Skip(tag.wire_type);
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
void ParseEntry(WireCursor in, ParsedExample& out) {
  std::string_view key;
  ExampleFeature feature;
  while (!in.done()) {
    const auto tag = in.NextTag();
    if (tag.field == 1 && tag.wire_type == kLengthDelimited) {
      key = in.Delimited().rest();
    } else if (tag.field == 2 && tag.wire_type == kLengthDelimited) {
      ParseFeature(in.Delimited(), feature);
    } else {
      in.Skip(tag.wire_type);
    }
  }
  out[key] = std::move(feature);
}

void ParseFeatures(WireCursor in, ParsedExample& out) {
  while (!in.done()) {
    const auto tag = in.NextTag();
    if (tag.field == 1 && tag.wire_type == kLengthDelimited) {
      ParseEntry(in.Delimited(), out);
    } else {
      in.Skip(tag.wire_type);
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
  PutVarint(out, (uint64_t{field} << 3) | kLengthDelimited);
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
    case FeatureKind::kFloat: return "float";
    case FeatureKind::kInt64: return "int64";
    case FeatureKind::kBytes: break;
  }
  return "bytes";
}

size_t ExampleFeature::size() const {
  switch (kind) {
    case FeatureKind::kFloat: return floats.size();
    case FeatureKind::kInt64: return int64s.size();
    case FeatureKind::kBytes: break;
  }
  return bytes.size();
}

ParsedExample ParseExample(std::string_view data) {
  ParsedExample out;
  WireCursor in(data, 0);
  while (!in.done()) {
    const auto tag = in.NextTag();
    if (tag.field == 1 && tag.wire_type == kLengthDelimited) {
      ParseFeatures(in.Delimited(), out);
    } else {
      in.Skip(tag.wire_type);
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
