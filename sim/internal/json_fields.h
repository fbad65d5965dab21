// A struct's JSON from one list of its fields (sim/metrics.cc): the list writes
// the object and reads it back strictly — every field must be there (nlohmann's
// at() throws json::out_of_range otherwise) and no other key may be (Error
// naming it) — so a misspelt or stale field is an error, never a silent default,
// and adding a field means adding it to the list, once.
#pragma once

#include <cstddef>
#include <optional>
#include <string_view>
#include <tuple>

#include <nlohmann/json.hpp>

#include "base/error.h"

namespace tpusim::sim::internal {

// How a value goes to JSON and back: through its own to_json/from_json, a
// std::optional as its value or null. Specialise it for a type that travels
// otherwise (sim/metrics.cc does for DurationHistogram).
template <class T>
struct JsonCodec {
  static nlohmann::json Write(const T& value) { return value; }
  static void Read(const nlohmann::json& j, T& value) { j.get_to(value); }
};

template <>
struct JsonCodec<nlohmann::json> {
  static nlohmann::json Write(const nlohmann::json& value) { return value; }
  static void Read(const nlohmann::json& j, nlohmann::json& value) { value = j; }
};

template <class T>
struct JsonCodec<std::optional<T>> {
  static nlohmann::json Write(const std::optional<T>& value) {
    return value ? JsonCodec<T>::Write(*value) : nlohmann::json(nullptr);
  }
  static void Read(const nlohmann::json& j, std::optional<T>& value) {
    if (j.is_null()) {
      value.reset();
    } else {
      JsonCodec<T>::Read(j, value.emplace());
    }
  }
};

// After every one of `fields` fields was found in `j`: throws Error naming the
// first key of `j` for which `has(key)` is false (`what` names the struct).
template <class Has>
void RejectUnknownKeys(const nlohmann::json& j, size_t fields, std::string_view what, Has&& has) {
  if (j.size() == fields) return;  // every field found, so nothing else
  for (const auto& item : j.items()) {
    if (!has(std::string_view(item.key()))) Fail("{}: unknown field '{}'", what, item.key());
  }
}

// One field: its JSON key and the member it is.
template <class S, class T>
struct JsonField {
  std::string_view key;
  T S::*member;
};

template <class S, class T>
constexpr JsonField<S, T> Field(std::string_view key, T S::*member) {
  return {key, member};
}

// Every field of struct S, in one list: JsonFields("CoreMetrics", Field("host",
// &CoreMetrics::host), ...). `what` names S in errors.
template <class S, class... T>
class JsonFields {
 public:
  constexpr explicit JsonFields(std::string_view what, JsonField<S, T>... fields) : what_(what), fields_(fields...) {}

  // The object of every field of `s`.
  nlohmann::json Write(const S& s) const {
    nlohmann::json j = nlohmann::json::object();
    std::apply([&](const auto&... f) { (WriteOne(j, s, f), ...); }, fields_);
    return j;
  }

  // Reads every field of `s` from `j`. Throws json::exception when `j` is not an
  // object or lacks a field or a value has the wrong type, Error when `j` has a
  // key that is no field.
  void Read(const nlohmann::json& j, S& s) const {
    std::apply([&](const auto&... f) { (ReadOne(j, s, f), ...); }, fields_);
    RejectUnknownKeys(j, sizeof...(T), what_, [this](std::string_view key) { return Has(key); });
  }

  // Whether `key` is the key of a field.
  bool Has(std::string_view key) const {
    return std::apply([&](const auto&... f) { return ((f.key == key) || ...); }, fields_);
  }

  static constexpr size_t size() { return sizeof...(T); }

 private:
  template <class U>
  static void WriteOne(nlohmann::json& j, const S& s, const JsonField<S, U>& f) {
    j[f.key] = JsonCodec<U>::Write(s.*f.member);
  }
  template <class U>
  static void ReadOne(const nlohmann::json& j, S& s, const JsonField<S, U>& f) {
    JsonCodec<U>::Read(j.at(f.key), s.*f.member);
  }

  std::string_view what_;
  std::tuple<JsonField<S, T>...> fields_;
};

}  // namespace tpusim::sim::internal
