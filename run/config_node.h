// Typed, strict reading of a YAML config: every key a reader asks for is marked
// as used, and Finish() rejects any key nobody asked for, so a typo is an error
// instead of a silently ignored setting. Numbers must be finite (.nan and .inf are
// errors, not zeros). Messages name the full dotted key. A large map's lookups go
// through an index built once, so a map of n keys is read in O(n), not O(n^2).
#pragma once

#include <charconv>
#include <cmath>
#include <limits>
#include <optional>
#include <string>
#include <string_view>
#include <type_traits>
#include <unordered_map>
#include <vector>

#include <yaml-cpp/yaml.h>

#include "base/error.h"
#include "base/printable.h"
#include "base/strict_yaml.h"

namespace tpusim::run {

class ConfigNode {
 public:
  // `path` is the dotted key of `node` ("" at the root), `source` the file name.
  // An undefined `node` reads as an empty map.
  ConfigNode(YamlNode node, std::string path, std::string source);

  // Whether `key` is given with a value (null counts as absent).
  bool Has(const std::string& key) const;
  // Whether `key` is written at all, even without a value.
  bool Present(const std::string& key) const { return Find(key) != kAbsent; }
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
    MarkUsed(key);
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
  static constexpr size_t kAbsent = static_cast<size_t>(-1);
  // Maps of more keys than this are looked up through index_, smaller ones by a scan.
  static constexpr size_t kScanKeys = 16;

  // The entry of `key` in keys_, kAbsent when there is none.
  size_t Find(std::string_view key) const;
  void MarkUsed(std::string_view key);

  YamlNode node_;  // keeps the text index_ views alive
  std::string path_;
  std::string source_;
  std::vector<std::string> keys_;  // file order, each once
  std::vector<YamlNode> values_;   // values_[i] is the value of keys_[i]
  std::vector<bool> used_;         // used_[i]: keys_[i] was asked for
  // Lookup state, not content: the entry Find tries first, and for a large map an
  // index of the keys (views of node_'s text), built at the first lookup needing it.
  mutable size_t next_ = 0;
  mutable std::unordered_map<std::string_view, size_t> index_;
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

// A value as messages quote it: a scalar's text, anything else as YAML.
inline std::string TextOf(const YamlNode& node) { return node.IsScalar() ? std::string(node.Scalar()) : node.Dump(); }

// A plain decimal integer ("0", "-12", at most 18 digits, no leading zero, no sign
// for an unsigned T) that fits T: yaml-cpp reads exactly these as their decimal
// value (a leading 0 is octal); nullopt for anything else.
template <typename T>
std::optional<T> PlainInteger(std::string_view text) {
  const bool negative = !text.empty() && text[0] == '-';
  const size_t digits = text.size() - (negative ? 1 : 0);
  if ((negative && std::is_unsigned_v<T>) || digits == 0 || digits > 18) return std::nullopt;
  if (digits > 1 && text[text.size() - digits] == '0') return std::nullopt;
  int64_t value = 0;
  const auto [end, error] = std::from_chars(text.data(), text.data() + text.size(), value);
  if (error != std::errc() || end != text.data() + text.size()) return std::nullopt;
  if (value < static_cast<int64_t>(std::numeric_limits<T>::min()) ||
      (value > 0 && static_cast<uint64_t>(value) > static_cast<uint64_t>(std::numeric_limits<T>::max()))) {
    return std::nullopt;
  }
  return static_cast<T>(value);
}

// `node` converted as yaml-cpp's as<T>() does (a string or a plain decimal integer
// read without a detour through yaml-cpp). Throws YAML::Exception when it does not
// convert.
template <typename T>
T ValueAs(const YamlNode& node) {
  if constexpr (std::is_same_v<T, std::string>) {
    if (node.IsScalar()) return std::string(node.Scalar());
  } else if constexpr (std::is_integral_v<T> && !std::is_same_v<T, bool>) {
    if (std::optional<T> value = PlainInteger<T>(node.Scalar())) return *value;
  }
  return node.as<T>();
}

template <typename T>
void ConfigNode::Get(const std::string& key, T& out) {
  const size_t entry = Find(key);
  if (entry == kAbsent) return;
  used_[entry] = true;
  const YamlNode& value = values_[entry];
  if (value.IsNull()) FailAt(key, "has no value; give one or remove the key");
  if constexpr (std::is_same_v<T, YamlNode>) {
    out = value;
  } else if constexpr (IsVector<T>::value) {
    using Item = typename T::value_type;
    if (!value.IsSequence()) FailAt(key, fmt::format("expected a list, got '{}'", TextOf(value)));
    T items;
    items.reserve(value.size());
    for (size_t i = 0; i < value.size(); ++i) {
      const YamlNode item = value[i];
      try {
        items.push_back(ValueAs<Item>(item));
      } catch (const YAML::Exception&) {
        items.clear();
      }
      if (items.size() != i + 1 || !IsFiniteValue(items.back())) {
        const std::string item_text = TextOf(item);
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
      if (ok) parsed = ValueAs<T>(value);
    } catch (const YAML::Exception&) {
      ok = false;
    }
    if (ok && IsFiniteValue(parsed)) {
      out = std::move(parsed);
      return;
    }
    const std::string text = TextOf(value);
    if (!ok && !IntegerRangeProblem<T>(text).empty()) {
      FailAt(key, fmt::format("{} {}", Printable(text, 60), IntegerRangeProblem<T>(text)));
    }
    FailAt(key, fmt::format("expected {}, got '{}'", ExpectedValue<T>(), Printable(text, 60)));
  }
}

// Applies one "--set a.b.c=value" override to `root`; the value is parsed as YAML
// (so "[64, 32]" is a list). Throws Error for a malformed assignment.
// `root` becomes the changed copy.
void ApplyOverride(YamlNode& root, const std::string& assignment);

}  // namespace tpusim::run
