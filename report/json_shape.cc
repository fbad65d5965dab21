#include "report/json_shape.h"

#include <cmath>

#include <fmt/format.h>

namespace tpusim::report {
namespace {

using json = nlohmann::json;

// What a value is, as far as the shape goes: integers signed or not are one kind.
const char* Kind(const json& v) {
  switch (v.type()) {
    case json::value_t::object:
      return "an object";
    case json::value_t::array:
      return "an array";
    case json::value_t::string:
      return "a string";
    case json::value_t::boolean:
      return "a bool";
    case json::value_t::number_integer:
    case json::value_t::number_unsigned:
      return "an integer";
    case json::value_t::number_float:
      return std::isfinite(v.get<double>()) ? "a float" : "null";
    default:
      return "null";
  }
}

std::string Child(const std::string& path, const std::string& key) { return path.empty() ? key : path + "." + key; }

class ShapeWalk {
 public:
  explicit ShapeWalk(const LeafPairVisitor& on_leaf) : on_leaf_(on_leaf) {}

  void Walk(const std::string& path, const json& expected, const json& actual) {
    const std::string kind = Kind(expected);
    if (kind != Kind(actual)) {
      out.push_back(fmt::format("{}: {}, expected {}", path.empty() ? "the document" : path, Kind(actual), kind));
    } else if (expected.is_object()) {
      Objects(path, expected, actual);
    } else if (expected.is_array()) {
      Arrays(path, expected, actual);
    } else if (on_leaf_) {
      on_leaf_(path, expected, actual);
    }
  }

  std::vector<std::string> out;

 private:
  void Objects(const std::string& path, const json& expected, const json& actual) {
    for (const auto& [key, value] : expected.items()) {
      if (!actual.contains(key)) {
        out.push_back(fmt::format("missing field '{}'", Child(path, key)));
      } else {
        Walk(Child(path, key), value, actual[key]);
      }
    }
    for (const auto& [key, value] : actual.items()) {
      if (!expected.contains(key)) out.push_back(fmt::format("unknown field '{}'", Child(path, key)));
    }
  }

  void Arrays(const std::string& path, const json& expected, const json& actual) {
    if (expected.size() != actual.size()) {
      out.push_back(fmt::format("{}: {} elements, expected {}", path, actual.size(), expected.size()));
      return;
    }
    for (size_t i = 0; i < expected.size(); ++i) {
      Walk(fmt::format("{}[{}]", path, i), expected[i], actual[i]);
    }
  }

  const LeafPairVisitor& on_leaf_;
};

}  // namespace

std::vector<std::string> ShapeDifferences(const json& expected, const json& actual, const LeafPairVisitor& on_leaf) {
  ShapeWalk walk(on_leaf);
  walk.Walk("", expected, actual);
  return walk.out;
}

}  // namespace tpusim::report
