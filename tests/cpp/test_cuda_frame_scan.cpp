// The fused kernel's work split, run on the host: a frame of many tensors
// (every dtype, unaligned starts, empty tensors between others, strided,
// broadcast and flipped views, tensors of many blocks) is planned as for the
// GPU, then every block's every thread runs thread_scan() as on the device and
// the partials are combined as the two kernels do. Each tensor must come out as
// the CPU engine says. Only the launch and CUB's block reduction (another
// order of the same combine step) are left to the GPU test.
#include <gtest/gtest.h>

#include <cstring>
#include <memory>
#include <string>
#include <type_traits>
#include <vector>

#include "cuda_test_data.h"
#include "frame_plan.h"
#include "frame_scan.cuh"

namespace {

using ovf::cuda::FramePlan;
using ovf::cuda::Partial;
using ovf_test::Fill;

// What scan_blocks and combine_blocks compute, block by block, thread by thread
// (P: Partial, or CastPartial for a frame that counts cast losses).
template <typename P>
std::vector<P> emulate_launch(const FramePlan& plan) {
  const auto& table = plan.table();
  std::vector<P> blocks(plan.total_blocks(), ovf::cuda::identity_of<P>());
  for (uint32_t b = 0; b < plan.total_blocks(); ++b) {
    const auto& t = table[ovf::cuda::find_tensor(table.data(), plan.tensors(), b)];
    EXPECT_GE(b, t.first_block);
    EXPECT_LT(b, t.first_block + t.blocks);
    for (uint32_t tid = 0; tid < ovf::cuda::kThreads; ++tid) {
      blocks[b] = ovf::cuda::combine(
          blocks[b], ovf::cuda::thread_scan<P>(t, b - t.first_block, tid, ovf::cuda::kThreads));
    }
  }
  std::vector<P> results(plan.tensors(), ovf::cuda::identity_of<P>());
  for (uint32_t i = 0; i < plan.tensors(); ++i) {
    for (uint32_t b = 0; b < table[i].blocks; ++b) {
      results[i] = ovf::cuda::combine(results[i], blocks[table[i].first_block + b]);
    }
  }
  return results;
}

// A view kept alive with its buffer, sizes and strides.
struct OwnedView {
  std::vector<unsigned char> buffer;
  std::vector<int64_t> sizes, strides;
  size_t offset = 0;  // elements from the buffer's start to the view's data pointer
  ovf_dtype dtype = OVF_DTYPE_UNKNOWN;
  bool negated = false;
  std::string what;

  ovf::TensorView view() const { return make_view(offset, strides); }

  // The same elements with every stride positive, for the CPU engine, which
  // takes a view's data pointer as its lowest element (torch never makes
  // negative strides; the CUDA plan flips them anyway).
  ovf::TensorView cpu_view() {
    size_t lowest = offset;
    positive_strides = strides;
    for (size_t d = 0; d < sizes.size(); ++d) {
      if (strides[d] < 0) {
        lowest -= static_cast<size_t>((sizes[d] - 1) * -strides[d]);
        positive_strides[d] = -strides[d];
      }
    }
    return make_view(lowest, positive_strides);
  }

 private:
  std::vector<int64_t> positive_strides;

