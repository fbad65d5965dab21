#include "base/temp_file.h"

#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <vector>

#include "base/error.h"

namespace tpusim {

TempFile::TempFile(std::string_view stem, std::string_view text) {
  const char* dir = std::getenv("TMPDIR");
  std::string pattern = std::string(dir && *dir ? dir : "/tmp") + "/" + std::string(stem) + ".XXXXXX";
  std::vector<char> name(pattern.begin(), pattern.end());
  name.push_back('\0');
  const int fd = ::mkstemp(name.data());
  if (fd < 0) Fail("cannot create a temporary file {}: {}", pattern, std::strerror(errno));
  path_ = name.data();
  size_t written = 0;
  while (written < text.size()) {
    const ssize_t n = ::write(fd, text.data() + written, text.size() - written);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) {
      const int error = errno;
      ::close(fd);
      ::unlink(path_.c_str());
      Fail("cannot write the temporary file {}: {}", path_, std::strerror(error));
    }
    written += static_cast<size_t>(n);
  }
  ::close(fd);
}

TempFile::~TempFile() { ::unlink(path_.c_str()); }

}  // namespace tpusim
