// This machine's host name (gethostname), as the launch's role listing and a
// checkpoint LOCK file record it; network namespaces and containers may share one.
#pragma once

#include <unistd.h>

#include <array>
#include <string>

namespace tpusim {

inline std::string ThisHostName() {
  std::array<char, 256> name{};
  if (::gethostname(name.data(), name.size() - 1) != 0) return "unknown";
  return name.data();
}

}  // namespace tpusim
