#include "base/strict_yaml.h"

#include <yaml.h>

#include <algorithm>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <functional>
#include <sstream>
#include <unordered_map>
#include <vector>

#include <yaml-cpp/eventhandler.h>

#include "base/error.h"
#include "base/printable.h"
#include "base/regular_file.h"

namespace tpusim {
namespace yaml_internal {

enum class Kind : uint8_t { kNull, kScalar, kSequence, kMap };
// As yaml-cpp's EmitterStyle: a node made here has none, a read collection the one it was written in.
enum class Style : uint8_t { kDefault, kBlock, kFlow };

struct Node {
  Kind kind = Kind::kNull;
  Style style = Style::kDefault;
  uint32_t tag = 0;  // index in YamlTree::tags; 0: none
  int32_t line = -1;
  int32_t column = -1;
  // A scalar's text in YamlTree::text; a list's items or a map's keys and values
  // (key, value, key, value, ...) in YamlTree::children.
  uint32_t begin = 0;
  uint32_t size = 0;
};

struct YamlTree {
  std::vector<Node> nodes;         // nodes[0] is the root
  std::vector<uint32_t> children;  // node indices; an alias repeats its node's
  std::string text;
  std::vector<std::string> tags{""};
};

}  // namespace yaml_internal

using yaml_internal::Kind;
using yaml_internal::Style;
using yaml_internal::YamlTree;

namespace {

// yaml-cpp nests at most this deep (its DepthGuard); deeper documents are refused.
constexpr size_t kMaxYamlDepth = 500;

// yaml-cpp's null spellings of an untagged plain scalar.
bool IsNullString(std::string_view text) {
  return text.empty() || text == "~" || text == "null" || text == "Null" || text == "NULL";
}

// ---------------------------------------------------------------------------
// The wording of a malformed document. yaml-cpp's messages are what users and the
// bad-input corpus know, so a text libyaml refuses is described by yaml-cpp when it
// refuses it too; only otherwise does libyaml's own description show.

[[noreturn]] void FailMalformed(const std::string& source, const YAML::Mark& mark, const std::string& raw) {
  // yaml-cpp's messages may end with the offending character ("unknown escape
  // character: " and a newline).
  const std::string what = Printable(raw, 300);
  if (mark.is_null()) Fail("{}: malformed YAML: {}", source, what);
  Fail("{}:{}:{}: malformed YAML: {}", source, mark.line + 1, mark.column + 1, what);
}

// Sees where each document starts; nothing else of the event stream is kept.
class DocumentStarts : public YAML::EventHandler {
 public:
  std::vector<YAML::Mark> starts;
  void OnDocumentStart(const YAML::Mark& mark) override { starts.push_back(mark); }
  void OnDocumentEnd() override {}
  void OnNull(const YAML::Mark&, YAML::anchor_t) override {}
  void OnAlias(const YAML::Mark&, YAML::anchor_t) override {}
  void OnScalar(const YAML::Mark&, const std::string&, YAML::anchor_t, const std::string&) override {}
  void OnSequenceStart(const YAML::Mark&, const std::string&, YAML::anchor_t, YAML::EmitterStyle::value) override {}
  void OnSequenceEnd() override {}
  void OnMapStart(const YAML::Mark&, const std::string&, YAML::anchor_t, YAML::EmitterStyle::value) override {}
  void OnMapEnd() override {}
};

// A second document: "---" or "..." starts one; anything else is a stray token
// after the first (yaml-cpp reads "," as an empty document and then another).
[[noreturn]] void FailSecondDocument(std::string_view text, const std::string& source, const YAML::Mark& start) {
  const size_t pos = std::min(static_cast<size_t>(std::max(start.pos, 0)), text.size());
  if (text.substr(pos, 3) == "---" || text.substr(pos, 3) == "...") {
    Fail("{}: holds more than one YAML document (separated by '---'); a config is one document", source);
  }
  FailMalformed(source, start, fmt::format("unexpected '{}'", text.substr(pos, 1)));
}

// Throws yaml-cpp's description of `text` when yaml-cpp refuses it: malformed in
// its first document or a second one, or more than one document.
void FailAsYamlCpp(std::string_view text, const std::string& source) {
  std::istringstream in{std::string(text)};
  DocumentStarts documents;
  try {
    YAML::Parser parser(in);
    while (documents.starts.size() < 2 && parser.HandleNextDocument(documents)) {
    }
  } catch (const YAML::Exception& e) {
    FailMalformed(source, e.mark, e.msg);
  }
  if (documents.starts.size() >= 2) FailSecondDocument(text, source, documents.starts[1]);
}

// ---------------------------------------------------------------------------
// Marks as yaml-cpp counts them: lines end at '\n', columns count bytes. libyaml
// counts characters, so an index is walked forward over the UTF-8 text (event marks
// only grow).

class MarkCounter {
 public:
  explicit MarkCounter(std::string_view text) : text_(text) {}

