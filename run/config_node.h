// Typed, strict reading of a YAML config: every key a reader asks for is marked
// as used, and Finish() rejects any key nobody asked for, so a typo is an error
// instead of a silently ignored setting. Numbers must be finite (.nan and .inf are
// errors, not zeros). Messages name the full dotted key. Lookups go through an
// index built once per map, so a map of n keys is read in O(n), not O(n^2).
#pragma once

#include <cmath>
#include <limits>
#include <optional>
#include <set>
#include <string>
#include <type_traits>
#include <unordered_map>
#include <vector>

#include <yaml-cpp/yaml.h>

#include "base/error.h"
#include "base/printable.h"

namespace tpusim::run {

class ConfigNode {
 public:
  // `path` is the dotted key of `node` ("" at the root), `source` the file name.
  ConfigNode(YAML::Node node, std::string path, std::string source);

  // Whether `key` is given with a value (null counts as absent).
  bool Has(const std::string& key) const;
  // Whether `key` is written at all, even without a value.
  bool Present(const std::string& key) const { return index_.count(key) > 0; }
  // Reads `key` into `out` when present (leaving the default otherwise). Throws
  // Error "<file>: <path.key>: expected <what>, got '<text>'" on a type mismatch
  // or a number that is not finite.
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
  const std::vector<std::string>& Keys() const { return keys_; }
  const std::string& path() const { return path_; }
  std::string KeyPath(const std::string& key) const;
  const std::string& source() const { return source_; }
  // Throws Error naming the first key of this map that was never read.
  void Finish() const;
  [[noreturn]] void FailAt(const std::string& key, const std::string& message) const;

 private:
  // The value of `key`; requires Has(key).
  const YAML::Node& At(const std::string& key) const { return index_.at(key); }

  YAML::Node node_;
  std::string path_;
  std::string source_;
  std::vector<std::string> keys_;                      // file order
  std::unordered_map<std::string, YAML::Node> index_;  // key -> value
  std::set<std::string> used_;
};

// What a value of type T must look like, for messages.
template <typename T>
constexpr const char* ExpectedValue() {
  if constexpr (std::is_same_v<T, bool>) {
    return "true or false";
  } else if constexpr (std::is_integral_v<T>) {
    return "an integer";
  } else if constexpr (std::is_floating_point_v<T>) {
    return "a finite number";
  } else if constexpr (std::is_same_v<T, std::string>) {
    return "a string";
  } else {
    return "a value of the documented type";
  }
}

template <typename T>
struct IsVector : std::false_type {};
template <typename T>
struct IsVector<std::vector<T>> : std::true_type {};

// Whether a value read as T is acceptable beyond its type: numbers must be finite.
template <typename T>
bool IsFiniteValue(const T& value) {
  if constexpr (std::is_floating_point_v<T>) return std::isfinite(value);
  return true;
}

// For an integer type, "is too large (at most M)" or "is too small (at least M)"
// when `text` is a whole number outside T's range; empty otherwise.
template <typename T>
std::string IntegerRangeProblem(const std::string& text) {
  if constexpr (std::is_integral_v<T> && !std::is_same_v<T, bool>) {
    const size_t digits = text.find_first_not_of("+-") == 1 ? 1 : 0;
    if (text.empty() || text.size() == digits || text.find_first_not_of("0123456789", digits) != std::string::npos) {
      return {};
    }
    if (text[0] == '-') return fmt::format("is too small (at least {})", std::numeric_limits<T>::min());
    return fmt::format("is too large (at most {})", std::numeric_limits<T>::max());
  }
  return {};
}

template <typename T>
void ConfigNode::Get(const std::string& key, T& out) {
  used_.insert(key);
  if (Present(key) && !Has(key)) FailAt(key, "has no value; give one or remove the key");
  if (!Has(key)) return;
  const YAML::Node& value = At(key);
  std::string text = value.IsScalar() ? value.Scalar() : YAML::Dump(value);
  if constexpr (IsVector<T>::value) {
    using Item = typename T::value_type;
    if (!value.IsSequence()) FailAt(key, fmt::format("expected a list, got '{}'", text));
    T items;
    for (size_t i = 0; i < value.size(); ++i) {
      const YAML::Node item = value[i];
      try {
        items.push_back(item.as<Item>());
      } catch (const YAML::Exception&) {
        items.clear();
      }
      if (items.size() != i + 1 || !IsFiniteValue(items.back())) {
        const std::string item_text = item.IsScalar() ? item.Scalar() : YAML::Dump(item);
        if (!IntegerRangeProblem<Item>(item_text).empty()) {
          FailAt(key,
                 fmt::format("entry {}: {} {}", i, Printable(item_text, 60), IntegerRangeProblem<Item>(item_text)));
        }
        FailAt(key, fmt::format("entry {}: expected {}, got '{}'", i, ExpectedValue<Item>(), Printable(item_text, 60)));
      }
    }
    out = std::move(items);
  } else {
    T parsed{};
    // Numbers, booleans and strings are scalars; anything else (a map) converts whole.
    bool ok = value.IsScalar() || !(std::is_arithmetic_v<T> || std::is_same_v<T, std::string>);
    try {
      if (ok) parsed = value.as<T>();
    } catch (const YAML::Exception&) {
      ok = false;
    }
    if (!ok && !IntegerRangeProblem<T>(text).empty()) {
      FailAt(key, fmt::format("{} {}", Printable(text, 60), IntegerRangeProblem<T>(text)));
    }
    if (!ok || !IsFiniteValue(parsed)) {
      FailAt(key, fmt::format("expected {}, got '{}'", ExpectedValue<T>(), Printable(text, 60)));
    }
    out = parsed;
  }
}

// Applies one "--set a.b.c=value" override to `root`; the value is parsed as YAML
// (so "[64, 32]" is a list). Throws Error for a malformed assignment.
void ApplyOverride(YAML::Node& root, const std::string& assignment);

}  // namespace tpusim::run
