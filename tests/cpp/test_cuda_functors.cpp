// The CUDA backend's per-element transform and combine step, run on the host
// against the CPU engine: random bit patterns of every dtype, folded in random
// pieces (single elements and whole vectors, as the kernel does) and combined
// in random order, must give the CPU engine's Stats to the last bit.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstring>
#include <limits>
#include <random>
#include <vector>

#include "cuda_test_data.h"
#include "partial_stats.h"
#include "stats_functors.cuh"
#include "thread_acc.cuh"
#include "vector.cuh"

namespace {

using ovf::cuda::combine;
using ovf::cuda::identity_partial;
using ovf::cuda::Partial;
using ovf_test::Fill;

// Folds n elements the way threads would: random runs, each either element by
// element (add) or, where it covers whole vectors, vector by vector
// (add_vector: the fast passes, and add_each where they give up); every run has
// its own accumulator, and the runs' partials are combined in shuffled order.
template <typename Codec>
Partial fold_in_pieces(const unsigned char* data, size_t n, std::mt19937& rng) {
  using Bits = typename Codec::Bits;
  constexpr size_t kCount = ovf::cuda::kPerVector<Bits>;
  std::vector<Partial> pieces;
  size_t i = 0;
  while (i < n) {
    const size_t len = std::min<size_t>(n - i, 1 + rng() % 200);
    ovf::cuda::ThreadAcc<Codec> acc;
    size_t j = i;
    if (rng() % 2) {
      for (; j + kCount <= i + len; j += kCount) {
        ovf::cuda::Vector v;
        std::memcpy(&v, data + j * sizeof(Bits), sizeof v);
        acc.add_vector(v);
      }
    }
    for (; j < i + len; ++j) {
      Bits b;
      std::memcpy(&b, data + j * sizeof(Bits), sizeof b);
      acc.add(b);
    }
    pieces.push_back(acc.to_partial());
    i += len;
  }
  std::shuffle(pieces.begin(), pieces.end(), rng);
  Partial total = identity_partial();
  for (const Partial& p : pieces) total = combine(total, p);
  return total;
}

Partial fold(ovf_dtype dtype, const unsigned char* data, size_t n, std::mt19937& rng) {
  EXPECT_NE(ovf::cuda::element_size(dtype), 0) << ovf::dtype_name(dtype);
  return ovf::cuda::visit_codec(dtype, identity_partial(), [&](auto codec) {
    return fold_in_pieces<decltype(codec)>(data, n, rng);
  });
}

ovf::Stats device_stats(ovf_dtype dtype, const std::vector<unsigned char>& buf, size_t n,
                        uint32_t seed, bool negated = false) {
  std::mt19937 rng(seed);
  return ovf::cuda::partial_to_stats(fold(dtype, buf.data(), n, rng), dtype, n, 1, negated);
}

class CudaFunctors : public ::testing::TestWithParam<ovf_dtype> {};

TEST_P(CudaFunctors, MatchCpuEngineOnRandomBits) {
  const ovf_dtype dtype = GetParam();
  for (Fill fill : {Fill::kRandomBits, Fill::kFinite}) {
    for (size_t n : {size_t{1}, size_t{3}, size_t{16}, size_t{333}, size_t{5000}, size_t{65537}}) {
      for (uint32_t seed : {1u, 2u, 3u}) {
        const uint32_t s = seed * 7919u + static_cast<uint32_t>(n) * 31u + dtype;
        const auto buf = ovf_test::make_elements(dtype, n, s, fill);
        SCOPED_TRACE(ovf_test::dtype_label(dtype) + " n=" + std::to_string(n) +
                     " seed=" + std::to_string(s) + (fill == Fill::kFinite ? " finite" : ""));
        ovf_test::expect_same_stats(device_stats(dtype, buf, n, s),
                                    ovf_test::cpu_stats_contiguous(buf.data(), dtype, n));
      }
    }
  }
}

TEST_P(CudaFunctors, EverySpecialAloneMatchesCpuEngine) {
  const ovf_dtype dtype = GetParam();
  const int size = ovf::cuda::element_size(dtype);
  for (uint64_t bits : ovf_test::special_bits(dtype)) {
    std::vector<unsigned char> buf(size);
    std::memcpy(buf.data(), &bits, size);
    SCOPED_TRACE(ovf_test::dtype_label(dtype) + " bits=" + std::to_string(bits));
    ovf_test::expect_same_stats(device_stats(dtype, buf, 1, 5),
                                ovf_test::cpu_stats_contiguous(buf.data(), dtype, 1));
  }
}

// torch's lazy negation (x.neg() on a conjugate/negative view) flips which
// infinity is which; both engines apply it at the end.
TEST_P(CudaFunctors, NegatedFlagSwapsInfinitiesLikeCpuEngine) {
  const ovf_dtype dtype = GetParam();
  const size_t n = 4096;
  const auto buf = ovf_test::make_elements(dtype, n, 77 + dtype, Fill::kRandomBits);
  const int64_t sizes[] = {static_cast<int64_t>(n)}, strides[] = {1};
  ovf::TensorView v;
  v.data = buf.data();
  v.dtype = dtype;
  v.ndim = 1;
  v.sizes = sizes;
  v.strides = strides;
  v.negated = true;
  ovf_test::expect_same_stats(device_stats(dtype, buf, n, 9, true), ovf_test::cpu_stats(v));
}

TEST_P(CudaFunctors, EmptyTensorMatchesCpuEngine) {
  const ovf_dtype dtype = GetParam();
  const auto s = ovf::cuda::partial_to_stats(identity_partial(), dtype, 0, 1, false);
  ovf_test::expect_same_stats(s, ovf_test::cpu_stats_contiguous(nullptr, dtype, 0));
}

INSTANTIATE_TEST_SUITE_P(EveryDtype, CudaFunctors, ::testing::ValuesIn(ovf_test::cuda_dtypes()),
                         [](const auto& info) { return ovf_test::dtype_label(info.param); });

TEST(CudaFunctorsPlanted, Float16CountsAndRange) {
  // 65504 (max), 2^-24 (smallest subnormal), 2^-14 (smallest normal), -0, -inf, NaN, -NaN.
  const std::vector<uint16_t> data = {0x7bff, 0x0001, 0x0400, 0x8000, 0xfc00, 0x7e00, 0xfe01};
  ovf::cuda::ThreadAcc<ovf::cuda::Float16Codec> acc;
  for (uint16_t b : data) acc.add(b);
  const auto s =
      ovf::cuda::partial_to_stats(acc.to_partial(), OVF_DTYPE_FLOAT16, data.size(), 1, false);
  EXPECT_EQ(s.abs_max, 65504.0);
  EXPECT_EQ(s.abs_min, 0.0);
  EXPECT_EQ(s.abs_min_nonzero, std::ldexp(1.0, -24));
  EXPECT_EQ(s.subnormal_count, 1u);
  EXPECT_EQ(s.neg_inf_count, 1u);
  EXPECT_EQ(s.pos_inf_count, 0u);
  EXPECT_EQ(s.nan_count, 2u);
  EXPECT_EQ(s.zero_count, 1u);
}

TEST(CudaFunctorsPlanted, Float8E4M3HasNoInfinity) {
  // 0x7f and 0xff are e4m3fn's NaNs; 0x7e = 448 is its largest finite value.
  const std::vector<uint8_t> data = {0x7f, 0xff, 0x7e, 0x01};
  ovf::cuda::ThreadAcc<ovf::cuda::Float8E4M3Codec> acc;
  for (uint8_t b : data) acc.add(b);
  const auto s =
      ovf::cuda::partial_to_stats(acc.to_partial(), OVF_DTYPE_FLOAT8_E4M3, data.size(), 1, false);
  EXPECT_EQ(s.nan_count, 2u);
  EXPECT_EQ(s.pos_inf_count + s.neg_inf_count, 0u);
  EXPECT_EQ(s.abs_max, 448.0);
  EXPECT_EQ(s.abs_min, std::ldexp(1.0, -9));
  EXPECT_EQ(s.subnormal_count, 1u);
}

TEST(CudaFunctorsPlanted, AllNonFiniteHasNoFiniteRange) {
  const std::vector<uint32_t> data = {0x7f800000u, 0x7fc00000u, 0xff800000u};
  ovf::cuda::ThreadAcc<ovf::cuda::Float32Codec> acc;
  for (uint32_t b : data) acc.add(b);
  const auto s =
      ovf::cuda::partial_to_stats(acc.to_partial(), OVF_DTYPE_FLOAT32, data.size(), 1, false);
  EXPECT_EQ(s.abs_min, std::numeric_limits<double>::infinity());
  EXPECT_EQ(s.abs_max, 0.0);
  EXPECT_EQ(s.abs_min_nonzero, std::numeric_limits<double>::infinity());
  EXPECT_EQ(s.finite_count(), 0u);
}

// The reference prints torch's abs(), which leaves the most negative integer
// negative: a tensor of only that value has abs max -128, as in the CPU engine.
TEST(CudaFunctorsPlanted, MostNegativeIntegerStaysNegative) {
  for (const std::vector<int8_t>& data :
       {std::vector<int8_t>{-128, -128}, std::vector<int8_t>{-128, 5, 0}}) {
    std::vector<unsigned char> buf(data.size());
    std::memcpy(buf.data(), data.data(), data.size());
    const auto s = device_stats(OVF_DTYPE_INT8, buf, buf.size(), 3);
    ovf_test::expect_same_stats(
        s, ovf_test::cpu_stats_contiguous(buf.data(), OVF_DTYPE_INT8, buf.size()));
    EXPECT_EQ(s.abs_min, -128.0);
  }
}

TEST(CudaFunctorsPlanted, BroadcastRepeatScalesCountsNotRange) {
  const std::vector<uint16_t> data = {0x0000, 0x7c00, 0x3c00};  // 0, +inf, 1.0
  ovf::cuda::ThreadAcc<ovf::cuda::Float16Codec> acc;
  for (uint16_t b : data) acc.add(b);
  const auto s = ovf::cuda::partial_to_stats(acc.to_partial(), OVF_DTYPE_FLOAT16, 30, 10, false);
  EXPECT_EQ(s.numel, 30u);
  EXPECT_EQ(s.zero_count, 10u);
  EXPECT_EQ(s.pos_inf_count, 10u);
  EXPECT_EQ(s.abs_max, 1.0);
}

// Associative, commutative, with an identity: blocks may finish in any order.
TEST(CudaCombine, OrderDoesNotMatter) {
  std::mt19937_64 rng(11);
  auto random_partial = [&] {
    Partial p;
    p.nan = rng() % 100;
    p.pos_inf = rng() % 100;
    p.neg_inf = rng() % 100;
    p.zero = rng() % 100;
    p.subnormal = rng() % 100;
    p.min_key = rng();
    p.max_key = rng();
    p.min_nonzero_key = rng();
    return p;
  };
  auto same = [](const Partial& a, const Partial& b) { return std::memcmp(&a, &b, sizeof a) == 0; };
  for (int i = 0; i < 1000; ++i) {
    const Partial a = random_partial(), b = random_partial(), c = random_partial();
    EXPECT_TRUE(same(combine(combine(a, b), c), combine(a, combine(b, c))));
    EXPECT_TRUE(same(combine(a, b), combine(b, a)));
    EXPECT_TRUE(same(combine(a, identity_partial()), a));
  }
}

// The host's 16-bit-lane max and min (the definition the device intrinsics
// __vmaxu2 / __vminu2 follow) work lane by lane, with no carry between lanes.
TEST(CudaLanes, MaxAndMinAreLaneWise) {
  std::mt19937 rng(5);
  for (int i = 0; i < 10000; ++i) {
    const uint32_t a = rng(), b = rng();
    const uint32_t want_max = std::max(a >> 16, b >> 16) << 16 | std::max(a & 0xffff, b & 0xffff);
    const uint32_t want_min = std::min(a >> 16, b >> 16) << 16 | std::min(a & 0xffff, b & 0xffff);
    EXPECT_EQ(ovf::cuda::max_u16x2(a, b), want_max);
    EXPECT_EQ(ovf::cuda::min_u16x2(a, b), want_min);
  }
}

// Each dtype's element size as the plan sees it is the CPU engine's, where the
// CPU engine knows the dtype; complex is left to the portable backend.
TEST(CudaFunctorsDtypes, SizesAgreeWithCpuEngine) {
  for (ovf_dtype dtype : ovf_test::cuda_dtypes()) {
    const int cpu = ovf::dtype_size(dtype);
    if (cpu != 0) EXPECT_EQ(ovf::cuda::element_size(dtype), cpu) << ovf::dtype_name(dtype);
    EXPECT_NE(ovf::cuda::element_size(dtype), 0) << ovf::dtype_name(dtype);
  }
  EXPECT_EQ(ovf::cuda::element_size(OVF_DTYPE_COMPLEX64), 0);
  EXPECT_EQ(ovf::cuda::element_size(OVF_DTYPE_COMPLEX128), 0);
  EXPECT_EQ(ovf::cuda::element_size(OVF_DTYPE_UNKNOWN), 0);
}

}  // namespace
