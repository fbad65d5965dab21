// How a report struct with optional parts lists its fields once for both
// directions of its JSON. The struct's fields function, a template over the
// walker and the struct's constness, names every field with its kind:
//
//   template <typename Io, typename Row> void HostRowFields(Io& io, Row& h) {
//     io.Required("host", h.host);
//     io.IfPresent("simulator_ceiling", h.simulator_ceiling);
//   }
//
// FieldWriter walks it to build the object, FieldReader to read one back: a
// missing required field, or one whose value does not convert, throws FieldError
// with the field's path below the object being read. Unknown fields are not
// seen here; the report's from_json rejects them by comparing shapes
// (report/json_shape.h).
#pragma once

#include <cmath>
#include <optional>
#include <string>
#include <utility>

#include <nlohmann/json.hpp>

#include "base/error.h"

namespace tpusim::report::internal {

// A field that could not be read: `path` ("hosts.stages"; empty: the object
// itself) and what was wrong.
class FieldError : public Error {
 public:
  FieldError(std::string path, std::string detail)
      : Error(path.empty() ? detail : path + ": " + detail), path_(std::move(path)), detail_(std::move(detail)) {}
  const std::string& path() const { return path_; }
  const std::string& detail() const { return detail_; }

 private:
  std::string path_;
  std::string detail_;
};

// nlohmann's message without its "[json.exception.type_error.302] " tag.
inline std::string PlainMessage(const nlohmann::json::exception& e) {
  const std::string what = e.what();
  const size_t tag_end = what.find("] ");
  return tag_end == std::string::npos ? what : what.substr(tag_end + 2);
}

class FieldWriter {
 public:
  explicit FieldWriter(nlohmann::json& out) : out_(out) { out_ = nlohmann::json::object(); }

  template <typename T>
  void Required(const char* key, const T& value) {
    out_[key] = value;
  }
  // A number whose non-finite values (a NaN loss) the file shows as null.
  void NanAsNull(const char* key, double value) { out_[key] = value; }
  // Always written, null when empty.
  template <typename T>
  void Nullable(const char* key, const std::optional<T>& value) {
    out_[key] = value ? nlohmann::json(*value) : nlohmann::json(nullptr);
  }
  // Left out when empty.
  template <typename T>
  void IfPresent(const char* key, const std::optional<T>& value) {
    if (value) out_[key] = *value;
  }
  // The group's fields written into this object; `marker` is the field that
  // says whether the group is there.
  template <typename T>
  void Flat(const char* /*marker*/, const std::optional<T>& value) {
    if (value) out_.update(nlohmann::json(*value));
  }

 private:
  nlohmann::json& out_;
};

class FieldReader {
 public:
  explicit FieldReader(const nlohmann::json& in) : in_(in) {
    if (!in_.is_object()) throw FieldError("", "expected an object, found " + in_.dump());
  }

  template <typename T>
  void Required(const char* key, T& value) {
    const nlohmann::json& v = Need(key);
    At(key, [&] { v.get_to(value); });
  }
  void NanAsNull(const char* key, double& value) {
    const nlohmann::json& v = Need(key);
    At(key, [&] { value = v.is_null() ? std::nan("") : v.get<double>(); });
  }
  template <typename T>
  void Nullable(const char* key, std::optional<T>& value) {
    const nlohmann::json& v = Need(key);
    value.reset();
    if (!v.is_null()) At(key, [&] { value = v.get<T>(); });
  }
  template <typename T>
  void IfPresent(const char* key, std::optional<T>& value) {
    value.reset();
    if (!in_.contains(key)) return;
    const nlohmann::json& v = in_.at(key);
    if (v.is_null()) throw FieldError(key, "null, but the field is left out when empty");
    At(key, [&] { value = v.get<T>(); });
  }
  template <typename T>
  void Flat(const char* marker, std::optional<T>& value) {
    value.reset();
    if (!in_.contains(marker)) return;
    try {
      value = in_.get<T>();
    } catch (const nlohmann::json::exception& e) {
      throw FieldError(marker, PlainMessage(e));
    }
  }

 private:
  const nlohmann::json& Need(const char* key) const {
    if (!in_.contains(key)) throw FieldError(key, "missing");
    return in_.at(key);
  }

  // Runs `read`, putting `key` in front of the path of whatever it throws.
  template <typename F>
  static void At(const std::string& key, F&& read) {
    try {
      read();
    } catch (const FieldError& e) {
      throw FieldError(e.path().empty() ? key : key + "." + e.path(), e.detail());
    } catch (const nlohmann::json::exception& e) {
      throw FieldError(key, PlainMessage(e));
    }
  }

  const nlohmann::json& in_;
};

}  // namespace tpusim::report::internal

// Both directions of a struct's JSON from its one fields function, as the
// struct's namespace's to_json and from_json (nlohmann finds them by ADL):
//   TPUSIM_REPORT_JSON_FROM_FIELDS(HostRow, HostRowFields)
#define TPUSIM_REPORT_JSON_FROM_FIELDS(Type, FieldsFn)   \
  void to_json(nlohmann::json& j, const Type& value) {   \
    ::tpusim::report::internal::FieldWriter writer(j);   \
    FieldsFn(writer, value);                             \
  }                                                      \
  void from_json(const nlohmann::json& j, Type& value) { \
    ::tpusim::report::internal::FieldReader reader(j);   \
    FieldsFn(reader, value);                             \
  }
