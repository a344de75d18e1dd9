// The CPU stats engine against a plain float64 reference, on random bit
// patterns (which cover NaN payloads, infinities, subnormals and both zeros)
// and on planted values, for contiguous and strided layouts.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <limits>
#include <random>
#include <vector>

#include "stats_cpu.h"
#include "stats_scan.h"

namespace {

using ovf::Stats;
using ovf::TensorView;

constexpr double kInf = std::numeric_limits<double>::infinity();

double min_normal(ovf_dtype dtype) {
  switch (dtype) {
    case OVF_DTYPE_FLOAT64: return std::numeric_limits<double>::min();
    case OVF_DTYPE_FLOAT32: return std::numeric_limits<float>::min();
    case OVF_DTYPE_FLOAT16: return std::ldexp(1.0, -14);
    case OVF_DTYPE_BFLOAT16: return std::ldexp(1.0, -126);
    default: return 1;
  }
}

// A one-dimensional contiguous view of n elements (n must outlive it).
TensorView flat_view(const void* data, ovf_dtype dtype, const int64_t& n) {
  static const int64_t kUnitStride = 1;
  TensorView v;
  v.data = data;
  v.dtype = dtype;
  v.ndim = 1;
  v.sizes = &n;
  v.strides = &kUnitStride;
  return v;
}

// Element-by-element reference over an index list, everything in double.
Stats reference_stats(const char* base, ovf_dtype dtype, const std::vector<int64_t>& offsets) {
  Stats s;
  s.has_stats = true;
  s.numel = offsets.size();
  s.abs_min = kInf;
  s.abs_max = 0;
  s.abs_min_nonzero = kInf;
  const int size = ovf::dtype_size(dtype);
  for (int64_t off : offsets) {
    const double x = ovf::element_to_double(base + off * size, dtype);
    if (std::isnan(x)) {
      ++s.nan_count;
    } else if (std::isinf(x)) {
      ++(x > 0 ? s.pos_inf_count : s.neg_inf_count);
    } else {
      const double a = std::fabs(x);
      s.abs_min = std::min(s.abs_min, a);
      s.abs_max = std::max(s.abs_max, a);
      if (a == 0) {
        ++s.zero_count;
      } else {
        s.abs_min_nonzero = std::min(s.abs_min_nonzero, a);
        if (a < min_normal(dtype)) ++s.subnormal_count;
      }
    }
  }
  return s;
}

void expect_same(const Stats& got, const Stats& want) {
  EXPECT_EQ(got.has_stats, want.has_stats);
  EXPECT_EQ(got.numel, want.numel);
  EXPECT_EQ(got.nan_count, want.nan_count);
  EXPECT_EQ(got.pos_inf_count, want.pos_inf_count);
  EXPECT_EQ(got.neg_inf_count, want.neg_inf_count);
  EXPECT_EQ(got.zero_count, want.zero_count);
  EXPECT_EQ(got.subnormal_count, want.subnormal_count);
  EXPECT_EQ(got.abs_min, want.abs_min);
  EXPECT_EQ(got.abs_max, want.abs_max);
  EXPECT_EQ(got.abs_min_nonzero, want.abs_min_nonzero);
}

// Random bytes, then planted specials at random places.
std::vector<char> random_buffer(ovf_dtype dtype, size_t n, uint32_t seed) {
  const int size = ovf::dtype_size(dtype);
  std::vector<char> buf(n * size);
  std::mt19937 rng(seed);
  for (auto& c : buf) c = static_cast<char>(rng());
  if (dtype == OVF_DTYPE_FLOAT32) {
    // Random bits are mostly huge or tiny; mix in ordinary values too.
    std::normal_distribution<float> normal(0.f, 3.f);
    for (size_t i = 0; i < n; i += 2) {
      const float f = normal(rng);
      std::memcpy(&buf[i * 4], &f, 4);
    }
    const float specials[] = {0.f,
                              -0.f,
                              std::numeric_limits<float>::infinity(),
                              -std::numeric_limits<float>::infinity(),
                              std::numeric_limits<float>::quiet_NaN(),
                              std::numeric_limits<float>::denorm_min(),
                              1e-40f,
                              65504.f};
    for (float f : specials) std::memcpy(&buf[(rng() % n) * 4], &f, 4);
  }
  return buf;
}

class StatsByDtype : public ::testing::TestWithParam<ovf_dtype> {};

TEST_P(StatsByDtype, ContiguousMatchesReferenceAtOddSizes) {
  const ovf_dtype dtype = GetParam();
  for (size_t n : {size_t{1}, size_t{7}, size_t{64}, size_t{1000}, size_t{40000}, size_t{70001}}) {
    const auto buf = random_buffer(dtype, n, static_cast<uint32_t>(n * 31 + dtype));
    std::vector<int64_t> offsets(n);
    for (size_t i = 0; i < n; ++i) offsets[i] = static_cast<int64_t>(i);
    SCOPED_TRACE(std::string(ovf::dtype_name(dtype)) + " n=" + std::to_string(n));
    expect_same(ovf::compute_stats_contiguous(buf.data(), dtype, n),
                reference_stats(buf.data(), dtype, offsets));
  }
}

TEST_P(StatsByDtype, StridedViewsMatchReference) {
  const ovf_dtype dtype = GetParam();
  // A 5x6x7 buffer viewed as a transpose, a step-2 slice and a broadcast.
  const auto buf = random_buffer(dtype, 5 * 6 * 7, 99 + dtype);
  struct Case {
    std::vector<int64_t> sizes, strides;
  };
  const Case cases[] = {
      {{7, 6, 5}, {1, 7, 42}},    // full permutation of a contiguous tensor
      {{5, 3, 7}, {42, 14, 1}},   // every other row
      {{5, 6, 4}, {42, 7, 2}},    // step-2 inner dimension
      {{3, 5, 7}, {0, 42, 1}},    // expanded (stride 0) leading dimension
      {{5, 1, 7}, {42, 999, 1}},  // size-1 dimension with a meaningless stride
      {{}, {}},                   // zero-dimensional
      {{5, 0, 7}, {42, 7, 1}},    // empty
  };
  for (const Case& c : cases) {
    std::vector<int64_t> offsets{0};
    for (size_t d = 0; d < c.sizes.size(); ++d) {
      std::vector<int64_t> next;
      for (int64_t base : offsets)
        for (int64_t i = 0; i < c.sizes[d]; ++i) next.push_back(base + i * c.strides[d]);
      offsets.swap(next);
    }
    TensorView v;
    v.data = buf.data();
    v.dtype = dtype;
    v.ndim = static_cast<int>(c.sizes.size());
    v.sizes = c.sizes.data();
    v.strides = c.strides.data();
    SCOPED_TRACE(std::string(ovf::dtype_name(dtype)) + " ndim=" + std::to_string(v.ndim));
    expect_same(ovf::compute_stats_cpu(v), reference_stats(buf.data(), dtype, offsets));
  }
}

INSTANTIATE_TEST_SUITE_P(FloatTypes, StatsByDtype,
                         ::testing::Values(OVF_DTYPE_FLOAT64, OVF_DTYPE_FLOAT32, OVF_DTYPE_FLOAT16,
                                           OVF_DTYPE_BFLOAT16),
                         [](const auto& info) { return std::string(ovf::dtype_name(info.param)); });

TEST(Stats, PlantedFloat32ValuesGiveExactCounts) {
  const float inf = std::numeric_limits<float>::infinity();
  const std::vector<float> data = {1.5f,          -2.5f,          0.f,    -0.f,   inf, -inf, -inf,
                                   std::nanf(""), -std::nanf(""), 1e-45f, -3e-39f};
  const Stats s = ovf::compute_stats_contiguous(data.data(), OVF_DTYPE_FLOAT32, data.size());
  EXPECT_EQ(s.numel, 11u);
  EXPECT_EQ(s.nan_count, 2u);
  EXPECT_EQ(s.pos_inf_count, 1u);
  EXPECT_EQ(s.neg_inf_count, 2u);
  EXPECT_EQ(s.zero_count, 2u);
  EXPECT_EQ(s.subnormal_count, 2u);
  EXPECT_EQ(s.abs_min, 0.0);
  EXPECT_EQ(s.abs_max, 2.5);
  EXPECT_EQ(s.abs_min_nonzero, static_cast<double>(1e-45f));
  EXPECT_TRUE(s.nonfinite());
}

TEST(Stats, AllNonFiniteHasNoFiniteRange) {
  const float inf = std::numeric_limits<float>::infinity();
  const std::vector<float> data = {inf, std::nanf("")};
  const Stats s = ovf::compute_stats_contiguous(data.data(), OVF_DTYPE_FLOAT32, data.size());
  EXPECT_EQ(s.abs_min, kInf);
  EXPECT_EQ(s.abs_max, 0.0);
  EXPECT_EQ(s.finite_count(), 0u);
}

TEST(Stats, Float16ExtremesDecodeExactly) {
  // 0x7bff = 65504 (max), 0x0001 = 2^-24 (smallest subnormal), 0x0400 = 2^-14 (min normal).
  const std::vector<uint16_t> data = {0x7bff, 0x0001, 0x0400, 0x8000, 0xfc00, 0x7e00};
  const Stats s = ovf::compute_stats_contiguous(data.data(), OVF_DTYPE_FLOAT16, data.size());
  EXPECT_EQ(s.abs_max, 65504.0);
  EXPECT_EQ(s.abs_min, 0.0);
  EXPECT_EQ(s.abs_min_nonzero, std::ldexp(1.0, -24));
  EXPECT_EQ(s.subnormal_count, 1u);
  EXPECT_EQ(s.neg_inf_count, 1u);
  EXPECT_EQ(s.nan_count, 1u);
  EXPECT_EQ(s.zero_count, 1u);
}

TEST(Stats, NegatedViewSwapsInfinitySigns) {
  const float inf = std::numeric_limits<float>::infinity();
  const std::vector<float> data = {inf, inf, -inf, 1.f};
  const int64_t size = 4;
  TensorView v = flat_view(data.data(), OVF_DTYPE_FLOAT32, size);
  v.negated = true;
  const Stats s = ovf::compute_stats_cpu(v);
  EXPECT_EQ(s.pos_inf_count, 1u);
  EXPECT_EQ(s.neg_inf_count, 2u);
}

TEST(Stats, IntegersReportMagnitudes) {
  const std::vector<int64_t> data = {-7, 0, 3};
  const Stats s = ovf::compute_stats_contiguous(data.data(), OVF_DTYPE_INT64, data.size());
  EXPECT_TRUE(s.has_stats);
  EXPECT_EQ(s.abs_min, 0.0);
  EXPECT_EQ(s.abs_max, 7.0);
  EXPECT_EQ(s.abs_min_nonzero, 3.0);
  EXPECT_EQ(s.zero_count, 1u);
  EXPECT_FALSE(s.nonfinite());
}

// torch 2.x's uint16 / uint32 / uint64: magnitudes up to the largest value,
// which must not wrap to a negative number.
TEST(Stats, UnsignedIntegersOfEveryWidth) {
  const std::vector<uint16_t> u16 = {0, 7, 65535};
  Stats s = ovf::compute_stats_contiguous(u16.data(), OVF_DTYPE_UINT16, u16.size());
  ASSERT_TRUE(s.has_stats);
  EXPECT_EQ(s.abs_min, 0.0);
  EXPECT_EQ(s.abs_max, 65535.0);
  EXPECT_EQ(s.abs_min_nonzero, 7.0);
  EXPECT_EQ(s.zero_count, 1u);
  const std::vector<uint32_t> u32 = {5, 4294967295u};
  s = ovf::compute_stats_contiguous(u32.data(), OVF_DTYPE_UINT32, u32.size());
  ASSERT_TRUE(s.has_stats);
  EXPECT_EQ(s.abs_min, 5.0);
  EXPECT_EQ(s.abs_max, 4294967295.0);
  const std::vector<uint64_t> u64 = {3, std::numeric_limits<uint64_t>::max()};
  s = ovf::compute_stats_contiguous(u64.data(), OVF_DTYPE_UINT64, u64.size());
  ASSERT_TRUE(s.has_stats);
  EXPECT_EQ(s.abs_min, 3.0);
  EXPECT_EQ(s.abs_max, std::ldexp(1.0, 64));
  EXPECT_FALSE(s.nonfinite());
}

// torch's abs() wraps the most negative integer around to itself, and the
// reference prints abs().min() and abs().max(): ovf reports what it prints.
TEST(Stats, TheMostNegativeIntegerIsItsOwnAbsAsInTorch) {
  const std::vector<int8_t> data = {-7, -128, 3};
  Stats s = ovf::compute_stats_contiguous(data.data(), OVF_DTYPE_INT8, data.size());
  EXPECT_EQ(s.abs_min, -128.0);
  EXPECT_EQ(s.abs_max, 7.0);
  EXPECT_EQ(s.subnormal_count, 0u);
  const std::vector<int64_t> only = {std::numeric_limits<int64_t>::min()};
  s = ovf::compute_stats_contiguous(only.data(), OVF_DTYPE_INT64, only.size());
  EXPECT_EQ(s.abs_min, -std::ldexp(1.0, 63));
  EXPECT_EQ(s.abs_max, -std::ldexp(1.0, 63));
}

TEST(Stats, BoolCountsAsZeroAndOne) {
  const std::vector<uint8_t> data = {1, 0, 1};
  const Stats s = ovf::compute_stats_contiguous(data.data(), OVF_DTYPE_BOOL, data.size());
  EXPECT_EQ(s.abs_min, 0.0);
  EXPECT_EQ(s.abs_max, 1.0);
  EXPECT_EQ(s.zero_count, 1u);
}

// A uint8 tensor viewed as bool may hold any byte: every one but 0 is true.
TEST(Stats, BoolBytesOtherThanOneAreTrue) {
  const std::vector<uint8_t> data = {2, 0, 255, 0x80};
  const Stats s = ovf::compute_stats_contiguous(data.data(), OVF_DTYPE_BOOL, data.size());
  EXPECT_EQ(s.abs_min, 0.0);
  EXPECT_EQ(s.abs_max, 1.0);
  EXPECT_EQ(s.abs_min_nonzero, 1.0);
  EXPECT_EQ(s.zero_count, 1u);
}

TEST(Stats, ComplexUsesMagnitude) {
  const float inf = std::numeric_limits<float>::infinity();
  const std::vector<float> data = {3.f, 4.f, 0.f,           0.f,
                                   inf, 1.f, std::nanf(""), 0.f};  // 5, 0, inf, nan
  const Stats s = ovf::compute_stats_contiguous(data.data(), OVF_DTYPE_COMPLEX64, 4);
  EXPECT_EQ(s.abs_max, 5.0);
  EXPECT_EQ(s.abs_min, 0.0);
  EXPECT_EQ(s.pos_inf_count, 1u);
  EXPECT_EQ(s.nan_count, 1u);
}

TEST(Stats, Float8E4M3HasNoInfinityAndMax448) {
  const std::vector<uint8_t> data = {0x7e, 0xfe, 0x7f, 0x01, 0x00};  // 448, -448, NaN, 2^-9, 0
  const Stats s = ovf::compute_stats_contiguous(data.data(), OVF_DTYPE_FLOAT8_E4M3, data.size());
  EXPECT_EQ(s.abs_max, 448.0);
  EXPECT_EQ(s.nan_count, 1u);
  EXPECT_EQ(s.pos_inf_count + s.neg_inf_count, 0u);
  EXPECT_EQ(s.abs_min_nonzero, std::ldexp(1.0, -9));
  EXPECT_EQ(s.subnormal_count, 1u);
}

TEST(Stats, UnknownDtypeHasNoStats) {
  const char data[4] = {};
  EXPECT_FALSE(ovf::compute_stats_contiguous(data, OVF_DTYPE_UNKNOWN, 4).has_stats);
}

}  // namespace

