#include "cluster/internal/jax_device_repr.h"

#include <cctype>
#include <cstdint>

#include <fmt/format.h>

#include "base/error.h"

namespace tpusim::cluster::internal {
namespace {

using json = nlohmann::json;

// Bounds: no device list of a real pod comes near them.
constexpr size_t kMaxDevices = size_t{1} << 20;
constexpr size_t kMaxTuple = 8;
constexpr size_t kMaxName = 64;

bool IsNameChar(char c) { return std::isalnum(static_cast<unsigned char>(c)) || c == '_'; }

class ReprReader {
 public:
  ReprReader(std::string_view text, const std::string& source) : text_(text), source_(source) {}

  json List() {
    Expect('[');
    json devices = json::array();
    if (!Take(']')) {
      do {
        if (devices.size() == kMaxDevices) Fail("{}: more than {} devices", source_, kMaxDevices);
        devices.push_back(Device());
      } while (Take(','));
      Expect(']');
    }
    SkipBlanks();
    if (at_ != text_.size()) Stop("the end of the list");
    return devices;
  }

 private:
  // TpuDevice(key=value, ...); a value may itself be a device (MegaScale's
  // wrapped=TpuDevice(...)), one level deep.
  json Device() {
    Name();  // the device's class, whatever it is called
    if (++depth_ > 2) Stop("a device nested at most once (wrapped=TpuDevice(...))");
    Expect('(');
    json device = json::object();
    if (!Take(')')) {
      do {
        const std::string key = Name();
        Expect('=');
        if (device.contains(key)) Stop("a key not given twice");
        device[key] = Value();
      } while (Take(','));
      Expect(')');
    }
    --depth_;
    return device;
  }

  json Value() {
    SkipBlanks();
    if (Take('(')) return Tuple();
    if (at_ < text_.size() && (text_[at_] == '\'' || text_[at_] == '"')) return Quoted();
    if (StartsDevice()) return Device();
    return Integer();
  }

  // Whether a name followed by '(' comes next (MegaScale's wrapped=TpuDevice(...)).
  bool StartsDevice() {
    if (at_ >= text_.size() || !std::isalpha(static_cast<unsigned char>(text_[at_]))) return false;
    const size_t start = at_;
    Name();
    const bool device = Take('(');
    at_ = start;
    return device;
  }

  json Tuple() {
    json values = json::array();
    if (Take(')')) return values;
    do {
      SkipBlanks();
      if (at_ < text_.size() && text_[at_] == ')') break;  // (0,) and (0,0,0,)
      if (values.size() == kMaxTuple) Stop("a tuple of at most 8 numbers");
      values.push_back(Integer());
    } while (Take(','));
    Expect(')');
    return values;
  }

  json Integer() {
    SkipBlanks();
    const size_t start = at_;
    if (at_ < text_.size() && text_[at_] == '-') ++at_;
    int64_t value = 0;
    size_t digits = 0;
    for (; at_ < text_.size() && std::isdigit(static_cast<unsigned char>(text_[at_])); ++at_, ++digits) {
      if (digits == 12) Stop("a number of at most 12 digits");
      value = value * 10 + (text_[at_] - '0');
    }
    if (digits == 0) {
      at_ = start;
      Stop("a number, a (tuple) or a 'string'");
    }
    return text_[start] == '-' ? -value : value;
  }

  json Quoted() {
    const char quote = text_[at_++];
    const size_t start = at_;
    while (at_ < text_.size() && text_[at_] != quote && text_[at_] != '\n') ++at_;
    if (at_ >= text_.size() || text_[at_] != quote) {
      at_ = start - 1;
      Stop("a closed string");
    }
    return std::string(text_.substr(start, at_++ - start));
  }

  std::string Name() {
    SkipBlanks();
    const size_t start = at_;
    while (at_ < text_.size() && IsNameChar(text_[at_]) && at_ - start < kMaxName) ++at_;
    if (at_ == start || std::isdigit(static_cast<unsigned char>(text_[start]))) {
      at_ = start;
      Stop("a name");
    }
    return std::string(text_.substr(start, at_ - start));
  }

  void SkipBlanks() {
    while (at_ < text_.size() && std::isspace(static_cast<unsigned char>(text_[at_]))) ++at_;
  }

  bool Take(char c) {
    SkipBlanks();
    if (at_ < text_.size() && text_[at_] == c) {
      ++at_;
      return true;
    }
    return false;
  }

  void Expect(char c) {
    if (!Take(c)) Stop(std::string("'") + c + "'");
  }

  [[noreturn]] void Stop(const std::string& expected) const {
    const std::string found = at_ < text_.size() ? std::string(text_.substr(at_, 12)) : "the end";
    Fail(
        "{}: not a device list as print(jax.devices()) prints it: at character {}, expected {}, "
        "found '{}'",
        source_, at_ + 1, expected, found);
  }

  std::string_view text_;
  const std::string& source_;
  size_t at_ = 0;
  int depth_ = 0;
};

// MegaScalePjRtDevice(wrapped=TpuDevice(...), slice_id=k) as the wrapped device
// with slice_index k; any other key of the wrapper is kept (the importer names it).
json Unwrapped(json device) {
  if (!device.contains("wrapped") || !device["wrapped"].is_object()) return device;
  json inner = device["wrapped"];
  device.erase("wrapped");
  if (device.contains("slice_id")) {
    inner["slice_index"] = device["slice_id"];
    device.erase("slice_id");
  }
  for (auto& [key, value] : device.items()) inner[key] = value;
  return inner;
}

}  // namespace

bool LooksLikeJaxRepr(std::string_view text) {
  const size_t open = text.find_first_not_of(" \t\r\n");
  if (open == std::string_view::npos || text[open] != '[') return false;
  const size_t next = text.find_first_not_of(" \t\r\n", open + 1);
  return next != std::string_view::npos && std::isalpha(static_cast<unsigned char>(text[next]));
}

nlohmann::json JaxReprAsJson(std::string_view text, const std::string& source) {
  json devices = ReprReader(text, source).List();
  for (json& d : devices) d = Unwrapped(std::move(d));
  return devices;
}

}  // namespace tpusim::cluster::internal
