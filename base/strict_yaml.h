// Loading YAML the way every tpusim reader needs it: parse errors become
// tpusim::Error with file, line and column, and a document is rejected when a map
// repeats a key (a reader would silently see one of them), when a key is not a
// plain string (a list or map used as a key), or when aliases expand it beyond a
// bounded number of nodes (a "billion laughs" document). Run configs, --set
// values, topology files and dataset manifests all load through here.
//
// libyaml's event parser reads the text (a 10 MB run file in a fraction of a
// second) into a compact tree of YamlNode. Values keep yaml-cpp's meaning: a
// plain ~, null, Null, NULL or empty value is null, collections remember flow or
// block style, and YamlNode::as<T>() converts a value with yaml-cpp's own rules.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <string_view>

#include <yaml-cpp/yaml.h>

namespace tpusim {

// Nodes a document may expand to, aliases counted at every use.
inline constexpr int64_t kMaxYamlNodes = 1'000'000;

namespace yaml_internal {
struct YamlTree;
}  // namespace yaml_internal

// Where a node starts in its text, 0-based with the column in bytes (as
// YAML::Mark); null for a node that was not read from a text.
struct YamlMark {
  int line = -1;
  int column = -1;
  bool is_null() const { return line < 0; }
};

// One node of a loaded document: null, a scalar, a list or a map. A cheap handle:
// copies share the document, which lives as long as any handle to it, and is never
// changed in place (WithEntry makes a changed copy). A default-constructed node is
// undefined, as is what operator[] gives for a missing key; an alias is the node it
// names (the same handle, mark included).
class YamlNode {
 public:
  YamlNode() = default;

  // Whether the node exists (false for a missing key).
  explicit operator bool() const { return tree_ != nullptr; }
  bool IsNull() const;
  bool IsScalar() const;
  bool IsSequence() const;
  bool IsMap() const;
  // A scalar's text; empty for any other node.
  std::string_view Scalar() const;
  // Items of a list, entries of a map; 0 for any other node.
  size_t size() const;
  // Item `i` of a list; requires i < size().
  YamlNode operator[](size_t i) const;
  // The value of the first entry of this map whose key is the scalar `key`;
  // undefined when there is none or this is not a map. Linear in size().
  YamlNode operator[](std::string_view key) const;
  // Key and value of entry `i` of a map, in file order; requires i < size().
  YamlNode Key(size_t i) const;
  YamlNode Value(size_t i) const;
  YamlMark Mark() const;
  // The root of this node's document.
  YamlNode Root() const { return YamlNode(tree_, 0); }

  // The node as yaml-cpp's YAML::Node (tags, styles and shared aliases kept, marks
  // not): for YAML::Dump, YAML::Emitter and yaml-cpp's conversions.
  YAML::Node ToYaml() const;
  // YAML::Dump of ToYaml(): the node as text, for messages.
  std::string Dump() const;
  // The value converted as yaml-cpp's node.as<T>() does; throws what it throws
  // (YAML::BadConversion) when the value does not convert.
  template <typename T>
  T as() const {
    return ToYaml().template as<T>();
  }

  // A copy of the whole document in which this map's entry `key` holds `value`
  // (replacing an existing value where it stands, else added last), as yaml-cpp's
  // node[key] = value does; returns this node in the copy. Requires IsMap().
  YamlNode WithEntry(std::string_view key, const YamlNode& value) const;
  // A map without entries (not read from a text).
  static YamlNode EmptyMap();

 private:
  friend YamlNode LoadStrictYaml(std::string_view text, const std::string& source);
  friend void CheckYamlDocument(const YamlNode& root, const std::string& source);
  YamlNode(std::shared_ptr<const yaml_internal::YamlTree> tree, uint32_t index)
      : tree_(std::move(tree)), index_(index) {}
  YamlNode Child(size_t i) const;

  std::shared_ptr<const yaml_internal::YamlTree> tree_;
  uint32_t index_ = 0;
};

// Parses `text`; `source` names it in messages ("run.yaml", "--set a.b=..."). An
// empty document gives a null node. Throws Error "<source>:<line>:<column>:
// malformed YAML: ..." on malformed YAML, and Error for a document CheckYamlDocument
// rejects or that holds more than one document.
YamlNode LoadStrictYaml(std::string_view text, const std::string& source);

// Reads and parses the file `path` like LoadStrictYaml. Throws Error naming the
// path when it is missing, not a regular file or unreadable.
YamlNode LoadStrictYamlFile(const std::string& path);

// Throws Error "<source>:<line>:<column>: ..." for a duplicate key or a key that is
// not a scalar, and Error for more than kMaxYamlNodes nodes.
void CheckYamlDocument(const YamlNode& root, const std::string& source);

}  // namespace tpusim
