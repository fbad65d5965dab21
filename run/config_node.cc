#include "run/config_node.h"

namespace tpusim::run {

ConfigNode::ConfigNode(YamlNode node, std::string path, std::string source)
    : node_(std::move(node)), path_(std::move(path)), source_(std::move(source)) {
  if (node_ && !node_.IsNull() && !node_.IsMap()) {
    Fail("{}: {}: expected a map of keys", source_, path_.empty() ? "(top level)" : path_);
  }
  if (!node_.IsMap()) return;
  keys_.reserve(node_.size());
  values_.reserve(node_.size());
  for (size_t i = 0; i < node_.size(); ++i) {
    // Documents come through LoadStrictYaml, which has rejected non-scalar and repeated keys.
    const YamlNode key = node_.Key(i);
    if (!key.IsScalar()) Fail("{}: {}: a key must be a plain string", source_, path_);
    keys_.emplace_back(key.Scalar());
    values_.push_back(node_.Value(i));
  }
  used_.assign(keys_.size(), false);
}

size_t ConfigNode::Find(std::string_view key) const {
  // Readers mostly ask for the keys in file order (a loop over Keys()): the entry
  // after the last one found is tried first.
  if (next_ < keys_.size() && keys_[next_] == key) return next_++;
  if (keys_.size() <= kScanKeys) {
    for (size_t i = 0; i < keys_.size(); ++i) {
      if (keys_[i] == key) {
        next_ = i + 1;
        return i;
      }
    }
    return kAbsent;
  }
  if (index_.empty()) {
    index_.reserve(keys_.size());
    for (size_t i = 0; i < keys_.size(); ++i) index_.emplace(node_.Key(i).Scalar(), i);
  }
  auto it = index_.find(key);
  if (it == index_.end()) return kAbsent;
  next_ = it->second + 1;
  return it->second;
}

void ConfigNode::MarkUsed(std::string_view key) {
  if (const size_t i = Find(key); i != kAbsent) used_[i] = true;
}

bool ConfigNode::Has(const std::string& key) const {
  const size_t i = Find(key);
  return i != kAbsent && !values_[i].IsNull();
}

std::string ConfigNode::KeyPath(const std::string& key) const { return path_.empty() ? key : path_ + "." + key; }

void ConfigNode::FailAt(const std::string& key, const std::string& message) const {
  Fail("{}: {}: {}", source_, KeyPath(key), message);
}

ConfigNode ConfigNode::Child(const std::string& key) {
  const size_t entry = Find(key);
  if (entry == kAbsent) return ConfigNode(YamlNode(), KeyPath(key), source_);
  used_[entry] = true;
  if (values_[entry].IsNull()) return ConfigNode(YamlNode(), KeyPath(key), source_);
  if (!values_[entry].IsMap()) FailAt(key, "expected a map of keys");
  return ConfigNode(values_[entry], KeyPath(key), source_);
}

std::vector<ConfigNode> ConfigNode::Sequence(const std::string& key) {
  MarkUsed(key);
  std::vector<ConfigNode> items;
  if (!Has(key)) return items;
  const YamlNode& list = values_[Find(key)];
  if (!list.IsSequence()) FailAt(key, "expected a list");
  for (size_t i = 0; i < list.size(); ++i) {
    items.emplace_back(list[i], fmt::format("{}[{}]", KeyPath(key), i), source_);
  }
  return items;
}

void ConfigNode::Finish() const {
  for (size_t i = 0; i < keys_.size(); ++i) {
    if (!used_[i]) FailAt(keys_[i], "unknown key");
  }
}

void ApplyOverride(YamlNode& root, const std::string& assignment) {
  size_t eq = assignment.find('=');
  if (eq == std::string::npos || eq == 0) {
    Fail("--set {}: expected key=value, e.g. --set train.steps=20", assignment);
  }
  std::string key = assignment.substr(0, eq);
  YamlNode value = LoadStrictYaml(assignment.substr(eq + 1), "--set " + assignment);
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
  // Each change copies the document and gives the changed node back; the root is
  // reached again from the map the last change made.
  std::vector<YamlNode> chain{root};
  for (size_t i = 0; i + 1 < parts.size(); ++i) {
    YamlNode next = chain.back()[parts[i]];
    if (!next || next.IsNull()) {
      chain.back() = chain.back().WithEntry(parts[i], YamlNode::EmptyMap());
      next = chain.back()[parts[i]];
    }
    if (!next.IsMap()) Fail("--set {}: '{}' is not a map", assignment, parts[i]);
    chain.push_back(next);
  }
  chain.back() = chain.back().WithEntry(parts.back(), value);
  root = chain.back().Root();
}

}  // namespace tpusim::run
