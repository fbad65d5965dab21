// The one error type of tpusim. Bad input anywhere (configs, files, shapes,
// command-line values, a peer that failed) is reported by throwing tpusim::Error
// with a message that names the key, the value and what was allowed; only main()
// catches it, prints it once tagged with rank and role, and decides to abort.
#pragma once

#include <stdexcept>
#include <string>
#include <utility>

#include <fmt/format.h>

namespace tpusim {

class Error : public std::runtime_error {
 public:
  explicit Error(const std::string& message) : std::runtime_error(message) {}
};

// Throws Error with a fmt-formatted message.
template <typename... Args>
[[noreturn]] void Fail(fmt::format_string<Args...> format, Args&&... args) {
  throw Error(fmt::format(format, std::forward<Args>(args)...));
}

}  // namespace tpusim
