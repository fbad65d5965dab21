#include "sim/config_node.h"

#include <filesystem>
#include <fstream>

namespace tpusim::sim {

ConfigNode::ConfigNode(YAML::Node node, std::string path, std::string source)
    : node_(std::move(node)), path_(std::move(path)), source_(std::move(source)) {
  if (node_ && !node_.IsNull() && !node_.IsMap()) {
    Fail("{}: {}: expected a map of keys", source_, path_.empty() ? "(top level)" : path_);
  }
}

bool ConfigNode::Has(const std::string& key) const {
  return node_ && node_.IsMap() && node_[key] && !node_[key].IsNull();
}

std::string ConfigNode::KeyPath(const std::string& key) const {
  return path_.empty() ? key : path_ + "." + key;
}

void ConfigNode::FailAt(const std::string& key, const std::string& message) const {
  Fail("{}: {}: {}", source_, KeyPath(key), message);
}

ConfigNode ConfigNode::Child(const std::string& key) {
  used_.insert(key);
  if (!Has(key)) return ConfigNode(YAML::Node(YAML::NodeType::Map), KeyPath(key), source_);
  if (!node_[key].IsMap()) FailAt(key, "expected a map of keys");
  return ConfigNode(node_[key], KeyPath(key), source_);
}

std::vector<ConfigNode> ConfigNode::Sequence(const std::string& key) {
  used_.insert(key);
  std::vector<ConfigNode> items;
  if (!Has(key)) return items;
  if (!node_[key].IsSequence()) FailAt(key, "expected a list");
  for (size_t i = 0; i < node_[key].size(); ++i) {
    items.emplace_back(node_[key][i], fmt::format("{}[{}]", KeyPath(key), i), source_);
  }
  return items;
}

std::vector<std::string> ConfigNode::Keys() const {
  std::vector<std::string> keys;
  if (!node_ || !node_.IsMap()) return keys;
  for (const auto& entry : node_) keys.push_back(entry.first.as<std::string>());
  return keys;
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
  YAML::Node value;
  try {
    value = YAML::Load(assignment.substr(eq + 1));
  } catch (const YAML::Exception& e) {
    Fail("--set {}: value is not valid YAML: {}", assignment, e.msg);
  }
  std::vector<std::string> parts;
  for (size_t start = 0;;) {
    size_t dot = key.find('.', start);
    parts.push_back(key.substr(start, dot - start));
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

YAML::Node LoadYamlFile(const std::string& path) {
  if (!std::filesystem::is_regular_file(path)) Fail("{}: no such file", path);
  std::ifstream in(path);
  if (!in) Fail("{}: cannot open file", path);
  try {
    YAML::Node node = YAML::Load(in);
    if (!node || node.IsNull()) return YAML::Node(YAML::NodeType::Map);
    return node;
  } catch (const YAML::ParserException& e) {
    Fail("{}:{}:{}: malformed YAML: {}", path, e.mark.line + 1, e.mark.column + 1, e.msg);
  }
}

}  // namespace tpusim::sim
