#include "base/histogram.h"

#include <gtest/gtest.h>

namespace tpusim {
namespace {

TEST(DurationHistogramTest, QuantilesWithinABucketAndMerging) {
  DurationHistogram a, b;
  for (int i = 1; i <= 1000; ++i) (i % 2 ? a : b).Add(i * 1e-4);  // 0.1 ms .. 100 ms
  a.Merge(b);
  EXPECT_EQ(a.count(), 1000);
  EXPECT_NEAR(a.sum_s(), 1e-4 * 1000 * 1001 / 2, 1e-9);
  EXPECT_DOUBLE_EQ(a.max_s(), 0.1);
  EXPECT_NEAR(a.Quantile(0.5), 0.050, 0.050 * 0.025);
  EXPECT_NEAR(a.Quantile(0.9), 0.090, 0.090 * 0.025);
  EXPECT_NEAR(a.Quantile(0.99), 0.099, 0.099 * 0.025);
  EXPECT_LE(a.Quantile(1.0), a.max_s());
  EXPECT_EQ(DurationHistogram().Quantile(0.5), 0);
}

TEST(DurationHistogramTest, ZeroAndHugeValuesLandInTheEndBuckets) {
  DurationHistogram h;
  h.Add(0);
  h.Add(-1);
  h.Add(1e12);
  EXPECT_EQ(h.count(), 3);
  EXPECT_LE(h.Quantile(0.5), 2e-6);
  const DurationHistogram back = DurationHistogram::FromSparse(h.Sparse(), h.sum_s(), h.max_s());
  EXPECT_EQ(back.count(), 3);
  EXPECT_EQ(back.Quantile(0.9), h.Quantile(0.9));
}

}  // namespace
}  // namespace tpusim
