// Typed configuration of the TPU embedding: tables (vocabulary, width, combiner,
// sharding, optimizer) and features (which table, ids per example, synthetic id
// distribution). Semantics follow docs/reference/infeed.md §5 and docs/reference/training.md §7.
// This file does not read YAML; the config loader maps YAML keys onto these structs
// and calls Validate(), whose messages name the YAML key ("embedding.tables.t.dim").
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace tpusim::embedding {

// How the ids of one sample are reduced to one activation row (§5.4).
enum class Combiner { kSum, kMean, kSqrtn };
// How the rows of a table are spread over the shards (§5.6).
enum class Sharding { kDiv, kMod };
// The optimizer the embedding engine applies to touched rows (docs/reference/training.md §7.4).
enum class OptimizerKind { kSgd, kAdagrad, kAdam };
// Distribution of synthetic ids over [0, vocab).
enum class IdDistribution { kUniform, kZipf };
// When the table optimizer runs with micro-batches (docs/reference/training.md §1, §7.3 step 4).
// kGlobalStep: the table gradients of the num_micro_batches micro-steps of a global
// step are summed, each scaled by 1/num_micro_batches like the dense gradients of
// the accumulation wrapper, and applied once per touched row on the last micro-step,
// so k micro-batches of G train the tables like one batch of k*G.
// kMicroStep: every micro-step applies its own gradient (Lingvo's behaviour, whose
// accumulation wrappers see only the dense variables).
enum class UpdateMode { kGlobalStep, kMicroStep };

// Where a table's rows live on this machine. kAllocated: every row of the shard,
// dense, as a TPU core holds it. kModeled: only the rows the run touches (a row
// never touched keeps its initial value, a pure function of its id, so lookups
// and updates equal the allocated table's); the pod's table is then a figure
// (docs/design-notes.md, "Real-size tables"). kAuto: the run chooses
// (run/table_storage.h); a table still kAuto is allocated.
enum class TableStorage { kAuto, kAllocated, kModeled };

// Adam as run by the embedding engine: lazy (only rows present in the step move) and
// without bias correction, which Lingvo does not fold into the learning rate.
struct AdamConfig {
  float beta1 = 0.9f;
  float beta2 = 0.999f;
  float epsilon = 1e-8f;
  // Only lazy Adam is modelled; Validate() rejects false.
  bool lazy = true;
  // true: W -= lr*m/sqrt(v + eps^2); false: W -= lr*m/(sqrt(v) + eps).
  bool sum_inside_sqrt = true;
};

struct TableConfig {
  std::string name;
  int64_t vocab = 0;  // rows, >= 1
  int64_t dim = 0;    // row width, >= 1
  // Lingvo's table params default to sum (TF's TableConfig defaults to mean).
  Combiner combiner = Combiner::kSum;
  Sharding sharding = Sharding::kDiv;
  TableStorage storage = TableStorage::kAuto;
  OptimizerKind optimizer = OptimizerKind::kSgd;
  float learning_rate = 0.01f;  // > 0; the static per-table lr (callers may scale it per step)
  // Adagrad accumulator start value; must be > 0 so the first step does not divide by 0.
  float initial_accumulator = 0.1f;
  AdamConfig adam;
  // Rows start uniform in [-init_scale, init_scale), a pure function of
  // (init_seed, table name, global row, column), so every sharding starts identical.
  uint64_t init_seed = 0;
  float init_scale = 0.05f;
};

struct FeatureConfig {
  std::string name;
  std::string table;    // name of a declared TableConfig
  int64_t max_ids = 1;  // ids per example (dense width), padded with -1
  // 0: combined feature (one activation row per example); L > 0: sequence feature
  // (L rows per example, positions >= L truncated).
  int64_t max_sequence_length = 0;
  // Optional name of the input key holding per-id float weights of the same shape
  // as the ids; empty = every id weighs 1.
  std::string weights;
  IdDistribution distribution = IdDistribution::kUniform;
  double zipf_exponent = 1.0;     // > 0; P(id = k) ∝ (k + 1)^-exponent
  double padding_fraction = 0.0;  // in [0, 1): expected share of -1 positions
};

// All tables and features of the model. Order is the caller's; the engine keeps
// activations and gradients in `features` order.
struct EmbeddingConfig {
  std::vector<TableConfig> tables;
  std::vector<FeatureConfig> features;
  UpdateMode update = UpdateMode::kGlobalStep;
  // Micro-steps per global step (the run's train.num_micro_batches), >= 1.
  int64_t num_micro_batches = 1;
};

// Backward calls whose gradients one table update applies: num_micro_batches with
// UpdateMode::kGlobalStep, 1 with kMicroStep.
int64_t MicroStepsPerUpdate(const EmbeddingConfig& config);

// Throws Error naming the key (e.g. "embedding.tables.t.vocab: 0 must be >= 1") on
// the first invalid value: duplicate names, non-positive sizes, unknown tables,
// out-of-range optimizer hyperparameters, padding or Zipf parameters, fewer than
// one micro-batch.
void Validate(const TableConfig& table);
void Validate(const EmbeddingConfig& config);

// Index of the table named `name` in config.tables; throws Error if absent.
size_t TableIndex(const EmbeddingConfig& config, std::string_view name);

// Model input columns of one feature's activations: dim, or L * dim for a
// sequence feature.
int64_t FeatureWidth(const EmbeddingConfig& config, size_t feature);
// Sum of the feature widths (0 for a config without features).
int64_t EmbeddingWidth(const EmbeddingConfig& config);

// Parse the YAML spelling of an enum value. `key` names the YAML key for the error,
// thrown when `value` is not one of the allowed spellings (listed in the message).
Combiner ParseCombiner(std::string_view value, std::string_view key);
Sharding ParseSharding(std::string_view value, std::string_view key);
OptimizerKind ParseOptimizer(std::string_view value, std::string_view key);
IdDistribution ParseIdDistribution(std::string_view value, std::string_view key);
UpdateMode ParseUpdateMode(std::string_view value, std::string_view key);
TableStorage ParseTableStorage(std::string_view value, std::string_view key);

std::string_view ToString(Combiner combiner);
std::string_view ToString(Sharding sharding);
std::string_view ToString(OptimizerKind optimizer);
// Optimizer slots a table row carries beside its parameters: sgd 0, adagrad 1 (the
// accumulator), adam 2 (m and v).
int SlotsOf(OptimizerKind optimizer);
std::string_view ToString(UpdateMode update);
std::string_view ToString(TableStorage storage);

}  // namespace tpusim::embedding
