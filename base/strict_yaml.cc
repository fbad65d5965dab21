#include "base/strict_yaml.h"

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <unordered_map>
#include <vector>

#include <yaml-cpp/eventhandler.h>

#include "base/error.h"
#include "base/printable.h"
#include "base/regular_file.h"

namespace tpusim {
namespace {

std::string At(const std::string& source, const YAML::Node& node) {
  const YAML::Mark mark = node.Mark();
  if (mark.is_null()) return source;
  return fmt::format("{}:{}:{}", source, mark.line + 1, mark.column + 1);
}

const char* TypeName(const YAML::Node& node) {
  if (node.IsSequence()) return "list";
  if (node.IsMap()) return "map";
  return "null";
}

// The keys of one map: scalars, each once.
void CheckMapKeys(const YAML::Node& map, const std::string& source) {
  std::unordered_map<std::string, int> first_line;
  for (const auto& entry : map) {
    const YAML::Node& key = entry.first;
    if (!key.IsScalar()) {
      Fail("{}: a key must be a plain string, got a {}", At(source, key), TypeName(key));
    }
    auto [it, inserted] = first_line.emplace(key.Scalar(), key.Mark().line + 1);
    if (!inserted) {
      Fail("{}: duplicate key '{}' (first at line {}); each key may appear once", At(source, key), key.Scalar(),
           it->second);
    }
  }
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

[[noreturn]] void FailMalformed(const std::string& source, const YAML::Mark& mark, const std::string& raw) {
  // yaml-cpp's messages may end with the offending character ("unknown escape
  // character: " and a newline).
  const std::string what = Printable(raw, 300);
  if (mark.is_null()) Fail("{}: malformed YAML: {}", source, what);
  Fail("{}:{}:{}: malformed YAML: {}", source, mark.line + 1, mark.column + 1, what);
}

// yaml-cpp reads the first document and ignores the rest, and a document that
// stops at a stray token (",") is followed by endless empty ones (YAML::LoadAll
// never returns). So: one document, and nothing after it but another "---".
void CheckSingleDocument(const std::string& text, const std::string& source) {
  std::istringstream in(text);
  YAML::Parser parser(in);
  DocumentStarts documents;
  while (documents.starts.size() < 2 && parser.HandleNextDocument(documents)) {
  }
  if (documents.starts.size() < 2) return;
  const YAML::Mark& second = documents.starts[1];
  const size_t pos = static_cast<size_t>(std::max(second.pos, 0));
  if (text.compare(pos, 3, "---") == 0 || text.compare(pos, 3, "...") == 0) {
    Fail("{}: holds more than one YAML document (separated by '---'); a config is one document", source);
  }
  FailMalformed(source, second, fmt::format("unexpected '{}'", text.substr(pos, 1)));
}

YAML::Node Parse(const std::string& text, const std::string& source) {
  try {
    CheckSingleDocument(text, source);
    return YAML::Load(text);
  } catch (const YAML::Exception& e) {
    FailMalformed(source, e.mark, e.msg);
  }
}

}  // namespace

void CheckYamlDocument(const YAML::Node& root, const std::string& source) {
  std::vector<YAML::Node> pending{root};
  int64_t visited = 0;
  while (!pending.empty()) {
    YAML::Node node = pending.back();
    pending.pop_back();
    if (++visited > kMaxYamlNodes) {
      Fail("{}: the document expands to more than {} nodes (aliases counted at every use)", source, kMaxYamlNodes);
    }
    if (node.IsMap()) {
      CheckMapKeys(node, source);
      for (const auto& entry : node) pending.push_back(entry.second);
    } else if (node.IsSequence()) {
      for (const auto& item : node) pending.push_back(item);
    }
  }
}

YAML::Node LoadStrictYaml(std::string_view text, const std::string& source) {
  YAML::Node root = Parse(std::string(text), source);
  CheckYamlDocument(root, source);
  return root;
}

YAML::Node LoadStrictYamlFile(const std::string& path) {
  std::error_code ec;
  RefuseNonRegularFile(path);
  if (!std::filesystem::is_regular_file(path, ec)) Fail("{}: no such file", path);
  std::ifstream in(path, std::ios::binary);
  if (!in) Fail("{}: cannot open file", path);
  std::string text(std::istreambuf_iterator<char>(in), {});
  if (in.bad()) Fail("{}: cannot read file", path);
  YAML::Node root = Parse(text, path);
  CheckYamlDocument(root, path);
  return root;
}

}  // namespace tpusim
