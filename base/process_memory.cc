#include "base/process_memory.h"

#include <cstdlib>
#include <fstream>
#include <string>

namespace tpusim {
namespace {

int64_t StatusKib(const char* field) {
  std::ifstream status("/proc/self/status");
  const std::string prefix = std::string(field) + ":";
  for (std::string line; std::getline(status, line);) {
    if (line.rfind(prefix, 0) == 0) return std::strtoll(line.c_str() + prefix.size(), nullptr, 10);
  }
  return 0;
}

}  // namespace

int64_t ResidentKib() { return StatusKib("VmRSS"); }
int64_t PeakResidentKib() { return StatusKib("VmHWM"); }

}  // namespace tpusim
