// Text from an input (a key, a name, a yaml-cpp message that ends with the
// offending character) made safe for a one-line error: control characters and
// bytes that are not UTF-8 shown as \xNN, and at most `max_chars` characters
// kept, the rest cut with "...".
#pragma once

#include <algorithm>
#include <cstddef>
#include <string>
#include <string_view>

#include <fmt/format.h>

namespace tpusim {

namespace printable_internal {

// The length of the well-formed UTF-8 sequence at text[at] of a character that is
// not a C1 control (U+0080..U+009F, which some terminals obey as ESC sequences),
// or 0 when the byte there does not start one.
inline size_t Utf8Length(std::string_view text, size_t at) {
  const auto byte = [&](size_t i) { return i < text.size() ? static_cast<unsigned char>(text[i]) : 0u; };
  const unsigned lead = byte(at);
  const size_t length = lead >= 0xf0 && lead <= 0xf4 ? 4 : lead >= 0xe0 ? 3 : lead >= 0xc2 && lead < 0xe0 ? 2 : 0;
  if (length == 0 || (lead == 0xc2 && byte(at + 1) < 0xa0)) return 0;
  for (size_t i = 1; i < length; ++i) {
    if ((byte(at + i) & 0xc0) != 0x80) return 0;
  }
  if (length == 3 && ((lead == 0xe0 && byte(at + 1) < 0xa0) || (lead == 0xed && byte(at + 1) >= 0xa0))) return 0;
  if (length == 4 && ((lead == 0xf0 && byte(at + 1) < 0x90) || (lead == 0xf4 && byte(at + 1) >= 0x90))) return 0;
  return length;
}

}  // namespace printable_internal

// Control characters (C0, DEL and C1) and bytes that are not well-formed UTF-8
// are shown as \xNN; well-formed UTF-8 text is kept as it is.
inline std::string Printable(std::string_view text, size_t max_chars = 120) {
  std::string out;
  for (size_t at = 0; at < text.size();) {
    if (out.size() >= max_chars) return out + "...";
    const auto c = static_cast<unsigned char>(text[at]);
    const size_t length = c >= 0x80 ? printable_internal::Utf8Length(text, at) : 1;
    if (c < 0x20 || c == 0x7f || length == 0) {
      out += fmt::format("\\x{:02x}", c);
      ++at;
    } else {
      out.append(text.substr(at, length));
      at += length;
    }
  }
  return out;
}

// The longest error message printed: a few terminal lines. Data that reaches a
// message (a key, a name) is cut far shorter where it is quoted (Printable's 120).
inline constexpr size_t kErrorMessageChars = 1000;

// The longest word (characters between spaces) an error message prints whole: a
// longer one (a key, a value or a path of thousands of characters, quoted where no
// Printable cut it) keeps its first 100 and last 57 characters around "...".
inline constexpr size_t kErrorWordChars = 160;

namespace printable_internal {

// `at` moved back to the start of the UTF-8 character it falls in.
inline size_t CharStart(std::string_view text, size_t at) {
  while (at > 0 && at < text.size() && (static_cast<unsigned char>(text[at]) & 0xc0) == 0x80) --at;
  return at;
}

inline std::string CutLongWords(std::string_view text) {
  std::string out;
  for (size_t at = 0; at <= text.size();) {
    const size_t end = std::min(text.find(' ', at), text.size());
    const std::string_view word = text.substr(at, end - at);
    if (word.size() > kErrorWordChars) {
      out.append(word.substr(0, CharStart(word, 100)));
      out += "...";
      out.append(word.substr(CharStart(word, word.size() - 57)));
    } else {
      out.append(word);
    }
    if (end == text.size()) break;
    out += ' ';
    at = end + 1;
  }
  return out;
}

}  // namespace printable_internal

// An error message as printed: one line whatever the input put in it (control
// characters shown as \xNN, so no forged line or terminal escape), no word over
// kErrorWordChars, at most kErrorMessageChars characters.
inline std::string PrintableError(std::string_view message) {
  const std::string escaped = Printable(message, message.size() * 4 + 1);
  return Printable(printable_internal::CutLongWords(escaped), kErrorMessageChars);
}

}  // namespace tpusim
