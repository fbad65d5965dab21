// Typed, strict reading of a YAML config: every key a reader asks for is marked
// as used, and Finish() rejects any key nobody asked for, so a typo is an error
// instead of a silently ignored setting. Messages name the full dotted key.
#pragma once

#include <optional>
#include <set>
#include <string>
#include <vector>

#include <yaml-cpp/yaml.h>

#include "base/error.h"

namespace tpusim::sim {

class ConfigNode {
 public:
  // `path` is the dotted key of `node` ("" at the root), `source` the file name.
  ConfigNode(YAML::Node node, std::string path, std::string source);

  bool Has(const std::string& key) const;
  // Reads `key` into `out` when present (leaving the default otherwise). Throws
  // Error "<file>: <path.key>: expected <what>, got '<text>'" on a type mismatch.
  template <typename T>
  void Get(const std::string& key, T& out);
  // Like Get for an optional value: null or absent leaves `out` empty.
  template <typename T>
  void GetOptional(const std::string& key, std::optional<T>& out) {
    if (Has(key)) {
      T value{};
      Get(key, value);
      out = value;
    }
    used_.insert(key);
  }
  // A child map; an absent key gives an empty map. Throws when it is not a map.
  ConfigNode Child(const std::string& key);
  // A list of maps under `key` ("key[0]", "key[1]", ... in messages); absent = empty.
  std::vector<ConfigNode> Sequence(const std::string& key);
  // Names of the entries of this map, in file order.
  std::vector<std::string> Keys() const;
  const std::string& path() const { return path_; }
  std::string KeyPath(const std::string& key) const;
  const std::string& source() const { return source_; }
  // Throws Error naming the first key of this map that was never read.
  void Finish() const;
  [[noreturn]] void FailAt(const std::string& key, const std::string& message) const;

 private:
  YAML::Node node_;
  std::string path_;
  std::string source_;
  std::set<std::string> used_;
};

template <typename T>
void ConfigNode::Get(const std::string& key, T& out) {
  used_.insert(key);
  if (!Has(key)) return;
  YAML::Node value = node_[key];
  try {
    out = value.as<T>();
  } catch (const YAML::Exception&) {
    std::string text = value.IsScalar() ? value.Scalar() : YAML::Dump(value);
    FailAt(key, "cannot read '" + text + "' as the expected type");
  }
}

// Applies one "--set a.b.c=value" override to `root`; the value is parsed as YAML
// (so "[64, 32]" is a list). Throws Error for a malformed assignment.
void ApplyOverride(YAML::Node& root, const std::string& assignment);

// Loads a YAML file, turning parse errors into Error with file and line.
YAML::Node LoadYamlFile(const std::string& path);

}  // namespace tpusim::sim