namespace {

TEST(Headroom, DtypeLimits) {
  EXPECT_EQ(ovf::dtype_max(OVF_DTYPE_FLOAT16), 65504.0);
  EXPECT_EQ(ovf::dtype_max(OVF_DTYPE_BFLOAT16), 3.3895313892515355e38);
  EXPECT_EQ(ovf::dtype_max(OVF_DTYPE_FLOAT8_E4M3), 448.0);
  EXPECT_EQ(ovf::dtype_max(OVF_DTYPE_FLOAT8_E5M2), 57344.0);
  EXPECT_EQ(ovf::dtype_min_normal(OVF_DTYPE_FLOAT16), std::ldexp(1.0, -14));
  EXPECT_EQ(ovf::dtype_min_normal(OVF_DTYPE_FLOAT8_E4M3), std::ldexp(1.0, -6));
  EXPECT_EQ(ovf::dtype_max(OVF_DTYPE_INT32), 0.0);
}

TEST(Headroom, CountsFiniteNonZeroValuesBelowTheTargetsSmallestNormal) {
  const float fp16_normal = std::ldexp(1.0f, -14);
  const std::vector<float> data = {0.f,          -0.f,
                                   1e-6f,        -3e-5f,
                                   fp16_normal,  -fp16_normal * 0.999f,
                                   1.f,          std::numeric_limits<float>::infinity(),
                                   std::nanf("")};
  const int64_t size = static_cast<int64_t>(data.size()), stride = 1;
  ovf::TensorView v;
  v.data = data.data();
  v.dtype = OVF_DTYPE_FLOAT32;
  v.ndim = 1;
  v.sizes = &size;
  v.strides = &stride;
  // 1e-6, -3e-5 and just below 2^-14: three (zeros, the normal, inf and nan are not)
  EXPECT_EQ(ovf::count_below(v, ovf::dtype_min_normal(OVF_DTYPE_FLOAT16)), 3u);
  EXPECT_EQ(ovf::count_below(v, ovf::dtype_min_normal(OVF_DTYPE_FLOAT8_E4M3)),
            4u);  // + 2^-14 < 2^-6
  // strided: every other element (0, 1e-6, 2^-14, 1, nan)
  const int64_t half = (size + 1) / 2, step2 = 2;
  v.sizes = &half;
  v.strides = &step2;
  EXPECT_EQ(ovf::count_below(v, ovf::dtype_min_normal(OVF_DTYPE_FLOAT16)), 1u);
}

TEST(Headroom, Float16SourceAgainstFp8) {
  // fp16 bits: 0x1c00 = 2^-8 (below e4m3's 2^-6), 0x2400 = 2^-6 (not below), 0x0001 (below)
  const std::vector<uint16_t> data = {0x1c00, 0x2400, 0x0001, 0x0000};
  EXPECT_EQ(ovf::count_below(
                [&] {
                  static int64_t n = 4, s = 1;
                  ovf::TensorView v;
                  v.data = data.data();
                  v.dtype = OVF_DTYPE_FLOAT16;
                  v.ndim = 1;
                  v.sizes = &n;
                  v.strides = &s;
                  return v;
                }(),
                ovf::dtype_min_normal(OVF_DTYPE_FLOAT8_E4M3)),
            2u);
}

namespace cast_case {
const float kInf = std::numeric_limits<float>::infinity();
// One copy of values whose fate in float16, bfloat16, float8_e4m3fn and
// float8_e5m2 is known, and that fate: {overflow, flush, subnormal} per target.
const float kOne[] = {0.0f, 1e-8f, 3e-8f, 1e-5f, 1.0f, 500.0f, 60000.0f, 65520.0f, kInf, NAN};
const uint64_t kWant[OVF_CAST_TARGETS][OVF_CAST_LOSSES] = {
    {1, 1, 2},  // float16: 65520 ties up to inf; 1e-8 <= 2^-25 flushes; 3e-8, 1e-5 subnormal
    {0, 0, 0},  // bfloat16: float32's range
    {3, 3, 0},  // e4m3fn: 500 and up pass 464; everything below 2^-10 flushes
    {1, 2, 1},  // e5m2: 65520 >= 61440; 1e-8, 3e-8 <= 2^-17 flush; 1e-5 subnormal
};

void append_copies(std::vector<float>& data, int copies) {
  for (int i = 0; i < copies; ++i) data.insert(data.end(), std::begin(kOne), std::end(kOne));
}

void expect_copies(const std::vector<float>& data, uint64_t copies) {
  const Stats s = ovf::compute_stats_cpu(
      flat_view(data.data(), OVF_DTYPE_FLOAT32, static_cast<int64_t>(data.size())),
      /*with_casts=*/true);
  ASSERT_TRUE(s.has_cast);
  for (int t = 0; t < OVF_CAST_TARGETS; ++t) {
    for (int loss = 0; loss < OVF_CAST_LOSSES; ++loss)
      EXPECT_EQ(s.cast.at(t, loss), copies * kWant[t][loss]) << ovf::cast_target_name(t) << loss;
  }
}
}  // namespace cast_case

// What casts would lose, by hand, repeated over many of the scan's spans
// (tests/python/test_cast_counts.py checks the same against torch's casts).
TEST(StatsCast, Float32ValuesLoseWhatEachCastRoundsAway) {
  std::vector<float> data;
  cast_case::append_copies(data, 2000);
  cast_case::expect_copies(data, 2000);
  EXPECT_FALSE(ovf::compute_stats_cpu(TensorView{}, false).has_cast);
}

// A span's statistics loop counts the limits that were inside the previous
// span's range: here a span of ones after spans with every limit inside (the
// counts it makes there must be exact while its own range holds none), and
// the wide values again after it (limits no longer in that loop: counted after).
TEST(StatsCast, SpansOfOtherRangesCountTheSame) {
  std::vector<float> data;
  cast_case::append_copies(data, 410);  // crosses into the second span
  data.insert(data.end(), 3 * ovf::detail::kCountSpan, 1.0f);
  cast_case::append_copies(data, 410);
  data.push_back(cast_case::kInf);  // a last, short span with a non-finite value only
  cast_case::expect_copies(data, 820);
}

}  // namespace
