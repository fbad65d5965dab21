#include "base/npy.h"

#include <fstream>
#include <fmt/ranges.h>
#include <numeric>

#include "base/error.h"

namespace tpusim {
namespace {

constexpr char kMagic[] = "\x93NUMPY";

// Returns the text between the quotes that follow `key` in a header dict.
std::string QuotedValue(const std::string& header, const std::string& key,
                        const std::string& path) {
  size_t at = header.find("'" + key + "'");
  size_t open = header.find('\'', header.find(':', at) + 1);
  size_t close = header.find('\'', open + 1);
  if (at == std::string::npos || open == std::string::npos || close == std::string::npos) {
    Fail("{}: malformed .npy header (no '{}'): {}", path, key, header);
  }
  return header.substr(open + 1, close - open - 1);
}

std::vector<int64_t> ParseShape(const std::string& header, const std::string& path) {
  size_t open = header.find('(', header.find("'shape'"));
  size_t close = header.find(')', open);
  if (header.find("'shape'") == std::string::npos || open == std::string::npos ||
      close == std::string::npos) {
    Fail("{}: malformed .npy header (no shape): {}", path, header);
  }
  std::vector<int64_t> shape;
  std::string inner = header.substr(open + 1, close - open - 1);
  size_t pos = 0;
  while (pos < inner.size()) {
    size_t comma = inner.find(',', pos);
    std::string item = inner.substr(pos, comma == std::string::npos ? std::string::npos : comma - pos);
    if (item.find_first_not_of(" ") != std::string::npos) {
      try {
        shape.push_back(std::stoll(item));
      } catch (const std::exception&) {
        Fail("{}: malformed .npy shape '{}'", path, inner);
      }
    }
    if (comma == std::string::npos) break;
    pos = comma + 1;
  }
  return shape;
}

NpyArray ReadHeader(std::ifstream& in, const std::string& path) {
  if (!in) Fail("{}: cannot open file", path);
  char magic[8] = {};
  in.read(magic, 8);
  if (!in || std::string(magic, 6) != std::string(kMagic, 6)) {
    Fail("{}: not a .npy file (bad magic)", path);
  }
  uint32_t header_len = 0;
  unsigned char len_bytes[4] = {};
  int len_size = magic[6] == 1 ? 2 : 4;
  in.read(reinterpret_cast<char*>(len_bytes), len_size);
  for (int i = len_size - 1; i >= 0; --i) header_len = header_len * 256 + len_bytes[i];
  std::string header(header_len, '\0');
  in.read(header.data(), header_len);
  if (!in) Fail("{}: truncated .npy header", path);
  if (header.find("'fortran_order': False") == std::string::npos) {
    Fail("{}: only C-order .npy files are supported", path);
  }
  NpyArray array;
  array.descr = QuotedValue(header, "descr", path);
  array.shape = ParseShape(header, path);
  NpyItemSize(array.descr);
  return array;
}

}  // namespace

int64_t NpyArray::num_elements() const {
  return std::accumulate(shape.begin(), shape.end(), int64_t{1}, std::multiplies<>());
}

size_t NpyItemSize(const std::string& descr) {
  if (descr == "<f4" || descr == "<i4") return 4;
  if (descr == "<i8" || descr == "<f8") return 8;
  if (descr == "<u2") return 2;
  if (descr == "|b1" || descr == "|u1" || descr == "|i1") return 1;
  Fail("unsupported .npy dtype '{}' (supported: <f4 <f8 <i4 <i8 <u2 |b1 |u1 |i1)", descr);
}

NpyArray ReadNpyHeader(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return ReadHeader(in, path);
}

NpyArray ReadNpy(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  NpyArray array = ReadHeader(in, path);
  size_t bytes = static_cast<size_t>(array.num_elements()) * NpyItemSize(array.descr);
  array.data.resize(bytes);
  in.read(reinterpret_cast<char*>(array.data.data()), static_cast<std::streamsize>(bytes));
  if (static_cast<size_t>(in.gcount()) != bytes) {
    Fail("{}: truncated .npy payload: expected {} bytes for shape [{}], found {}", path, bytes,
         fmt::join(array.shape, ", "), in.gcount());
  }
  return array;
}

void WriteNpy(const std::string& path, const NpyArray& array) {
  size_t expected = static_cast<size_t>(array.num_elements()) * NpyItemSize(array.descr);
  if (array.data.size() != expected) {
    Fail("{}: array data has {} bytes, shape and dtype need {}", path, array.data.size(), expected);
  }
  std::string shape = array.shape.size() == 1 ? fmt::format("({},)", array.shape[0])
                                              : fmt::format("({})", fmt::join(array.shape, ", "));
  std::string header =
      fmt::format("{{'descr': '{}', 'fortran_order': False, 'shape': {}, }}", array.descr, shape);
  size_t total = 10 + header.size() + 1;
  header.append((64 - total % 64) % 64, ' ');
  header.push_back('\n');
  std::ofstream out(path, std::ios::binary);
  if (!out) Fail("{}: cannot open file for writing", path);
  out.write(kMagic, 6);
  const char version[2] = {1, 0};
  out.write(version, 2);
  const unsigned char len[2] = {static_cast<unsigned char>(header.size() & 0xff),
                                static_cast<unsigned char>(header.size() >> 8)};
  out.write(reinterpret_cast<const char*>(len), 2);
  out.write(header.data(), static_cast<std::streamsize>(header.size()));
  out.write(reinterpret_cast<const char*>(array.data.data()),
            static_cast<std::streamsize>(array.data.size()));
  if (!out) Fail("{}: write failed", path);
}

}  // namespace tpusim
