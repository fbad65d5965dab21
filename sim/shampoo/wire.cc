#include "sim/shampoo/wire.h"

#include "base/byte_io.h"
#include "base/error.h"

namespace tpusim::sim::shampoo {
namespace {

// Every field is 8 bytes wide (indices and flags widened), so the float payload
// that follows a key's fields starts 8-byte aligned in the message and decodes
// as a view, without copying.
void AppendKey(std::vector<std::byte>& out, int32_t key) { Append<int64_t>(out, key); }

int32_t ReadKey(ByteReader& in, const run::KeyTable& table) {
  const int64_t key = in.Read<int64_t>();
  if (key < 0 || key >= table.size()) {
    Fail("{}: key index {} outside the run's {} keys", in.what(), key, table.size());
  }
  return static_cast<int32_t>(key);
}

size_t MatrixElements(const run::KeyTable& table, int32_t key) {
  const int64_t n = table.key(key).spec.size;
  return static_cast<size_t>(n * n);
}

int64_t ReadCount(ByteReader& in, const run::KeyTable& table) {
  const int64_t count = in.Read<int64_t>();
  if (count < 0 || count > table.size()) {
    Fail("{}: {} keys, the run has {}", in.what(), count, table.size());
  }
  return count;
}

}  // namespace

std::vector<std::byte> EncodeStatistics(std::span<const KeyMatrix> keys) {
  std::vector<std::byte> out;
  Append<int64_t>(out, static_cast<int64_t>(keys.size()));
  for (const KeyMatrix& k : keys) {
    AppendKey(out, k.key);
    Append(out, k.values);
  }
  return out;
}

std::vector<KeyMatrix> DecodeStatistics(std::span<const std::byte> bytes, const run::KeyTable& table) {
  ByteReader in(bytes, "shampoo statistics in the outfeed");
  const int64_t count = ReadCount(in, table);
  std::vector<KeyMatrix> keys;
  for (int64_t i = 0; i < count; ++i) {
    KeyMatrix k;
    k.key = ReadKey(in, table);
    k.values = in.View<float>(MatrixElements(table, k.key));
    keys.push_back(k);
  }
  in.ExpectEnd();
  return keys;
}

std::vector<std::byte> EncodeDelivery(const Delivery& delivery) {
  std::vector<std::byte> out;
  Append(out, delivery.loop);
  Append(out, delivery.global_step);
  Append<int64_t>(out, static_cast<int64_t>(delivery.entries.size()));
  for (const DeliveryEntry& e : delivery.entries) {
    AppendKey(out, e.key);
    Append<int64_t>(out, e.ok ? 1 : 0);
    Append(out, e.statistics_step);
    if (e.ok) Append(out, e.values);
  }
  return out;
}

Delivery DecodeDelivery(std::span<const std::byte> bytes, const run::KeyTable& table) {
  ByteReader in(bytes, "shampoo preconditioner delivery");
  Delivery d;
  d.loop = in.Read<int64_t>();
  d.global_step = in.Read<int64_t>();
  const int64_t count = ReadCount(in, table);
  for (int64_t i = 0; i < count; ++i) {
    DeliveryEntry e;
    e.key = ReadKey(in, table);
    const int64_t ok = in.Read<int64_t>();
    if (ok != 0 && ok != 1) Fail("{}: ok flag {} is neither 0 nor 1", in.what(), ok);
    e.ok = ok == 1;
    e.statistics_step = in.Read<int64_t>();
    if (e.ok) e.values = in.View<float>(MatrixElements(table, e.key));
    d.entries.push_back(e);
  }
  in.ExpectEnd();
  return d;
}

size_t MaxDeliveryBytes(const run::KeyTable& table, int host) {
  size_t bytes = 3 * sizeof(int64_t);
  for (int key : table.OwnedBy(host)) {
    bytes += 3 * sizeof(int64_t) + MatrixElements(table, key) * sizeof(float);
  }
  return bytes;
}

}  // namespace tpusim::sim::shampoo
