// Text from an input (a key, a name, a yaml-cpp message that ends with the
// offending character) made safe for a one-line error: control characters shown
// as \xNN, and at most `max_chars` characters kept, the rest cut with "...".
#pragma once

#include <cstddef>
#include <string>
#include <string_view>

#include <fmt/format.h>

namespace tpusim {

inline std::string Printable(std::string_view text, size_t max_chars = 120) {
  std::string out;
  for (char c : text) {
    if (out.size() >= max_chars) return out + "...";
    if (static_cast<unsigned char>(c) < 0x20 || c == 0x7f) {
      out += fmt::format("\\x{:02x}", static_cast<unsigned char>(c));
    } else {
      out += c;
    }
  }
  return out;
}

// The longest error message printed: a few terminal lines. Data that reaches a
// message (a key, a name) is cut far shorter where it is quoted (Printable's 120).
inline constexpr size_t kErrorMessageChars = 1000;

// An error message as printed: one line whatever the input put in it (control
// characters shown as \xNN, so no forged line or terminal escape), at most
// kErrorMessageChars characters.
inline std::string PrintableError(std::string_view message) { return Printable(message, kErrorMessageChars); }

}  // namespace tpusim
