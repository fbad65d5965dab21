// The message of the tpusim::Error a piece of code throws, for tests that assert on
// what a user would read.
#pragma once

#include <functional>
#include <string>

#include <gtest/gtest.h>

#include "base/error.h"

namespace tpusim::testing {

// Runs `body`; returns the Error's message, or "" and a test failure when it
// throws nothing.
inline std::string ErrorOf(const std::function<void()>& body) {
  try {
    body();
  } catch (const Error& e) {
    return e.what();
  }
  ADD_FAILURE() << "expected tpusim::Error";
  return "";
}

}  // namespace tpusim::testing
