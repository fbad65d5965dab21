#include "base/huge_page_allocator.h"

namespace tpusim {

bool LargeBuffersOnHugePages() {
#if defined(__SANITIZE_ADDRESS__)
  return false;  // every buffer from operator new, inside the sanitizer's redzones
#else
  return true;
#endif
}

}  // namespace tpusim
