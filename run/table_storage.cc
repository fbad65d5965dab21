#include "run/table_storage.h"

#include <algorithm>
#include <cmath>
#include <vector>

#include <fmt/format.h>

#include "base/byte_size.h"

namespace tpusim::run {
namespace {

constexpr double kTableGiB = 1024.0 * 1024.0 * 1024.0;

double RowBytes(const embedding::TableConfig& t, int arrays) { return 4.0 * static_cast<double>(t.dim) * arrays; }

// Expected distinct values among `draws` Zipf(s) draws over [1, vocab]:
// sum over k of 1 - exp(-draws p_k), p_k = k^-s / H. The first terms are summed,
// the tail integrated over a log grid (within a few percent).
double ZipfDistinct(int64_t vocab, double s, double draws) {
  constexpr int64_t kExact = 4096;
  const auto power = [s](double k) { return std::pow(k, -s); };
  double h = 0;
  for (int64_t k = 1; k <= std::min(vocab, kExact); ++k) h += power(static_cast<double>(k));
  const double a = static_cast<double>(kExact) + 0.5, b = static_cast<double>(vocab) + 0.5;
  if (vocab > kExact)
    h += std::fabs(s - 1) < 1e-9 ? std::log(b / a) : (std::pow(b, 1 - s) - std::pow(a, 1 - s)) / (1 - s);
  double distinct = 0;
  for (int64_t k = 1; k <= std::min(vocab, kExact); ++k)
    distinct += -std::expm1(-draws * power(static_cast<double>(k)) / h);
  if (vocab <= kExact) return distinct;
  constexpr int kSteps = 2000;  // trapezoids over t = log x
  const double t0 = std::log(a), dt = (std::log(b) - t0) / kSteps;
  for (int i = 0; i <= kSteps; ++i) {
    const double x = std::exp(t0 + i * dt);
    const double f = -std::expm1(-draws * power(x) / h) * x;
    distinct += (i == 0 || i == kSteps ? 0.5 : 1.0) * f * dt;
  }
  return distinct;
}

}  // namespace

double AllocatedTableBytes(const embedding::EmbeddingConfig& config) {
  double bytes = 0;
  for (const embedding::TableConfig& t : config.tables) {
    bytes += static_cast<double>(t.vocab) * RowBytes(t, 2 + embedding::SlotsOf(t.optimizer));
  }
  return bytes;
}

std::string FirstModeledTable(const embedding::EmbeddingConfig& config) {
  for (const embedding::TableConfig& t : config.tables) {
    if (t.storage == embedding::TableStorage::kModeled) return t.name;
  }
  return "";
}

std::string ChooseTableStorage(embedding::EmbeddingConfig& config, double machine_bytes) {
  const bool model = AllocatedTableBytes(config) > machine_bytes / 2;
  std::vector<std::string> modeled;
  for (embedding::TableConfig& t : config.tables) {
    if (t.storage != embedding::TableStorage::kAuto) continue;
    t.storage = model ? embedding::TableStorage::kModeled : embedding::TableStorage::kAllocated;
    if (model) modeled.push_back(t.name);
  }
  if (modeled.empty()) return "";
  return fmt::format(
      "embedding: the tables would take {:.1f} GiB allocated (with optimizer slots and gradients), over half of "
      "this machine's {:.1f} GiB: {} of {} tables modeled, holding only the rows the run touches "
      "(embedding.storage: allocated keeps them whole)",
      AllocatedTableBytes(config) / kTableGiB, machine_bytes / kTableGiB, modeled.size(), config.tables.size());
}

TablesOnCores TablesOnTheCores(const embedding::EmbeddingConfig& config, int num_cores, double hbm_gib_per_core,
                               const std::string& topology) {
  TablesOnCores out;
  for (const embedding::TableConfig& t : config.tables) {
    const double rows = std::ceil(static_cast<double>(t.vocab) / num_cores);  // the largest shard
    out.bytes_per_core += rows * RowBytes(t, 1 + embedding::SlotsOf(t.optimizer));
  }
  out.hbm_bytes_per_core = hbm_gib_per_core * kTableGiB;
  out.fit = out.hbm_bytes_per_core <= 0 || out.bytes_per_core <= out.hbm_bytes_per_core;
  if (config.tables.empty()) return out;
  const std::string need =
      fmt::format("embedding: the tables need {} per core with their optimizer slots", ByteSize(out.bytes_per_core));
  if (out.hbm_bytes_per_core <= 0) {
    out.line = fmt::format("{} ({} gives no hbm_gib_per_core to compare)", need, topology);
  } else {
    out.line = fmt::format("{}, against {:.1f} GiB of HBM per core on {}: they {}", need, hbm_gib_per_core, topology,
                           out.fit ? "fit" : "do not fit (shard them over more cores or shrink them)");
  }
  return out;
}

std::vector<std::string> TableLines(const EmbeddingSection& embedding, const cluster::Topology& topology) {
  std::vector<std::string> lines;
  if (embedding.config.tables.empty()) return lines;
  if (!embedding.storage_note.empty()) lines.push_back(embedding.storage_note);
  lines.push_back(
      TablesOnTheCores(embedding.config, topology.num_cores(), topology.hardware().hbm_gib_per_core, topology.name())
          .line);
  return lines;
}

double ExpectedRowsHeld(const embedding::EmbeddingConfig& config, size_t table, double examples) {
  const embedding::TableConfig& t = config.tables[table];
  double rows = 0;
  for (const embedding::FeatureConfig& f : config.features) {
    if (f.table != t.name) continue;
    const double draws = examples * static_cast<double>(f.max_ids) * (1 - f.padding_fraction);
    const double vocab = static_cast<double>(t.vocab);
    rows += f.distribution == embedding::IdDistribution::kZipf ? ZipfDistinct(t.vocab, f.zipf_exponent, draws)
                                                               : -vocab * std::expm1(-draws / vocab);
  }
  return std::min(rows, static_cast<double>(t.vocab));
}

}  // namespace tpusim::run
