#include "embedding/sparse_enqueue.h"

#include <cstdint>
#include <limits>
#include <numeric>
#include <string>
#include <vector>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "base/error.h"
#include "base/synthetic.h"
#include "embedding/internal/coo_rows.h"

namespace tpusim::embedding {
namespace {

using ::testing::ElementsAre;
using ::testing::ElementsAreArray;
using ::testing::HasSubstr;

FeatureConfig Feature(int64_t max_ids) {
  FeatureConfig feature;
  feature.name = "f1";
  feature.table = "t";
  feature.max_ids = max_ids;
  return feature;
}

// Every test runs with each kernel of the enqueue (embedding/internal/coo_rows.h)
// that the CPU has: AVX-512, AVX2 and the portable one.
class SparseEnqueueTest : public ::testing::TestWithParam<internal::CooKernel> {
 protected:
  void SetUp() override {
    if (!internal::UseCooKernel(GetParam())) GTEST_SKIP() << "this CPU cannot run the kernel";
  }
  void TearDown() override { internal::UseCooKernel(internal::CooKernel::kBest); }
};

std::string KernelName(const ::testing::TestParamInfo<internal::CooKernel>& p) {
  constexpr const char* kNames[] = {"Best", "Avx512", "Avx2", "Portable"};  // CooKernel's order
  return kNames[static_cast<int>(p.param)];
}

INSTANTIATE_TEST_SUITE_P(CooKernels, SparseEnqueueTest,
                         ::testing::Values(internal::CooKernel::kAvx512, internal::CooKernel::kAvx2,
                                           internal::CooKernel::kPortable),
                         KernelName);

std::vector<int> Identity(int n) {
  std::vector<int> order(static_cast<size_t>(n));
  std::iota(order.begin(), order.end(), 0);
  return order;
}

// docs/reference/infeed.md §5.2 worked example E0: one host, 2 cores, batch_size_per_core 2, L = 3.
TEST_P(SparseEnqueueTest, E0MatchesWorkedExample) {
  const std::vector<int64_t> ids = {5, 9, -1, -1, -1, -1, 7, -1, 3, 2, 2, 11};
  std::vector<CooPiece> out;
  EnqueueFeature(Feature(3), 12, DenseIds{ids, 4, 3, {}}, Identity(2), BatchOrigin{}, out);
  ASSERT_EQ(out.size(), 2u);
  EXPECT_EQ(out[0].rows, 2);
  EXPECT_THAT(out[0].sample_indices, ElementsAre(0, 0, 0, 1));
  EXPECT_THAT(out[0].embedding_indices, ElementsAre(5, 9));
  EXPECT_THAT(out[0].aggregation_weights, ElementsAre(1.0f, 1.0f));
  EXPECT_EQ(out[1].rows, 2);
  EXPECT_THAT(out[1].sample_indices, ElementsAre(0, 0, 0, 2, 1, 0, 1, 1, 1, 2));
  EXPECT_THAT(out[1].embedding_indices, ElementsAre(7, 3, 2, 2, 11));
  EXPECT_THAT(out[1].aggregation_weights, ElementsAre(1.0f, 1.0f, 1.0f, 1.0f, 1.0f));
}

// Dense [rows, 1] ids where row r holds id r, so each piece shows which rows it got.
std::vector<int64_t> RowNumbers(int64_t rows) {
  std::vector<int64_t> ids(static_cast<size_t>(rows));
  std::iota(ids.begin(), ids.end(), 0);
  return ids;
}

// E1, v3-8 (b_core = 2): host feature [16, L] -> 8 pieces, piece i -> ordinal i.
TEST_P(SparseEnqueueTest, E1EightPiecesInOrder) {
  const std::vector<int64_t> ids = RowNumbers(16);
  std::vector<CooPiece> out;
  EnqueueFeature(Feature(1), 16, DenseIds{ids, 16, 1, {}}, Identity(8), BatchOrigin{}, out);
  ASSERT_EQ(out.size(), 8u);
  for (int64_t i = 0; i < 8; ++i) {
    EXPECT_THAT(out[i].embedding_indices, ElementsAre(2 * i, 2 * i + 1)) << "ordinal " << i;
    EXPECT_THAT(out[i].sample_indices, ElementsAre(0, 0, 1, 0));
  }
}

// E3, v4-32 per-host (D5): host 1's [8, L] -> 4 pieces; ordinal 2 <- piece 0,
// 3 <- piece 1, 1 <- piece 2, 0 <- piece 3.
TEST_P(SparseEnqueueTest, E3PerHostPermutation) {
  const std::vector<int> ordinal_of_piece = {2, 3, 1, 0};
  EXPECT_THAT(InvertPermutation(ordinal_of_piece), ElementsAre(3, 2, 0, 1));
  const std::vector<int64_t> ids = RowNumbers(8);
  std::vector<CooPiece> out;
  EnqueueFeature(Feature(1), 8, DenseIds{ids, 8, 1, {}}, ordinal_of_piece, BatchOrigin{}, out);
  EXPECT_THAT(out[2].embedding_indices, ElementsAre(0, 1));
  EXPECT_THAT(out[3].embedding_indices, ElementsAre(2, 3));
  EXPECT_THAT(out[1].embedding_indices, ElementsAre(4, 5));
  EXPECT_THAT(out[0].embedding_indices, ElementsAre(6, 7));
}

// E4, v3-32 single host: task 0 builds [64, L] and splits it into 32 pieces; piece
// 13 holds global rows 26-27 (the host routing to task 1 ordinal 5 is infeed's job).
TEST_P(SparseEnqueueTest, E4ThirtyTwoPieces) {
  const std::vector<int64_t> ids = RowNumbers(64);
  std::vector<CooPiece> out;
  EnqueueFeature(Feature(1), 64, DenseIds{ids, 64, 1, {}}, Identity(32), BatchOrigin{}, out);
  ASSERT_EQ(out.size(), 32u);
  EXPECT_THAT(out[13].embedding_indices, ElementsAre(26, 27));
}

TEST_P(SparseEnqueueTest, WeightsFollowTheirIds) {
  const std::vector<int64_t> ids = {4, -1, 1, 2};
  const std::vector<float> weights = {0.5f, 9.0f, 2.0f, 3.0f};
  std::vector<CooPiece> out;
  EnqueueFeature(Feature(2), 5, DenseIds{ids, 2, 2, weights}, Identity(1), BatchOrigin{}, out);
  EXPECT_THAT(out[0].embedding_indices, ElementsAre(4, 1, 2));
  EXPECT_THAT(out[0].aggregation_weights, ElementsAre(0.5f, 2.0f, 3.0f));
}

TEST_P(SparseEnqueueTest, ReusesBuffersAcrossCalls) {
  const std::vector<int64_t> full = {1, 2, 3, 4};
  const std::vector<int64_t> sparse = {1, -1, -1, -1};
  std::vector<CooPiece> out;
  EnqueueFeature(Feature(4), 5, DenseIds{full, 1, 4, {}}, Identity(1), BatchOrigin{}, out);
  const int64_t* buffer = out[0].embedding_indices.data();
  EnqueueFeature(Feature(4), 5, DenseIds{sparse, 1, 4, {}}, Identity(1), BatchOrigin{}, out);
  EXPECT_THAT(out[0].embedding_indices, ElementsAre(1));
  EXPECT_EQ(out[0].embedding_indices.data(), buffer);
}

TEST_P(SparseEnqueueTest, InvalidIdNamesFeatureStepExampleAndValue) {
  const std::vector<int64_t> ids = {1, 2, 3, -1, 0, 13, -1, -1};
  std::vector<CooPiece> out;
  try {
    EnqueueFeature(Feature(2), 13, DenseIds{ids, 4, 2, {}}, Identity(2),
                   BatchOrigin{.step = 7, .first_example_id = 1000}, out);
    FAIL() << "expected Error";
  } catch (const Error& e) {
    EXPECT_STREQ(e.what(),
                 "embedding.features.f1: id 13 at step 7, example 1002, position 1 is outside "
                 "[-1, 13)");
  }
  const std::vector<int64_t> negative = {-2};
  EXPECT_THROW(EnqueueFeature(Feature(1), 13, DenseIds{negative, 1, 1, {}}, Identity(1), BatchOrigin{}, out), Error);
}

TEST_P(SparseEnqueueTest, RejectsBadShapesAndRouting) {
  const std::vector<int64_t> ids(6, 0);
  std::vector<CooPiece> out;
  EXPECT_THROW(EnqueueFeature(Feature(2), 5, DenseIds{ids, 3, 2, {}}, Identity(2), BatchOrigin{}, out), Error);
  EXPECT_THROW(EnqueueFeature(Feature(3), 5, DenseIds{ids, 3, 2, {}}, Identity(1), BatchOrigin{}, out), Error);
  const std::vector<int> not_permutation = {0, 0};
  EXPECT_THROW(InvertPermutation(not_permutation), Error);
}

TEST_P(SparseEnqueueTest, HostEnqueuerRoutesEveryFeature) {
  EmbeddingConfig config;
  config.tables.emplace_back();
  config.tables[0].name = "t";
  config.tables[0].vocab = 10;
  config.tables[0].dim = 2;
  config.features.push_back(Feature(1));
  FeatureConfig second = Feature(2);
  second.name = "f2";
  config.features.push_back(second);
  HostEnqueuer enqueuer(config, {1, 0});
  const std::vector<int64_t> a = {1, 2, 3, 4};
  const std::vector<int64_t> b = {5, -1, 6, -1, 7, 8, 9, -1};
  const std::vector<DenseIds> dense = {DenseIds{a, 4, 1, {}}, DenseIds{b, 4, 2, {}}};
  std::vector<std::vector<CooPiece>> out;
  enqueuer.Enqueue(dense, BatchOrigin{}, out);
  ASSERT_EQ(out.size(), 2u);
  EXPECT_THAT(out[1][0].embedding_indices, ElementsAre(1, 2));
  EXPECT_THAT(out[1][1].embedding_indices, ElementsAre(5, 6));
  EXPECT_THAT(out[0][0].embedding_indices, ElementsAre(3, 4));
  EXPECT_THAT(out[0][1].embedding_indices, ElementsAre(7, 8, 9));
  EXPECT_THAT(out[0][1].sample_indices, ElementsAreArray({0, 0, 0, 1, 1, 0}));
}

// Every row layout the enqueue copies as a run (real ids leading, padding after,
// including all-real and all-padding rows) or id by id (padding first or between
// real ids, which the position-sum test must tell apart from a leading run: [-1,
// 7, 8, -1] has 2 real ids whose positions sum to 3, not 1), with weights, against
// the definition: every real id in row-major order.
TEST_P(SparseEnqueueTest, EveryPaddingLayoutGivesTheRowMajorRealIds) {
  const int64_t max_ids = 4;
  std::vector<int64_t> ids;
  for (int mask = 0; mask < 16; ++mask) {  // row `mask`: position p is real iff bit p
    for (int p = 0; p < max_ids; ++p) ids.push_back((mask >> p) & 1 ? 10 * mask + p : -1);
  }
  std::vector<float> weights(ids.size());
  std::iota(weights.begin(), weights.end(), 0.5f);
  std::vector<int64_t> sample, index;
  std::vector<float> weight;
  for (size_t k = 0; k < ids.size(); ++k) {
    if (ids[k] == -1) continue;
    sample.push_back(static_cast<int64_t>(k) / max_ids % 8);
    sample.push_back(static_cast<int64_t>(k) % max_ids);
    index.push_back(ids[k]);
    weight.push_back(weights[k]);
  }
  std::vector<CooPiece> out;
  EnqueueFeature(Feature(max_ids), 160, DenseIds{ids, 16, max_ids, weights}, Identity(2), BatchOrigin{}, out);
  ASSERT_EQ(out.size(), 2u);
  const size_t first = static_cast<size_t>(out[0].nnz());
  EXPECT_THAT(out[0].embedding_indices, ElementsAreArray(index.begin(), index.begin() + first));
  EXPECT_THAT(out[1].embedding_indices, ElementsAreArray(index.begin() + first, index.end()));
  EXPECT_THAT(out[0].sample_indices, ElementsAreArray(sample.begin(), sample.begin() + 2 * first));
  EXPECT_THAT(out[1].sample_indices, ElementsAreArray(sample.begin() + 2 * first, sample.end()));
  EXPECT_THAT(out[0].aggregation_weights, ElementsAreArray(weight.begin(), weight.begin() + first));
  EXPECT_THAT(out[1].aggregation_weights, ElementsAreArray(weight.begin() + first, weight.end()));
}

// Rows of every length around the AVX-512 kernel's runs of 8 (whole runs, a
// masked last run, both), padding anywhere in a row and in-range ids up to the
// vocab's last, with and without weights, against the definition.
TEST_P(SparseEnqueueTest, RowsOfAnyLengthAndPaddingGiveTheRowMajorRealIds) {
  constexpr int64_t kVocab = 1000;
  for (int64_t max_ids : {1, 3, 7, 8, 9, 13, 16, 17, 31, 32, 33}) {
    const int64_t rows = 12;
    std::vector<int64_t> ids(static_cast<size_t>(rows * max_ids));
    std::vector<float> weights(ids.size());
    for (size_t k = 0; k < ids.size(); ++k) {
      const uint64_t bits = Mix64(static_cast<uint64_t>(max_ids) * 1000003 + k);
      ids[k] = bits % 3 == 0 ? -1 : static_cast<int64_t>((bits >> 8) % kVocab);
      weights[k] = static_cast<float>(k) + 0.25f;
    }
    for (bool weighted : {false, true}) {
      std::vector<CooPiece> out;
      EnqueueFeature(
          Feature(max_ids), kVocab,
          DenseIds{ids, rows, max_ids, weighted ? std::span<const float>(weights) : std::span<const float>()},
          Identity(3), BatchOrigin{}, out);
      ASSERT_EQ(out.size(), 3u);
      for (int64_t piece = 0; piece < 3; ++piece) {
        std::vector<int64_t> sample, index;
        std::vector<float> weight;
        for (int64_t r = 0; r < rows / 3; ++r) {
          for (int64_t p = 0; p < max_ids; ++p) {
            const size_t k = static_cast<size_t>((piece * rows / 3 + r) * max_ids + p);
            if (ids[k] == -1) continue;
            sample.insert(sample.end(), {r, p});
            index.push_back(ids[k]);
            weight.push_back(weighted ? weights[k] : 1.0f);
          }
        }
        const CooPiece& got = out[static_cast<size_t>(piece)];
        EXPECT_THAT(got.embedding_indices, ElementsAreArray(index)) << "max_ids " << max_ids << " piece " << piece;
        EXPECT_THAT(got.sample_indices, ElementsAreArray(sample)) << "max_ids " << max_ids << " piece " << piece;
        EXPECT_THAT(got.aggregation_weights, ElementsAreArray(weight)) << "max_ids " << max_ids << " piece " << piece;
      }
    }
  }
}

// An id outside [-1, vocab) anywhere in the batch — in a whole run or a row's
// masked last run, among real ids or padding — fails the step and is named; the
// ids at the edges of the range (-1 and vocab - 1) do not.
TEST_P(SparseEnqueueTest, OutOfRangeIdsAreFoundAnywhere) {
  constexpr int64_t kVocab = 50;
  constexpr int64_t kRows = 4;
  for (int64_t max_ids : {4, 9, 16}) {
    std::vector<int64_t> ids(static_cast<size_t>(kRows * max_ids));
    for (size_t k = 0; k < ids.size(); ++k) {
      ids[k] = k % static_cast<size_t>(max_ids) >= 3 && k % 3 == 0 ? -1 : static_cast<int64_t>(k % 2 ? kVocab - 1 : 0);
    }
    std::vector<CooPiece> out;
    EXPECT_NO_THROW(
        EnqueueFeature(Feature(max_ids), kVocab, DenseIds{ids, kRows, max_ids, {}}, Identity(2), BatchOrigin{}, out));
    for (int64_t bad :
         {kVocab, int64_t{-2}, std::numeric_limits<int64_t>::min(), std::numeric_limits<int64_t>::max()}) {
      for (size_t k = 0; k < ids.size(); ++k) {
        std::vector<int64_t> with_bad = ids;
        with_bad[k] = bad;
        try {
          EnqueueFeature(Feature(max_ids), kVocab, DenseIds{with_bad, kRows, max_ids, {}}, Identity(2), BatchOrigin{},
                         out);
          ADD_FAILURE() << "id " << bad << " at " << k << " (max_ids " << max_ids << ") passed";
        } catch (const Error& e) {
          EXPECT_THAT(e.what(), HasSubstr("id " + std::to_string(bad) + " at step 0, example " +
                                          std::to_string(static_cast<int64_t>(k) / max_ids) + ", position " +
                                          std::to_string(static_cast<int64_t>(k) % max_ids) + " "));
        }
      }
    }
  }
}

}  // namespace
}  // namespace tpusim::embedding