  YAML::Mark At(size_t char_index) {
    if (char_index < char_index_) Rewind();
    while (char_index_ < char_index && byte_ < text_.size()) {
      ++byte_;
      while (byte_ < text_.size() && (static_cast<unsigned char>(text_[byte_]) & 0xC0) == 0x80) ++byte_;
      ++char_index_;
    }
    while (true) {
      const void* found = std::memchr(text_.data() + line_start_, '\n', byte_ - line_start_);
      if (found == nullptr) break;
      line_start_ = static_cast<size_t>(static_cast<const char*>(found) - text_.data()) + 1;
      ++line_;
    }
    YAML::Mark mark;
    mark.pos = static_cast<int>(byte_);
    mark.line = line_;
    mark.column = static_cast<int>(byte_ - line_start_);
    return mark;
  }

 private:
  void Rewind() {
    char_index_ = byte_ = line_start_ = 0;
    line_ = 0;
  }

  std::string_view text_;
  size_t char_index_ = 0;
  size_t byte_ = 0;
  size_t line_start_ = 0;
  int line_ = 0;
};

// ---------------------------------------------------------------------------
// Building the tree from libyaml's events.

class Parser {
 public:
  Parser(std::string_view text, const std::string& source) : text_(text), source_(source), marks_(text) {
    yaml_parser_initialize(&parser_);
    yaml_parser_set_input_string(&parser_, reinterpret_cast<const unsigned char*>(text.data()), text.size());
  }
  ~Parser() { yaml_parser_delete(&parser_); }
  Parser(const Parser&) = delete;
  Parser& operator=(const Parser&) = delete;

  std::shared_ptr<YamlTree> Parse() {
    for (bool more = true; more;) {
      yaml_event_t event;
      if (!yaml_parser_parse(&parser_, &event)) FailLibyaml();
      try {
        more = Handle(event);
      } catch (...) {
        yaml_event_delete(&event);
        throw;
      }
      yaml_event_delete(&event);
    }
    if (tree_->nodes.empty()) tree_->nodes.emplace_back();  // no document: null
    return std::move(tree_);
  }

 private:
  struct Open {
    uint32_t node;
    size_t first_child;  // in pending_
  };

  // Returns false at the end of the stream.
  bool Handle(const yaml_event_t& event) {
    switch (event.type) {
      case YAML_DOCUMENT_START_EVENT:
        if (++documents_ == 2) {
          FailParse([&] { FailSecondDocument(text_, source_, marks_.At(event.start_mark.index)); });
        }
        return true;
      case YAML_SCALAR_EVENT:
        AddScalar(event);
        return true;
      case YAML_ALIAS_EVENT:
        AddAlias(event);
        return true;
      case YAML_SEQUENCE_START_EVENT:
        StartCollection(event, Kind::kSequence, event.data.sequence_start.tag, event.data.sequence_start.anchor,
                        event.data.sequence_start.style == YAML_FLOW_SEQUENCE_STYLE);
        return true;
      case YAML_MAPPING_START_EVENT:
        StartCollection(event, Kind::kMap, event.data.mapping_start.tag, event.data.mapping_start.anchor,
                        event.data.mapping_start.style == YAML_FLOW_MAPPING_STYLE);
        return true;
      case YAML_SEQUENCE_END_EVENT:
      case YAML_MAPPING_END_EVENT:
        EndCollection();
        return true;
      case YAML_STREAM_END_EVENT:
        return false;
      default:
        return true;
    }
  }

