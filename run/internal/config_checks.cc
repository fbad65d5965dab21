#include "run/internal/config_checks.h"

#include <algorithm>
#include <cctype>

#include <fmt/format.h>

namespace tpusim::run::internal {

void RequireRange(ConfigNode& node, const std::string& key, int64_t value, int64_t lo, int64_t hi) {
  if (value < lo || value > hi) {
    node.FailAt(key, fmt::format("must be in [{}, {}], got {}", lo, hi, value));
  }
}

void RequirePositive(ConfigNode& node, const std::string& key, int64_t value) {
  RequireRange(node, key, value, 1, kMaxCount);
}

void RequireRealRange(ConfigNode& node, const std::string& key, double value, double lo, double hi) {
  if (!(value >= lo && value <= hi)) {
    node.FailAt(key, fmt::format("must be in [{}, {}], got {}", lo, hi, value));
  }
}

void RequireName(ConfigNode& node, const std::string& name) {
  bool ok = !name.empty() && name.size() <= kMaxNameLength && name[0] != '.' &&
            std::all_of(name.begin(), name.end(), [](char c) {
              return std::isalnum(static_cast<unsigned char>(c)) || c == '_' || c == '-' || c == '.';
            });
  if (!ok) {
    node.FailAt(name, fmt::format("is not a valid name: use 1 to {} of A-Z a-z 0-9 _ - . "
                                  "(not starting with '.')",
                                  kMaxNameLength));
  }
}

}  // namespace tpusim::run::internal
