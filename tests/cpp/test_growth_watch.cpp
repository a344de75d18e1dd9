// The early warning's trend rule (growth_watch.h), value by value.
#include "growth_watch.h"

#include <gtest/gtest.h>

namespace ovf {
namespace {

constexpr double kFloat32Max = 3.4028234663852886e38;

TEST(GrowthWatch, DivergingRunIsForecastAtTheThirdGrowingBatch) {
  // examples/diverge_lr.py's decoder.block.0: 5.88, 5.74e4, 1.12e12 in batches 0-2.
  GrowthWatch w;
  GrowthWatch::Forecast f;
  EXPECT_FALSE(w.observe(7, 0, 5.88, kFloat32Max, 4, &f));
  EXPECT_FALSE(w.observe(7, 1, 5.74e4, kFloat32Max, 4, &f));
  EXPECT_FALSE(w.observe(7, 2, 1.0e6, kFloat32Max, 4, &f));   // x17 a batch: 20 batches left
  ASSERT_TRUE(w.observe(7, 2, 1.12e12, kFloat32Max, 4, &f));  // a later call of batch 2
  EXPECT_DOUBLE_EQ(f.previous, 5.74e4);
  EXPECT_DOUBLE_EQ(f.now, 1.12e12);
  EXPECT_DOUBLE_EQ(f.growth, 1.12e12 / 5.74e4);
  EXPECT_EQ(f.batches_left, 4u);  // 1.12e12 * (1.95e7)^4 > 3.4e38 > ... ^3
}

TEST(GrowthWatch, HorizonBoundsTheForecast) {
  GrowthWatch w;
  GrowthWatch::Forecast f;
  w.observe(1, 0, 5.88, kFloat32Max, 3, &f);
  w.observe(1, 1, 5.74e4, kFloat32Max, 3, &f);
  EXPECT_FALSE(w.observe(1, 2, 1.12e12, kFloat32Max, 3, &f));  // 4 batches left > 3
  EXPECT_FALSE(w.observe(1, 2, 1.12e12, kFloat32Max, 0, &f));  // horizon 0: off
}

TEST(GrowthWatch, SlowOrBrokenGrowthIsNoTrend) {
  GrowthWatch w;
  GrowthWatch::Forecast f;
  // x1.9 then x100: the first step is short of kMinGrowth.
  w.observe(1, 0, 100, 65504, 8, &f);
  w.observe(1, 1, 190, 65504, 8, &f);
  EXPECT_FALSE(w.observe(1, 2, 19000, 65504, 8, &f));
  // Batch 4 skipped (the module did not run): the sequence starts again.
  w.observe(2, 2, 10, 65504, 8, &f);
  w.observe(2, 3, 100, 65504, 8, &f);
  EXPECT_FALSE(w.observe(2, 5, 10000, 65504, 8, &f));
  EXPECT_FALSE(w.observe(2, 6, 60000, 65504, 8, &f));  // 2 growing batches after the gap
  // Zero-initialised layers start at 0: no growth from nothing.
  w.observe(3, 0, 0, 65504, 8, &f);
  w.observe(3, 1, 1e-3, 65504, 8, &f);
  EXPECT_FALSE(w.observe(3, 2, 1e3, 65504, 8, &f));
}

TEST(GrowthWatch, Float16RunsOutOfRangeFirst) {
  GrowthWatch w;
  GrowthWatch::Forecast f;
  w.observe(4, 10, 250, 65504, 4, &f);
  w.observe(4, 11, 1000, 65504, 4, &f);
  ASSERT_TRUE(w.observe(4, 12, 4000, 65504, 4, &f));
  EXPECT_EQ(f.batches_left, 3u);  // x4 a batch: 16000, 64000, 256000
  // Already at the limit: nothing to forecast (a value past it is an Inf).
  EXPECT_FALSE(w.observe(4, 12, 65504, 65504, 4, &f));
}

}  // namespace
}  // namespace ovf