  // A node starting at `event`, listed as the next child of the open collection.
  uint32_t AddNode(const yaml_event_t& event, Kind kind, const yaml_char_t* tag, const yaml_char_t* anchor) {
    if (open_.size() >= kMaxYamlDepth) {
      FailParse([&] { FailMalformed(source_, marks_.At(event.start_mark.index), "nested too deeply"); });
    }
    const YAML::Mark mark = marks_.At(event.start_mark.index);
    yaml_internal::Node node;
    node.kind = kind;
    node.line = mark.line;
    node.column = mark.column;
    if (tag != nullptr) {
      node.tag = static_cast<uint32_t>(tree_->tags.size());
      tree_->tags.emplace_back(reinterpret_cast<const char*>(tag));
    }
    const auto index = static_cast<uint32_t>(tree_->nodes.size());
    tree_->nodes.push_back(node);
    if (anchor != nullptr) anchors_[reinterpret_cast<const char*>(anchor)] = index;
    pending_.push_back(index);
    return index;
  }

  void AddScalar(const yaml_event_t& event) {
    const auto& scalar = event.data.scalar;
    const std::string_view value(reinterpret_cast<const char*>(scalar.value), scalar.length);
    const bool null = scalar.style == YAML_PLAIN_SCALAR_STYLE && scalar.tag == nullptr && IsNullString(value);
    const uint32_t index = AddNode(event, null ? Kind::kNull : Kind::kScalar, scalar.tag, scalar.anchor);
    if (null) return;
    tree_->nodes[index].begin = static_cast<uint32_t>(tree_->text.size());
    tree_->nodes[index].size = static_cast<uint32_t>(value.size());
    tree_->text.append(value);
  }

  void AddAlias(const yaml_event_t& event) {
    const std::string name(reinterpret_cast<const char*>(event.data.alias.anchor));
    auto it = anchors_.find(name);
    if (it == anchors_.end()) {
      FailParse([&] {
        FailMalformed(source_, marks_.At(event.start_mark.index), "the referenced anchor is not defined: " + name);
      });
    }
    if (open_.size() >= kMaxYamlDepth) {
      FailParse([&] { FailMalformed(source_, marks_.At(event.start_mark.index), "nested too deeply"); });
    }
    pending_.push_back(it->second);
  }

  void StartCollection(const yaml_event_t& event, Kind kind, const yaml_char_t* tag, const yaml_char_t* anchor,
                       bool flow) {
    const uint32_t index = AddNode(event, kind, tag, anchor);
    tree_->nodes[index].style = flow ? Style::kFlow : Style::kBlock;
    open_.push_back({index, pending_.size()});
  }

  void EndCollection() {
    const Open open = open_.back();
    open_.pop_back();
    yaml_internal::Node& node = tree_->nodes[open.node];
    const size_t count = pending_.size() - open.first_child;
    node.begin = static_cast<uint32_t>(tree_->children.size());
    node.size = static_cast<uint32_t>(node.kind == Kind::kMap ? count / 2 : count);
    tree_->children.insert(tree_->children.end(), pending_.begin() + static_cast<ptrdiff_t>(open.first_child),
                           pending_.end());
    pending_.resize(open.first_child);
  }

  [[noreturn]] void FailLibyaml() {
    FailParse([&] {
      const std::string problem = parser_.problem != nullptr ? parser_.problem : "cannot be read";
      const std::string context = parser_.context != nullptr ? std::string(" ") + parser_.context : "";
      FailMalformed(source_, marks_.At(parser_.problem_mark.index), problem + context);
    });
  }

  // yaml-cpp's message when it refuses the text too, else `ours`.
  [[noreturn]] void FailParse(const std::function<void()>& ours) {
    FailAsYamlCpp(text_, source_);
    ours();
    Fail("{}: malformed YAML", source_);
  }

