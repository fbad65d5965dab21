#include "embedding/config.h"

#include <gtest/gtest.h>

#include "base/error.h"

namespace tpusim::embedding {
namespace {

EmbeddingConfig ValidConfig() {
  EmbeddingConfig config;
  config.tables.emplace_back();
  config.tables[0].name = "t";
  config.tables[0].vocab = 10;
  config.tables[0].dim = 4;
  config.features.emplace_back();
  config.features[0].name = "f1";
  config.features[0].table = "t";
  config.features[0].max_ids = 3;
  return config;
}

std::string ErrorOf(const EmbeddingConfig& config) {
  try {
    Validate(config);
  } catch (const Error& e) {
    return e.what();
  }
  return "";
}

TEST(ConfigTest, DefaultsFollowLingvoAndTheEngine) {
  const TableConfig table;
  EXPECT_EQ(table.combiner, Combiner::kSum);
  EXPECT_EQ(table.sharding, Sharding::kDiv);
  EXPECT_FLOAT_EQ(table.initial_accumulator, 0.1f);
  EXPECT_FLOAT_EQ(table.adam.beta1, 0.9f);
  EXPECT_FLOAT_EQ(table.adam.beta2, 0.999f);
  EXPECT_FLOAT_EQ(table.adam.epsilon, 1e-8f);
  EXPECT_TRUE(table.adam.lazy);
  EXPECT_TRUE(table.adam.sum_inside_sqrt);
  const EmbeddingConfig config;
  EXPECT_EQ(config.update, UpdateMode::kGlobalStep);
  EXPECT_EQ(config.num_micro_batches, 1);
  const FeatureConfig feature;
  EXPECT_EQ(feature.max_sequence_length, 0);
  EXPECT_EQ(feature.distribution, IdDistribution::kUniform);
  EXPECT_EQ(ErrorOf(ValidConfig()), "");
}

TEST(ConfigTest, UnknownTableIsNamed) {
  EmbeddingConfig config = ValidConfig();
  config.features[0].table = "tx";
  EXPECT_EQ(ErrorOf(config), "embedding.features.f1.table: 'tx' is not a declared table");
}

TEST(ConfigTest, TableValuesAreChecked) {
  EmbeddingConfig config = ValidConfig();
  config.tables[0].vocab = 0;
  EXPECT_EQ(ErrorOf(config), "embedding.tables.t.vocab: 0 must be >= 1");
  config = ValidConfig();
  config.tables[0].dim = -1;
  EXPECT_EQ(ErrorOf(config), "embedding.tables.t.dim: -1 must be >= 1");
  config = ValidConfig();
  config.tables[0].optimizer = OptimizerKind::kAdagrad;
  config.tables[0].initial_accumulator = 0.0f;
  EXPECT_EQ(ErrorOf(config), "embedding.tables.t.initial_accumulator: 0 must be in (0, inf)");
  config = ValidConfig();
  config.tables[0].optimizer = OptimizerKind::kAdam;
  config.tables[0].adam.beta1 = 1.0f;
  EXPECT_EQ(ErrorOf(config), "embedding.tables.t.adam.beta1: 1 must be in [0, 1)");
  config.tables[0].adam.beta1 = 0.9f;
  config.tables[0].adam.lazy = false;
  EXPECT_NE(ErrorOf(config).find("embedding.tables.t.adam.lazy"), std::string::npos);
  config = ValidConfig();
  config.tables[0].learning_rate = 0.0f;
  EXPECT_EQ(ErrorOf(config), "embedding.tables.t.learning_rate: 0 must be in (0, inf)");
}

TEST(ConfigTest, FeatureValuesAreChecked) {
  EmbeddingConfig config = ValidConfig();
  config.features[0].max_ids = 0;
  EXPECT_EQ(ErrorOf(config), "embedding.features.f1.max_ids: 0 must be >= 1");
  config = ValidConfig();
  config.features[0].max_sequence_length = -2;
  EXPECT_EQ(ErrorOf(config), "embedding.features.f1.max_sequence_length: -2 must be >= 0");
  config = ValidConfig();
  config.features[0].padding_fraction = 1.0;
  EXPECT_EQ(ErrorOf(config), "embedding.features.f1.padding_fraction: 1 must be in [0, 1)");
  config = ValidConfig();
  config.features[0].distribution = IdDistribution::kZipf;
  config.features[0].zipf_exponent = 0.0;
  EXPECT_EQ(ErrorOf(config), "embedding.features.f1.zipf_exponent: 0 must be in (0, inf)");
}

TEST(ConfigTest, DuplicateNamesAreRejected) {
  EmbeddingConfig config = ValidConfig();
  config.tables.push_back(config.tables[0]);
  EXPECT_EQ(ErrorOf(config), "embedding.tables.t: declared twice");
  config = ValidConfig();
  config.features.push_back(config.features[0]);
  EXPECT_EQ(ErrorOf(config), "embedding.features.f1: declared twice");
}

// Tables accumulate over the micro-batches only with update global_step.
TEST(ConfigTest, MicroStepsPerUpdateFollowTheUpdateMode) {
  EmbeddingConfig config = ValidConfig();
  config.num_micro_batches = 4;
  EXPECT_EQ(MicroStepsPerUpdate(config), 4);
  config.update = UpdateMode::kMicroStep;
  EXPECT_EQ(MicroStepsPerUpdate(config), 1);
  config.num_micro_batches = 0;
  EXPECT_EQ(ErrorOf(config), "train.num_micro_batches: 0 must be >= 1");
}

TEST(ConfigTest, ParsesSpellings) {
  EXPECT_EQ(ParseCombiner("sqrtn", "k"), Combiner::kSqrtn);
  EXPECT_EQ(ParseSharding("mod", "k"), Sharding::kMod);
  EXPECT_EQ(ParseOptimizer("adagrad", "k"), OptimizerKind::kAdagrad);
  EXPECT_EQ(ParseIdDistribution("zipf", "k"), IdDistribution::kZipf);
  try {
    ParseCombiner("max", "embedding.tables.t.combiner");
    FAIL();
  } catch (const Error& e) {
    EXPECT_STREQ(e.what(), "embedding.tables.t.combiner: 'max' is not one of sum, mean, sqrtn");
  }
  EXPECT_EQ(ToString(OptimizerKind::kAdam), "adam");
  EXPECT_EQ(ParseUpdateMode("micro_step", "k"), UpdateMode::kMicroStep);
  EXPECT_EQ(ToString(UpdateMode::kGlobalStep), "global_step");
  try {
    ParseUpdateMode("loop", "embedding.update");
    FAIL();
  } catch (const Error& e) {
    EXPECT_STREQ(e.what(), "embedding.update: 'loop' is not one of global_step, micro_step");
  }
}

}  // namespace
}  // namespace tpusim::embedding
