// The one-line reasons an op made a NaN/Inf from finite inputs (diagnosis.h).
#include <gtest/gtest.h>

#include <cmath>

#include "diagnosis.h"

namespace {

using ovf::Operand;
using ovf::Stats;

Operand operand(uint64_t numel, uint64_t zeros = 0, double abs_max = 1, uint64_t nan = 0,
                uint64_t pos_inf = 0, uint64_t neg_inf = 0, ovf_dtype dtype = OVF_DTYPE_FLOAT32) {
  Operand o;
  o.dtype = dtype;
  o.stats.has_stats = true;
  o.stats.numel = numel;
  o.stats.zero_count = zeros;
  o.stats.abs_max = abs_max;
  o.stats.nan_count = nan;
  o.stats.pos_inf_count = pos_inf;
  o.stats.neg_inf_count = neg_inf;
  return o;
}

TEST(Diagnosis, LogOfNegativesAndZeros) {
  EXPECT_EQ(ovf::diagnose("aten::log", operand(8, 0, 0, 3, 0, 2), {operand(8, 2)}),
            "aten::log of 3 negative values (nan) and 2 zeros (-inf)");
  EXPECT_EQ(ovf::diagnose("aten::log", operand(8, 0, 0, 0, 0, 1), {operand(8, 1)}),
            "aten::log of 1 zero (-inf)");
}

TEST(Diagnosis, DivisionByZeroNamesTheDivisor) {
  EXPECT_EQ(ovf::diagnose("aten::div", operand(4, 0, 0, 1, 2), {operand(4, 1), operand(4, 3)}),
            "aten::div: the divisor has 3 zeros: 0/0 in 1 element (nan), x/0 in 2 elements (inf)");
  EXPECT_EQ(
      ovf::diagnose("aten::addcdiv_", operand(4, 0, 0, 2), {Operand{}, operand(4), operand(4, 2)}),
      "aten::addcdiv_: the divisor has 2 zeros: 0/0 in 2 elements (nan)");
}

TEST(Diagnosis, OverflowAgainstTheOutputTypesRange) {
  EXPECT_EQ(ovf::diagnose("aten::exp", operand(4, 0, 0, 0, 4), {operand(4, 0, 91)}),
            "aten::exp overflow: input abs max 9.10e+01 > 88.7 (float32)");
  EXPECT_EQ(ovf::diagnose("aten::to", operand(4, 0, 0, 0, 1, 0, OVF_DTYPE_FLOAT16),
                          {operand(4, 0, 71000)}),
            "aten::to to float16: input abs max 7.10e+04 > 65504");
  EXPECT_EQ(
      ovf::diagnose("aten::mm", operand(4, 0, 0, 0, 1), {operand(4, 0, 2e20), operand(4, 0, 3e20)}),
      "aten::mm overflow: results exceed float32's max 3.40e+38 (largest input abs max 3.00e+20)");
}

TEST(Diagnosis, OtherwiseWhatWasMade) {
  EXPECT_EQ(ovf::diagnose("aten::acos", operand(4, 0, 0, 2), {operand(4)}),
            "aten::acos made 2 nan from finite inputs");
  EXPECT_EQ(ovf::diagnose("aten::log", operand(4), {operand(4)}), "");  // finite: nothing to say
}

TEST(Diagnosis, NllLossOfNoTargetIsZeroOverZero) {
  // cross_entropy(ignore_index=255) of a crop whose every pixel is 255
  EXPECT_EQ(
      ovf::diagnose("aten::nll_loss2d_forward", operand(1, 0, 0, 1), {operand(128), operand(64)}),
      "aten::nll_loss2d_forward: the targets' total weight is 0 (every target is "
      "ignore_index or weighs 0): 0/0 in the mean (nan)");
}

TEST(Diagnosis, GenericWhysAreToldApart) {
  EXPECT_TRUE(ovf::is_generic("aten::cross_entropy_loss made 1 nan from finite inputs"));
  EXPECT_FALSE(ovf::is_generic("aten::log of 1 zero (-inf)"));
  EXPECT_FALSE(ovf::is_generic(""));
}

}  // namespace
