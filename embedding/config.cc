#include "embedding/config.h"

#include <array>
#include <cmath>
#include <set>
#include <utility>

#include "base/error.h"
#include "base/spellings.h"

namespace tpusim::embedding {
namespace {

constexpr Spellings<Combiner, 3> kCombiners{
    {{"sum", Combiner::kSum}, {"mean", Combiner::kMean}, {"sqrtn", Combiner::kSqrtn}}};
constexpr Spellings<Sharding, 2> kShardings{{{"div", Sharding::kDiv}, {"mod", Sharding::kMod}}};
constexpr Spellings<OptimizerKind, 3> kOptimizers{
    {{"sgd", OptimizerKind::kSgd}, {"adagrad", OptimizerKind::kAdagrad}, {"adam", OptimizerKind::kAdam}}};
constexpr Spellings<IdDistribution, 2> kDistributions{
    {{"uniform", IdDistribution::kUniform}, {"zipf", IdDistribution::kZipf}}};
constexpr Spellings<UpdateMode, 2> kUpdateModes{
    {{"global_step", UpdateMode::kGlobalStep}, {"micro_step", UpdateMode::kMicroStep}}};
constexpr Spellings<TableStorage, 3> kStorages{
    {{"auto", TableStorage::kAuto}, {"allocated", TableStorage::kAllocated}, {"modeled", TableStorage::kModeled}}};

// Throws unless `value` is finite and in (low, high) / [low, high) as requested.
void CheckRange(std::string_view key, double value, double low, bool low_inclusive, double high) {
  const bool above = low_inclusive ? value >= low : value > low;
  if (!std::isfinite(value) || !above || !(value < high)) {
    Fail("{}: {} must be in {}{}, {})", key, value, low_inclusive ? "[" : "(", low, high);
  }
}

void ValidateAdam(const std::string& key, const AdamConfig& adam) {
  CheckRange(key + ".beta1", adam.beta1, 0.0, true, 1.0);
  CheckRange(key + ".beta2", adam.beta2, 0.0, true, 1.0);
  CheckRange(key + ".epsilon", adam.epsilon, 0.0, false, INFINITY);
  if (!adam.lazy) Fail("{}.lazy: false is not supported (only lazy Adam is modelled)", key);
}

// Index of the table `name`, or tables.size() when there is none. Run configs keep
// tables in name order, so a binary search finds it in O(log n) (n features each
// naming a table must not cost n^2); the scan still finds it in a list in any order.
size_t FindTable(const EmbeddingConfig& config, std::string_view name) {
  size_t lo = 0, hi = config.tables.size();
  while (lo < hi) {
    size_t mid = lo + (hi - lo) / 2;
    if (config.tables[mid].name < name) {
      lo = mid + 1;
    } else {
      hi = mid;
    }
  }
  if (lo < config.tables.size() && config.tables[lo].name == name) return lo;
  for (size_t i = 0; i < config.tables.size(); ++i) {
    if (config.tables[i].name == name) return i;
  }
  return config.tables.size();
}

void ValidateFeature(const EmbeddingConfig& config, const FeatureConfig& feature) {
  const std::string key = "embedding.features." + feature.name;
  if (feature.name.empty()) Fail("embedding.features: a feature has an empty name");
  if (FindTable(config, feature.table) == config.tables.size()) {
    Fail("{}.table: '{}' is not a declared table", key, feature.table);
  }
  if (feature.max_ids < 1) Fail("{}.max_ids: {} must be >= 1", key, feature.max_ids);
  if (feature.max_sequence_length < 0) {
    Fail("{}.max_sequence_length: {} must be >= 0", key, feature.max_sequence_length);
  }
  if (feature.weights == feature.name) {
    Fail("{}.weights: '{}' must name another input key than the feature itself", key, feature.weights);
  }
  if (feature.distribution == IdDistribution::kZipf) {
    CheckRange(key + ".zipf_exponent", feature.zipf_exponent, 0.0, false, INFINITY);
  }
  CheckRange(key + ".padding_fraction", feature.padding_fraction, 0.0, true, 1.0);
}

}  // namespace

void Validate(const TableConfig& table) {
  const std::string key = "embedding.tables." + table.name;
  if (table.name.empty()) Fail("embedding.tables: a table has an empty name");
  if (table.vocab < 1) Fail("{}.vocab: {} must be >= 1", key, table.vocab);
  if (table.dim < 1) Fail("{}.dim: {} must be >= 1", key, table.dim);
  CheckRange(key + ".learning_rate", table.learning_rate, 0.0, false, INFINITY);
  CheckRange(key + ".init_scale", table.init_scale, 0.0, true, INFINITY);
  if (table.optimizer == OptimizerKind::kAdagrad) {
    CheckRange(key + ".initial_accumulator", table.initial_accumulator, 0.0, false, INFINITY);
  }
  if (table.optimizer == OptimizerKind::kAdam) ValidateAdam(key + ".adam", table.adam);
}

void Validate(const EmbeddingConfig& config) {
  if (config.num_micro_batches < 1) {
    Fail("train.num_micro_batches: {} must be >= 1", config.num_micro_batches);
  }
  std::set<std::string_view> names;
  for (const TableConfig& table : config.tables) {
    Validate(table);
    if (!names.insert(table.name).second) {
      Fail("embedding.tables.{}: declared twice", table.name);
    }
  }
  names.clear();
  for (const FeatureConfig& feature : config.features) {
    ValidateFeature(config, feature);
    if (!names.insert(feature.name).second) {
      Fail("embedding.features.{}: declared twice", feature.name);
    }
  }
}

int64_t MicroStepsPerUpdate(const EmbeddingConfig& config) {
  return config.update == UpdateMode::kGlobalStep ? config.num_micro_batches : 1;
}

size_t TableIndex(const EmbeddingConfig& config, std::string_view name) {
  size_t index = FindTable(config, name);
  if (index == config.tables.size()) Fail("embedding.tables: '{}' is not a declared table", name);
  return index;
}

Combiner ParseCombiner(std::string_view value, std::string_view key) { return ParseSpelling(kCombiners, value, key); }
Sharding ParseSharding(std::string_view value, std::string_view key) { return ParseSpelling(kShardings, value, key); }
OptimizerKind ParseOptimizer(std::string_view value, std::string_view key) {
  return ParseSpelling(kOptimizers, value, key);
}
IdDistribution ParseIdDistribution(std::string_view value, std::string_view key) {
  return ParseSpelling(kDistributions, value, key);
}
UpdateMode ParseUpdateMode(std::string_view value, std::string_view key) {
  return ParseSpelling(kUpdateModes, value, key);
}
TableStorage ParseTableStorage(std::string_view value, std::string_view key) {
  return ParseSpelling(kStorages, value, key);
}
std::string_view ToString(TableStorage storage) { return SpellingOf(kStorages, storage); }

std::string_view ToString(Combiner combiner) { return SpellingOf(kCombiners, combiner); }
int64_t FeatureWidth(const EmbeddingConfig& config, size_t feature) {
  const FeatureConfig& f = config.features[feature];
  const int64_t dim = config.tables[TableIndex(config, f.table)].dim;
  return f.max_sequence_length > 0 ? f.max_sequence_length * dim : dim;
}

int64_t EmbeddingWidth(const EmbeddingConfig& config) {
  int64_t width = 0;
  for (size_t f = 0; f < config.features.size(); ++f) width += FeatureWidth(config, f);
  return width;
}

std::string_view ToString(Sharding sharding) { return SpellingOf(kShardings, sharding); }

int SlotsOf(OptimizerKind optimizer) {
  switch (optimizer) {
    case OptimizerKind::kSgd:
      return 0;
    case OptimizerKind::kAdagrad:
      return 1;
    case OptimizerKind::kAdam:
      return 2;
  }
  return 0;
}

std::string_view ToString(OptimizerKind optimizer) { return SpellingOf(kOptimizers, optimizer); }
std::string_view ToString(UpdateMode update) { return SpellingOf(kUpdateModes, update); }

}  // namespace tpusim::embedding