  ovf::TensorView make_view(size_t at, const std::vector<int64_t>& with_strides) const {
    ovf::TensorView v;
    v.data = buffer.data() + at * ovf::cuda::element_size(dtype);
    v.dtype = dtype;
    v.ndim = static_cast<int>(sizes.size());
    v.sizes = sizes.data();
    v.strides = with_strides.data();
    v.negated = negated;
    return v;
  }
};

// The frame: for every dtype, contiguous runs at unaligned starts, views of a
// 5x6x7 block, a large strided view and a large contiguous tensor.
std::vector<std::unique_ptr<OwnedView>> make_frame(Fill fill) {
  std::vector<std::unique_ptr<OwnedView>> frame;
  uint32_t seed = 1;
  auto add = [&](ovf_dtype dtype, size_t buffer_elements, size_t offset, std::vector<int64_t> sizes,
                 std::vector<int64_t> strides, std::string what) {
    auto v = std::make_unique<OwnedView>();
    v->buffer = ovf_test::make_elements(dtype, buffer_elements, seed++, fill);
    v->offset = offset;
    v->sizes = std::move(sizes);
    v->strides = std::move(strides);
    v->dtype = dtype;
    v->negated = seed % 5 == 0;
    v->what = ovf_test::dtype_label(dtype) + " " + what;
    frame.push_back(std::move(v));
  };
  for (ovf_dtype dtype : ovf_test::cuda_dtypes()) {
    for (int64_t n : {0, 1, 5, 17, 1000, 70001}) {
      for (size_t offset : {0, 1, 3}) {
        add(dtype, n + offset, offset, {n}, {1},
            "n=" + std::to_string(n) + " offset=" + std::to_string(offset));
      }
    }
    const std::pair<std::vector<int64_t>, std::vector<int64_t>> views[] = {
        {{7, 6, 5}, {1, 7, 42}},    // a permutation: one contiguous run
        {{5, 3, 7}, {42, 14, 1}},   // every other row
        {{5, 6, 4}, {42, 7, 2}},    // step-2 inner dimension
        {{3, 5, 7}, {0, 42, 1}},    // expanded leading dimension
        {{5, 1, 7}, {42, 999, 1}},  // size-1 dimension
        {{}, {}},                   // zero-dimensional
        {{5, 0, 7}, {42, 7, 1}},    // empty
    };
    for (const auto& [sizes, strides] : views) add(dtype, 5 * 6 * 7, 0, sizes, strides, "view");
    add(dtype, 5 * 6 * 7, 34, {5, 7}, {-7, -1}, "flipped");
    add(dtype, 600 * 1000, 1, {600, 499}, {1000, 2}, "large strided");
    add(dtype, 300002, 2, {300000}, {1}, "large contiguous");
  }
  return frame;
}

template <typename P = Partial>
void check_frame(Fill fill) {
  constexpr bool kCasts = std::is_same_v<P, ovf::cuda::CastPartial>;
  const auto frame = make_frame(fill);
  FramePlan plan;
  plan.clear(kCasts);
  for (const auto& v : frame) ASSERT_GE(plan.add(v->view()), 0) << v->what;
  const auto results = emulate_launch<P>(plan);
  for (size_t i = 0; i < frame.size(); ++i) {
    SCOPED_TRACE(frame[i]->what);
    ovf_test::expect_same_stats(plan.finish(static_cast<int>(i), results[i]),
                                ovf_test::cpu_stats(frame[i]->cpu_view(), kCasts));
  }
}

TEST(CudaFrameScan, RandomBitsMatchCpuEngine) { check_frame(Fill::kRandomBits); }
TEST(CudaFrameScan, FiniteBitsMatchCpuEngine) { check_frame(Fill::kFinite); }
// All zeros: zero_count is the number of reads, so every element must be read
// exactly once (broadcast ones once per repeat).
TEST(CudaFrameScan, EveryElementReadOnce) { check_frame(Fill::kZeros); }
// The cast losses, counted in the same pass: every floating dtype's twelve
// counts as the CPU engine's (which a direct cast-then-count test checks,
// tests/python/test_cast_counts.py); no cast counts for the other dtypes.
TEST(CudaFrameScan, CastCountsMatchCpuEngine) {
  check_frame<ovf::cuda::CastPartial>(Fill::kRandomBits);
  check_frame<ovf::cuda::CastPartial>(Fill::kFinite);
}

TEST(CudaFramePlan, BlocksSplitTheWorkWithoutGapsOrEmptyBlocks) {
  const auto frame = make_frame(Fill::kZeros);
  FramePlan plan;
  for (const auto& v : frame) plan.add(v->view());
  uint32_t next_block = 0;
  for (const auto& t : plan.table()) {
    EXPECT_EQ(t.first_block, next_block);
    next_block += t.blocks;
    EXPECT_LE(t.blocks, FramePlan::kMaxBlocksPerTensor);
    if (t.numel == 0) {
      EXPECT_EQ(t.blocks, 0u);
      continue;
    }
    const uint64_t units = t.contiguous ? t.vectors : t.numel;
    EXPECT_GE(t.blocks * t.per_block, units);
    if (units > 0) EXPECT_LT((t.blocks - 1) * t.per_block, units);
    if (t.contiguous) {
      const int size = ovf::cuda::element_size(static_cast<ovf_dtype>(t.dtype));
      const uint64_t count = ovf::cuda::kVectorBytes / size;
      EXPECT_EQ(t.head + t.vectors * count + t.tail, t.numel);
      EXPECT_LT(t.tail, count);
      if (t.vectors > 0) {
        const auto first_vector = reinterpret_cast<uintptr_t>(t.data) + t.head * size;
        EXPECT_EQ(first_vector % ovf::cuda::kVectorBytes, 0u);
      }
    }
  }
  EXPECT_EQ(plan.total_blocks(), next_block);
}

TEST(CudaFramePlan, RefusesWhatOnlyAnotherBackendReads) {
  alignas(16) unsigned char buffer[64] = {};
  const int64_t four[] = {4}, one[] = {1};
  ovf::TensorView v;
  v.ndim = 1;
  v.sizes = four;
  v.strides = one;
  FramePlan plan;

  v.data = buffer;
  v.dtype = OVF_DTYPE_COMPLEX64;
  EXPECT_EQ(plan.add(v), -1) << "complex";
  v.dtype = OVF_DTYPE_FLOAT32;
  v.data = buffer + 2;
  EXPECT_EQ(plan.add(v), -1) << "float32 at an address that is not a multiple of 4";
  v.data = nullptr;
  EXPECT_EQ(plan.add(v), -1) << "no data";
  std::vector<int64_t> sizes(9, 2), strides(9);
  int64_t s = 1;
  for (int d = 8; d >= 0; --d, s *= 6) strides[d] = s;
  v.data = buffer;
  v.ndim = 9;
  v.sizes = sizes.data();
  v.strides = strides.data();
  v.dtype = OVF_DTYPE_UINT8;
  EXPECT_EQ(plan.add(v), -1) << "nine dimensions that do not merge";
  EXPECT_EQ(plan.tensors(), 0u);

  const int64_t zero[] = {0};
  v.ndim = 1;
  v.sizes = zero;
  v.data = nullptr;
  EXPECT_EQ(plan.add(v), 0) << "an empty tensor needs no data";
}

}  // namespace
