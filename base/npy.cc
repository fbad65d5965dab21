#include "base/npy.h"

#include <charconv>
#include <fstream>
#include <limits>
#include <numeric>
#include <sstream>

#include <fmt/ranges.h>

#include "base/atomic_file.h"
#include "base/error.h"
#include "base/regular_file.h"

namespace tpusim {
namespace {

constexpr char kMagic[] = "\x93NUMPY";
// NumPy itself writes headers of a few hundred bytes; anything near this is not a
// .npy file and must not make us allocate it.
constexpr uint32_t kMaxHeaderBytes = 1 << 20;

// The text after `key`'s colon in a header dict, or a failure naming the key.
size_t ValueStart(const std::string& header, const std::string& key, const std::string& path) {
  size_t at = header.find("'" + key + "'");
  size_t colon = at == std::string::npos ? at : header.find(':', at);
  if (colon == std::string::npos) Fail("{}: malformed .npy header (no '{}'): {}", path, key, header);
  return colon + 1;
}

// Returns the text between the quotes that follow `key` in a header dict.
std::string QuotedValue(const std::string& header, const std::string& key, const std::string& path) {
  size_t open = header.find('\'', ValueStart(header, key, path));
  size_t close = open == std::string::npos ? open : header.find('\'', open + 1);
  if (close == std::string::npos) Fail("{}: malformed .npy header ('{}' is not quoted): {}", path, key, header);
  return header.substr(open + 1, close - open - 1);
}

std::string_view Trim(std::string_view text) {
  size_t first = text.find_first_not_of(' ');
  if (first == std::string_view::npos) return {};
  return text.substr(first, text.find_last_not_of(' ') - first + 1);
}

// One dimension: a whole non-negative decimal number.
int64_t ParseDim(std::string_view item, const std::string& inner, const std::string& path) {
  int64_t value = -1;
  auto [end, error] = std::from_chars(item.data(), item.data() + item.size(), value);
  if (error != std::errc() || end != item.data() + item.size() || value < 0) {
    Fail("{}: malformed .npy shape '({})': '{}' is not a dimension (an integer >= 0)", path, inner, item);
  }
  return value;
}

std::vector<int64_t> ParseShape(const std::string& header, const std::string& path) {
  size_t open = header.find('(', ValueStart(header, "shape", path));
  size_t close = open == std::string::npos ? open : header.find(')', open);
  if (close == std::string::npos) Fail("{}: malformed .npy header (no shape tuple): {}", path, header);
  std::string inner = header.substr(open + 1, close - open - 1);
  std::vector<std::string_view> items;
  for (std::string_view rest = inner;;) {
    size_t comma = rest.find(',');
    items.push_back(Trim(rest.substr(0, comma)));
    if (comma == std::string_view::npos) break;
    rest = rest.substr(comma + 1);
  }
  // "()" is a scalar; the trailing comma of a 1-tuple, "(5,)", leaves one empty item.
  if (items.back().empty() && (items.size() > 1 || Trim(inner).empty())) items.pop_back();
  std::vector<int64_t> shape;
  for (std::string_view item : items) shape.push_back(ParseDim(item, inner, path));
  return shape;
}

// Bytes the payload of `array` needs; fails instead of overflowing.
size_t PayloadBytes(const NpyArray& array, const std::string& path) {
  uint64_t bytes = NpyItemSize(array.descr);
  for (int64_t d : array.shape) {
    if (__builtin_mul_overflow(bytes, static_cast<uint64_t>(d), &bytes) ||
        bytes > static_cast<uint64_t>(std::numeric_limits<int64_t>::max())) {
      Fail("{}: .npy shape [{}] of '{}' is too large to be held (more than 2^63 bytes)", path,
           fmt::join(array.shape, ", "), array.descr);
    }
  }
  return static_cast<size_t>(bytes);
}

uint32_t ReadHeaderLength(std::istream& in, const std::string& path) {
  char magic[8] = {};
  in.read(magic, 8);
  if (!in || std::string(magic, 6) != std::string(kMagic, 6)) {
    Fail("{}: not a .npy file (bad magic)", path);
  }
  if (magic[6] < 1 || magic[6] > 3) Fail("{}: unsupported .npy format version {}", path, int(magic[6]));
  unsigned char len_bytes[4] = {};
  int len_size = magic[6] == 1 ? 2 : 4;
  in.read(reinterpret_cast<char*>(len_bytes), len_size);
  if (!in) Fail("{}: truncated .npy header", path);
  uint32_t header_len = 0;
  for (int i = len_size - 1; i >= 0; --i) header_len = header_len * 256 + len_bytes[i];
  if (header_len > kMaxHeaderBytes) {
    Fail("{}: .npy header of {} bytes (at most {} supported)", path, header_len, kMaxHeaderBytes);
  }
  return header_len;
}

// Bytes left in `in` after the current position.
uint64_t Remaining(std::istream& in) {
  std::streampos here = in.tellg();
  in.seekg(0, std::ios::end);
  std::streampos end = in.tellg();
  in.seekg(here);
  return end > here ? static_cast<uint64_t>(end - here) : 0;
}

// Reads the header and checks that the payload it announces is all there.
NpyArray ReadHeader(std::istream& in, const std::string& path, NpyPayload payload) {
  if (!in) Fail("{}: cannot open file", path);
  std::string header(ReadHeaderLength(in, path), '\0');
  in.read(header.data(), static_cast<std::streamsize>(header.size()));
  if (!in) Fail("{}: truncated .npy header", path);
  if (header.find("'fortran_order': False") == std::string::npos) {
    Fail("{}: only C-order .npy files are supported", path);
  }
  NpyArray array;
  array.descr = QuotedValue(header, "descr", path);
  array.shape = ParseShape(header, path);
  size_t bytes = PayloadBytes(array, path);
  uint64_t found = Remaining(in);
  if (payload == NpyPayload::kCompressed) {
    if (found == 0) Fail("{}: truncated: no compressed payload after the .npy header", path);
    return array;
  }
  if (found < bytes) {
    Fail("{}: truncated .npy payload: expected {} bytes for shape [{}], found {}", path, bytes,
         fmt::join(array.shape, ", "), found);
  }
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

NpyArray ReadNpyHeader(const std::string& path, NpyPayload payload) {
  RefuseNonRegularFile(path);  // a FIFO would block the open below
  std::ifstream in(path, std::ios::binary);
  return ReadHeader(in, path, payload);
}

NpyArray ReadNpy(std::istream& in, const std::string& path) {
  NpyArray array = ReadHeader(in, path, NpyPayload::kRaw);
  size_t bytes = PayloadBytes(array, path);
  array.data.resize(bytes);
  in.read(reinterpret_cast<char*>(array.data.data()), static_cast<std::streamsize>(bytes));
  if (static_cast<size_t>(in.gcount()) != bytes) {
    Fail("{}: truncated .npy payload: expected {} bytes for shape [{}], found {}", path, bytes,
         fmt::join(array.shape, ", "), in.gcount());
  }
  return array;
}

NpyArray ReadNpy(const std::string& path) {
  RefuseNonRegularFile(path);
  std::ifstream in(path, std::ios::binary);
  return ReadNpy(in, path);
}

void WriteNpy(const std::string& path, const NpyArray& array, const std::string& label) {
  size_t expected = PayloadBytes(array, path);
  if (array.data.size() != expected) {
    Fail("{}: array data has {} bytes, shape and dtype need {}", path, array.data.size(), expected);
  }
  std::string shape = array.shape.size() == 1 ? fmt::format("({},)", array.shape[0])
                                              : fmt::format("({})", fmt::join(array.shape, ", "));
  std::string header = fmt::format("{{'descr': '{}', 'fortran_order': False, 'shape': {}, }}", array.descr, shape);
  size_t total = 10 + header.size() + 1;
  header.append((64 - total % 64) % 64, ' ');
  header.push_back('\n');
  const char preamble[10] = {kMagic[0],
                             kMagic[1],
                             kMagic[2],
                             kMagic[3],
                             kMagic[4],
                             kMagic[5],
                             1,
                             0,
                             static_cast<char>(header.size() & 0xff),
                             static_cast<char>(header.size() >> 8)};
  AtomicFile out(path, label.empty() ? path : label);
  out.Write(std::string_view(preamble, sizeof(preamble)));
  out.Write(header);
  out.Write(array.data);
  out.Commit();
}

}  // namespace tpusim