  std::string_view text_;
  const std::string& source_;
  MarkCounter marks_;
  yaml_parser_t parser_{};
  std::shared_ptr<YamlTree> tree_ = std::make_shared<YamlTree>();
  std::vector<Open> open_;
  std::vector<uint32_t> pending_;  // children of the open collections, innermost last
  std::unordered_map<std::string, uint32_t> anchors_;
  int documents_ = 0;
};

std::string At(const std::string& source, const yaml_internal::Node& node) {
  if (node.line < 0) return source;
  return fmt::format("{}:{}:{}", source, node.line + 1, node.column + 1);
}

const char* TypeName(const yaml_internal::Node& node) {
  if (node.kind == Kind::kSequence) return "list";
  if (node.kind == Kind::kMap) return "map";
  return "null";
}

// The keys of one map: scalars, each once.
void CheckMapKeys(const YamlTree& tree, const yaml_internal::Node& map, const std::string& source) {
  std::unordered_map<std::string_view, int> first_line;
  first_line.reserve(map.size);
  for (uint32_t i = 0; i < map.size; ++i) {
    const yaml_internal::Node& key = tree.nodes[tree.children[map.begin + 2 * i]];
    if (key.kind != Kind::kScalar) {
      Fail("{}: a key must be a plain string, got a {}", At(source, key), TypeName(key));
    }
    const std::string_view text = std::string_view(tree.text).substr(key.begin, key.size);
    auto [it, inserted] = first_line.emplace(text, key.line + 1);
    if (!inserted) {
      Fail("{}: duplicate key '{}' (first at line {}); each key may appear once", At(source, key), text, it->second);
    }
  }
}

// A copy of `from`'s nodes appended to `to`; returns the offset of their indices.
uint32_t Graft(YamlTree& to, const YamlTree& from) {
  const auto offset = static_cast<uint32_t>(to.nodes.size());
  const auto child_offset = static_cast<uint32_t>(to.children.size());
  const auto text_offset = static_cast<uint32_t>(to.text.size());
  const auto tag_offset = static_cast<uint32_t>(to.tags.size() - 1);
  for (yaml_internal::Node node : from.nodes) {
    if (node.kind == Kind::kScalar) node.begin += text_offset;
    if (node.kind == Kind::kSequence || node.kind == Kind::kMap) node.begin += child_offset;
    if (node.tag != 0) node.tag += tag_offset;
    to.nodes.push_back(node);
  }
  for (uint32_t child : from.children) to.children.push_back(child + offset);
  to.text += from.text;
  to.tags.insert(to.tags.end(), from.tags.begin() + 1, from.tags.end());
  return offset;
}

YAML::Node MakeYamlNode(const YamlTree& tree, const yaml_internal::Node& node) {
  switch (node.kind) {
    case Kind::kScalar:
      return YAML::Node(tree.text.substr(node.begin, node.size));
    case Kind::kSequence:
      return YAML::Node(YAML::NodeType::Sequence);
    case Kind::kMap:
      return YAML::Node(YAML::NodeType::Map);
    case Kind::kNull:
      break;
  }
  return YAML::Node(YAML::NodeType::Null);
}

YAML::Node ToYamlNode(const YamlTree& tree, uint32_t index, std::unordered_map<uint32_t, YAML::Node>& made) {
  if (auto it = made.find(index); it != made.end()) return it->second;
  const yaml_internal::Node& node = tree.nodes[index];
  YAML::Node out = MakeYamlNode(tree, node);
  if (node.tag != 0) out.SetTag(tree.tags[node.tag]);
  if (node.style != Style::kDefault) {
    out.SetStyle(node.style == Style::kFlow ? YAML::EmitterStyle::Flow : YAML::EmitterStyle::Block);
  }
  made.emplace(index, out);  // before the children: an alias inside refers back to it
  auto child = [&](uint32_t i) { return ToYamlNode(tree, tree.children[node.begin + i], made); };
  if (node.kind == Kind::kSequence) {
    for (uint32_t i = 0; i < node.size; ++i) out.push_back(child(i));
  }
  if (node.kind == Kind::kMap) {
    for (uint32_t i = 0; i < node.size; ++i) out.force_insert(child(2 * i), child(2 * i + 1));
  }
  return out;
}

}  // namespace

// ---------------------------------------------------------------------------
// YamlNode

bool YamlNode::IsNull() const { return tree_ && tree_->nodes[index_].kind == Kind::kNull; }
bool YamlNode::IsScalar() const { return tree_ && tree_->nodes[index_].kind == Kind::kScalar; }
bool YamlNode::IsSequence() const { return tree_ && tree_->nodes[index_].kind == Kind::kSequence; }
bool YamlNode::IsMap() const { return tree_ && tree_->nodes[index_].kind == Kind::kMap; }

std::string_view YamlNode::Scalar() const {
  if (!IsScalar()) return {};
  const yaml_internal::Node& node = tree_->nodes[index_];
  return std::string_view(tree_->text).substr(node.begin, node.size);
}

size_t YamlNode::size() const { return IsSequence() || IsMap() ? tree_->nodes[index_].size : 0; }

YamlNode YamlNode::Child(size_t i) const { return YamlNode(tree_, tree_->children[tree_->nodes[index_].begin + i]); }

YamlNode YamlNode::operator[](size_t i) const { return Child(i); }
YamlNode YamlNode::Key(size_t i) const { return Child(2 * i); }
YamlNode YamlNode::Value(size_t i) const { return Child(2 * i + 1); }

YamlNode YamlNode::operator[](std::string_view key) const {
  if (!IsMap()) return {};
  for (size_t i = 0; i < size(); ++i) {
    const YamlNode k = Key(i);
    if (k.IsScalar() && k.Scalar() == key) return Value(i);
  }
  return {};
}

YamlMark YamlNode::Mark() const {
  if (!tree_) return {};
  return {tree_->nodes[index_].line, tree_->nodes[index_].column};
}

YAML::Node YamlNode::ToYaml() const {
  if (!tree_) return YAML::Node(YAML::NodeType::Undefined);
  std::unordered_map<uint32_t, YAML::Node> made;
  return ToYamlNode(*tree_, index_, made);
}

std::string YamlNode::Dump() const { return YAML::Dump(ToYaml()); }

YamlNode YamlNode::WithEntry(std::string_view key, const YamlNode& value) const {
  auto tree = std::make_shared<YamlTree>(*tree_);
  const uint32_t value_index = Graft(*tree, *value.tree_) + value.index_;
  if (const YamlNode old = (*this)[key]) {
    tree->nodes[old.index_] = tree->nodes[value_index];  // aliases of the old value see the new one
    return YamlNode(std::move(tree), index_);
  }
  yaml_internal::Node key_node;
  key_node.kind = Kind::kScalar;
  key_node.begin = static_cast<uint32_t>(tree->text.size());
  key_node.size = static_cast<uint32_t>(key.size());
  tree->text.append(key);
  tree->nodes.push_back(key_node);
  // The entries move to the end of the children, where the new one can follow them.
  yaml_internal::Node& map = tree->nodes[index_];
  const auto begin = static_cast<uint32_t>(tree->children.size());
  for (uint32_t i = 0; i < 2 * map.size; ++i) tree->children.push_back(tree->children[map.begin + i]);
  tree->children.push_back(static_cast<uint32_t>(tree->nodes.size() - 1));
  tree->children.push_back(value_index);
  map.begin = begin;
  ++map.size;
  return YamlNode(std::move(tree), index_);
}

YamlNode YamlNode::EmptyMap() {
  auto tree = std::make_shared<YamlTree>();
  tree->nodes.emplace_back().kind = Kind::kMap;
  return YamlNode(std::move(tree), 0);
}

// ---------------------------------------------------------------------------
// Loading

void CheckYamlDocument(const YamlNode& root, const std::string& source) {
  if (!root) return;
  const YamlTree& tree = *root.tree_;
  std::vector<uint32_t> pending{root.index_};
  int64_t visited = 0;
  while (!pending.empty()) {
    const yaml_internal::Node& node = tree.nodes[pending.back()];
    pending.pop_back();
    if (++visited > kMaxYamlNodes) {
      Fail("{}: the document expands to more than {} nodes (aliases counted at every use)", source, kMaxYamlNodes);
    }
    if (node.kind == Kind::kMap) {
      CheckMapKeys(tree, node, source);
      for (uint32_t i = 0; i < node.size; ++i) pending.push_back(tree.children[node.begin + 2 * i + 1]);
    } else if (node.kind == Kind::kSequence) {
      for (uint32_t i = 0; i < node.size; ++i) pending.push_back(tree.children[node.begin + i]);
    }
  }
}

YamlNode LoadStrictYaml(std::string_view text, const std::string& source) {
  YamlNode root(Parser(text, source).Parse(), 0);
  CheckYamlDocument(root, source);
  return root;
}

YamlNode LoadStrictYamlFile(const std::string& path) {
  std::error_code ec;
  RefuseNonRegularFile(path);
  if (!std::filesystem::is_regular_file(path, ec)) Fail("{}: no such file", path);
  std::ifstream in(path, std::ios::binary);
  if (!in) Fail("{}: cannot open file", path);
  std::string text(std::istreambuf_iterator<char>(in), {});
  if (in.bad()) Fail("{}: cannot read file", path);
  return LoadStrictYaml(text, path);
}

}  // namespace tpusim
