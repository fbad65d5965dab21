// Enums spelled as strings in configs: one table of (spelling, value) pairs per
// enum, parsed and printed by the same two functions everywhere, so an unknown
// spelling always gets the same message: "<key>: '<text>' is not one of a, b, c".
#pragma once

#include <array>
#include <cstddef>
#include <string>
#include <string_view>
#include <utility>

#include "base/error.h"

namespace tpusim {

template <typename Enum, size_t N>
using Spellings = std::array<std::pair<std::string_view, Enum>, N>;

// The value spelled `text`; throws Error naming `key` and every spelling otherwise.
template <typename Enum, size_t N>
Enum ParseSpelling(const Spellings<Enum, N>& spellings, std::string_view text, std::string_view key) {
  std::string allowed;
  for (const auto& [spelling, value] : spellings) {
    if (spelling == text) return value;
    allowed += allowed.empty() ? "" : ", ";
    allowed += spelling;
  }
  Fail("{}: '{}' is not one of {}", key, text, allowed);
}

// The spelling of `value` ("?" if the table lacks it).
template <typename Enum, size_t N>
std::string_view SpellingOf(const Spellings<Enum, N>& spellings, Enum value) {
  for (const auto& [spelling, candidate] : spellings) {
    if (candidate == value) return spelling;
  }
  return "?";
}

}  // namespace tpusim
