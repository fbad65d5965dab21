// The one error type of tpusim. Bad input anywhere (configs, files, shapes,
// command-line values, a peer that failed) is reported by throwing tpusim::Error
// with a message that names the key, the value and what was allowed; only main()
// catches it, prints it once tagged with rank and role, and decides to abort.
#pragma once

#include <cstring>
#include <exception>
#include <new>
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

// "No space left on device (ENOSPC": an errno's text and, for scripts and
// searches, its name (the caller closes the parenthesis, adding what it must).
inline std::string ErrnoText(int error) {
  const char* name = ::strerrorname_np(error);
  return fmt::format("{} ({}", std::strerror(error), name ? name : fmt::format("errno {}", error));
}

// The one-line message of the exception being handled; call it inside a catch
// block. An Error gives its own message and std::bad_alloc says memory ran out
// (both bad input: `*internal` false); anything else is a bug in tpusim and says
// so ("internal error: ..."), with `*internal` true.
inline std::string CurrentExceptionMessage(bool* internal) {
  *internal = false;
  try {
    throw;
  } catch (const Error& e) {
    return e.what();
  } catch (const std::bad_alloc&) {
    return "out of memory: an allocation failed (std::bad_alloc); the input asks for more than "
           "this machine has";
  } catch (const std::exception& e) {
    *internal = true;
    return std::string("internal error: ") + e.what();
  } catch (...) {
    *internal = true;
    return "internal error: an exception of unknown type";
  }
}

// Runs `body`; an Error it throws comes back with "<context>: " in front, for a
// module that names the key in its messages but not the file the key came from.
template <typename F>
auto InContext(const std::string& context, F&& body) -> decltype(body()) {
  try {
    return body();
  } catch (const Error& e) {
    throw Error(context + ": " + e.what());
  }
}

}  // namespace tpusim
