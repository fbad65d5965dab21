#include "run/config_node.h"

#include "base/strict_yaml.h"

namespace tpusim::run {

ConfigNode::ConfigNode(YAML::Node node, std::string path, std::string source)
    : node_(std::move(node)), path_(std::move(path)), source_(std::move(source)) {
  if (node_ && !node_.IsNull() && !node_.IsMap()) {
    Fail("{}: {}: expected a map of keys", source_, path_.empty() ? "(top level)" : path_);
  }
  if (!node_ || !node_.IsMap()) return;
  for (const auto& entry : node_) {
    // Documents come through LoadStrictYaml, which has rejected non-scalar and repeated keys.
    if (!entry.first.IsScalar()) Fail("{}: {}: a key must be a plain string", source_, path_);
    std::string key = entry.first.Scalar();
    if (index_.emplace(key, entry.second).second) keys_.push_back(std::move(key));
  }
}

bool ConfigNode::Has(const std::string& key) const {
  auto it = index_.find(key);
  return it != index_.end() && !it->second.IsNull();
}

std::string ConfigNode::KeyPath(const std::string& key) const { return path_.empty() ? key : path_ + "." + key; }

void ConfigNode::FailAt(const std::string& key, const std::string& message) const {
  Fail("{}: {}: {}", source_, KeyPath(key), message);
}

ConfigNode ConfigNode::Child(const std::string& key) {
  used_.insert(key);
  if (!Has(key)) return ConfigNode(YAML::Node(YAML::NodeType::Map), KeyPath(key), source_);
  if (!At(key).IsMap()) FailAt(key, "expected a map of keys");
  return ConfigNode(At(key), KeyPath(key), source_);
}

std::vector<ConfigNode> ConfigNode::Sequence(const std::string& key) {
  used_.insert(key);
  std::vector<ConfigNode> items;
  if (!Has(key)) return items;
  const YAML::Node& list = At(key);
  if (!list.IsSequence()) FailAt(key, "expected a list");
  for (size_t i = 0; i < list.size(); ++i) {
    items.emplace_back(list[i], fmt::format("{}[{}]", KeyPath(key), i), source_);
  }
  return items;
}

void ConfigNode::Finish() const {
  for (const std::string& key : Keys()) {
    if (!used_.count(key)) FailAt(key, "unknown key");
  }
}

void ApplyOverride(YAML::Node& root, const std::string& assignment) {
  size_t eq = assignment.find('=');
  if (eq == std::string::npos || eq == 0) {
    Fail("--set {}: expected key=value, e.g. --set train.steps=20", assignment);
  }
  std::string key = assignment.substr(0, eq);
  YAML::Node value = LoadStrictYaml(assignment.substr(eq + 1), "--set " + assignment);
  std::vector<std::string> parts;
  for (size_t start = 0;;) {
    size_t dot = key.find('.', start);
    parts.push_back(key.substr(start, dot - start));
    if (parts.back().empty()) {
      Fail("--set {}: '{}' has an empty key part; expected key=value, e.g. --set train.steps=20", assignment, key);
    }
    if (dot == std::string::npos) break;
    start = dot + 1;
  }
  std::vector<YAML::Node> chain{root};
  for (size_t i = 0; i + 1 < parts.size(); ++i) {
    YAML::Node next = chain.back()[parts[i]];
    if (!next || next.IsNull()) next = YAML::Node(YAML::NodeType::Map);
    if (!next.IsMap()) Fail("--set {}: '{}' is not a map", assignment, parts[i]);
    chain.back()[parts[i]] = next;
    chain.push_back(chain.back()[parts[i]]);
  }
  chain.back()[parts.back()] = value;
}

}  // namespace tpusim::run
