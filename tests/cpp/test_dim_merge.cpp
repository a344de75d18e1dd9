// Dimension merging (dim_merge.h), for the CPU scan and the CUDA launch table:
// the merged layout must address the same multiset of elements as the view (each
// position counted `repeat` times), in as few dimensions as the memory allows.
#include <gtest/gtest.h>

#include <algorithm>
#include <vector>

#include "dim_merge.h"

namespace {

using ovf::merge_dims;
using ovf::MergedDims;

std::vector<int64_t> offsets_of(const std::vector<int64_t>& sizes,
                                const std::vector<int64_t>& strides, int64_t base = 0) {
  std::vector<int64_t> offsets{base};
  for (size_t d = 0; d < sizes.size(); ++d) {
    std::vector<int64_t> next;
    for (int64_t o : offsets)
      for (int64_t i = 0; i < sizes[d]; ++i) next.push_back(o + i * strides[d]);
    offsets.swap(next);
  }
  std::sort(offsets.begin(), offsets.end());
  return offsets;
}

std::vector<int64_t> merged_offsets(const MergedDims& m) {
  if (m.numel == 0) return {};
  std::vector<int64_t> sizes(m.sizes, m.sizes + m.ndim), strides(m.strides, m.strides + m.ndim);
  std::vector<int64_t> once = offsets_of(sizes, strides, m.offset), all;
  for (int64_t o : once) all.insert(all.end(), m.repeat, o);
  std::sort(all.begin(), all.end());
  return all;
}

struct Case {
  const char* what;
  std::vector<int64_t> sizes, strides;
  int want_ndim;
};

TEST(DimMerge, SameElementsInFewestDimensions) {
  const Case cases[] = {
      {"contiguous", {5, 6, 7}, {42, 7, 1}, 1},
      {"transpose of a contiguous tensor", {7, 6, 5}, {1, 7, 42}, 1},
      {"permuted", {6, 5, 7}, {7, 42, 1}, 1},
      {"every other row", {5, 3, 7}, {42, 14, 1}, 2},
      {"step-2 inner dimension", {5, 6, 4}, {42, 7, 2}, 2},
      {"column slice", {5, 6, 3}, {42, 7, 1}, 2},
      {"broadcast leading dimension", {3, 5, 7}, {0, 42, 1}, 2},
      {"broadcast inner dimension", {5, 4}, {1, 0}, 1},
      {"all broadcast (expand of one element)", {4, 3}, {0, 0}, 1},
      {"size-1 dimension with a meaningless stride", {5, 1, 7}, {42, 999, 1}, 2},
      {"zero-dimensional", {}, {}, 1},
      {"flipped (negative stride)", {5, 7}, {-7, 1}, 1},
      {"flipped inner", {5, 7}, {7, -1}, 1},
      {"overlapping (as_strided)", {3, 3}, {1, 1}, 2},
      {"permuted slice of a 4-d tensor", {2, 3, 4, 5}, {1, 120, 30, 2}, 2},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.what);
    MergedDims m;
    ASSERT_TRUE(merge_dims(static_cast<int>(c.sizes.size()), c.sizes.data(), c.strides.data(), &m));
    EXPECT_EQ(m.ndim, c.want_ndim);
    EXPECT_EQ(merged_offsets(m), offsets_of(c.sizes, c.strides));
    for (int d = 0; d < m.ndim; ++d) EXPECT_GT(m.strides[d], 0);
    for (int d = 1; d < m.ndim; ++d) EXPECT_GE(m.strides[d - 1], m.strides[d]);
  }
}

TEST(DimMerge, ContiguousInAnyPermutationIsOneRunOfStrideOne) {
  const int64_t sizes[] = {4, 3, 2}, strides[] = {1, 8, 4};  // a permuted 2x3x4
  MergedDims m;
  ASSERT_TRUE(merge_dims(3, sizes, strides, &m));
  ASSERT_EQ(m.ndim, 1);
  EXPECT_EQ(m.sizes[0], 24);
  EXPECT_EQ(m.strides[0], 1);
  EXPECT_EQ(m.repeat, 1u);
  EXPECT_EQ(m.offset, 0);
}

TEST(DimMerge, BroadcastIsARepeatNotARead) {
  const int64_t sizes[] = {1000, 8}, strides[] = {0, 1};  // x.expand(1000, 8)
  MergedDims m;
  ASSERT_TRUE(merge_dims(2, sizes, strides, &m));
  EXPECT_EQ(m.numel, 8u);
  EXPECT_EQ(m.repeat, 1000u);
}

TEST(DimMerge, NegativeStrideStartsAtTheLowestElement) {
  const int64_t sizes[] = {4}, strides[] = {-3};
  MergedDims m;
  ASSERT_TRUE(merge_dims(1, sizes, strides, &m));
  EXPECT_EQ(m.offset, -9);
  EXPECT_EQ(m.strides[0], 3);
}

TEST(DimMerge, EmptyViewHasNoDimensions) {
  const int64_t sizes[] = {5, 0, 7}, strides[] = {42, 7, 1};
  MergedDims m;
  ASSERT_TRUE(merge_dims(3, sizes, strides, &m));
  EXPECT_EQ(m.ndim, 0);
  EXPECT_EQ(m.numel, 0u);
}

TEST(DimMerge, WhatDoesNotMergeStaysAndTooHighARankIsRefused) {
  // Nine dimensions of size 2, every one a step-3 slice of the next: nothing merges.
  std::vector<int64_t> sizes(9, 2), strides(9);
  int64_t s = 1;
  for (int d = 8; d >= 0; --d, s *= 6) strides[d] = s;
  MergedDims m;
  ASSERT_TRUE(merge_dims(9, sizes.data(), strides.data(), &m));
  EXPECT_EQ(m.ndim, 9);
  // The same rank, contiguous: one dimension.
  s = 1;
  for (int d = 8; d >= 0; --d, s *= 2) strides[d] = s;
  ASSERT_TRUE(merge_dims(9, sizes.data(), strides.data(), &m));
  EXPECT_EQ(m.ndim, 1);
  // Above torch's rank limit: refused.
  std::vector<int64_t> many(ovf::kMaxMergedDims + 1, 1);
  EXPECT_FALSE(merge_dims(static_cast<int>(many.size()), many.data(), many.data(), &m));
}

TEST(DimMerge, NegativeSizeIsRefused) {
  const int64_t sizes[] = {-1}, strides[] = {1};
  MergedDims m;
  EXPECT_FALSE(merge_dims(1, sizes, strides, &m));
}

}  // namespace
