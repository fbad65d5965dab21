#include "base/huge_page_allocator.h"

#include <gtest/gtest.h>

#include <cstdint>
#include <fstream>
#include <sstream>
#include <string>

namespace tpusim {
namespace {

// The VmFlags line of the /proc/self/smaps entry that holds `address` ("" if none).
std::string VmFlagsOf(const void* address) {
  std::ifstream smaps("/proc/self/smaps");
  const auto at = reinterpret_cast<uintptr_t>(address);
  bool inside = false;
  for (std::string line; std::getline(smaps, line);) {
    uintptr_t begin = 0, end = 0;
    char dash = 0;
    std::istringstream head(line);
    if (head >> std::hex >> begin >> dash >> end && dash == '-') {
      inside = begin <= at && at < end;
    } else if (inside && line.rfind("VmFlags:", 0) == 0) {
      return line;
    }
  }
  return "";
}

TEST(HugePageAllocator, LargeMappingsStartOnAHugePageAndAreAdvised) {
  for (size_t bytes : {kHugePageBytes, 3 * kHugePageBytes + 4096 + 17}) {
    void* p = internal::MapHugePageAligned(bytes);
    EXPECT_EQ(reinterpret_cast<uintptr_t>(p) % kHugePageBytes, 0u) << bytes;
    auto* b = static_cast<std::byte*>(p);
    b[0] = std::byte{1};
    b[bytes - 1] = std::byte{2};  // the last byte is mapped
    EXPECT_NE(VmFlagsOf(p).find(" hg"), std::string::npos) << VmFlagsOf(p);
    munmap(p, bytes);
    EXPECT_EQ(VmFlagsOf(p), "") << "the whole mapping is given back";
  }
}

TEST(HugePageAllocator, VectorsKeepTheirContentsAcrossGrowth) {
  HugePageVector<std::byte> v(kHugePageBytes / 2, std::byte{7});
  v.resize(3 * kHugePageBytes, std::byte{9});  // from operator new to a mapping of its own
  EXPECT_EQ(v[0], std::byte{7});
  EXPECT_EQ(v[kHugePageBytes / 2 - 1], std::byte{7});
  EXPECT_EQ(v[kHugePageBytes / 2], std::byte{9});
  EXPECT_EQ(v.back(), std::byte{9});
  EXPECT_EQ(HugePageAllocator<std::byte>::OnHugePages(v.capacity()), LargeBuffersOnHugePages());
  if (LargeBuffersOnHugePages()) {
    EXPECT_EQ(reinterpret_cast<uintptr_t>(v.data()) % kHugePageBytes, 0u);
  }
  EXPECT_FALSE(HugePageAllocator<std::byte>::OnHugePages(kHugePageBytes - 1));
}

}  // namespace
}  // namespace tpusim
