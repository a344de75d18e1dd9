// Shared by the CUDA backend's tests (host and GPU): element buffers of every
// dtype the backend reads, from random bits with the special values planted
// (NaN payloads of both signs, both infinities, both zeros, the smallest and
// largest subnormals and normals, integer extremes), and the CPU engine's
// answer to compare with.
#ifndef OVF_TESTS_CUDA_TEST_DATA_H
#define OVF_TESTS_CUDA_TEST_DATA_H

#include <gtest/gtest.h>

#include <cstdint>
#include <cstring>
#include <limits>
#include <random>
#include <string>
#include <vector>

#include "frame_plan.h"
#include "stats_cpu.h"

namespace ovf_test {

// Every dtype the CUDA backend reads.
inline const std::vector<ovf_dtype>& cuda_dtypes() {
  static const std::vector<ovf_dtype> all = {
      OVF_DTYPE_FLOAT64,     OVF_DTYPE_FLOAT32,     OVF_DTYPE_FLOAT16, OVF_DTYPE_BFLOAT16,
      OVF_DTYPE_FLOAT8_E4M3, OVF_DTYPE_FLOAT8_E5M2, OVF_DTYPE_INT64,   OVF_DTYPE_INT32,
      OVF_DTYPE_INT16,       OVF_DTYPE_INT8,        OVF_DTYPE_UINT8,   OVF_DTYPE_BOOL,
      OVF_DTYPE_UINT16,      OVF_DTYPE_UINT32,      OVF_DTYPE_UINT64};
  return all;
}

inline std::string dtype_label(ovf_dtype dtype) { return ovf::dtype_name(dtype); }

// Bit patterns worth planting, as little-endian 64-bit words cut to the width.
inline std::vector<uint64_t> special_bits(ovf_dtype dtype) {
  switch (dtype) {
    case OVF_DTYPE_FLOAT64:
      return {0,
              0x8000000000000000ull,
              0x7ff0000000000000ull,
              0xfff0000000000000ull,
              0x7ff8000000000000ull,
              0x7ff0000000000001ull,
              0xfff8000000000123ull,
              0x0000000000000001ull,
              0x000fffffffffffffull,
              0x0010000000000000ull,
              0x7fefffffffffffffull,
              0x3ff0000000000000ull,
              0x800fffffffffffffull};
    case OVF_DTYPE_FLOAT32:
      return {0,          0x80000000, 0x7f800000, 0xff800000, 0x7fc00000, 0x7f800001,
              0xffc01234, 0x00000001, 0x007fffff, 0x00800000, 0x7f7fffff, 0x807fffff};
    case OVF_DTYPE_FLOAT16:
      return {0,      0x8000, 0x7c00, 0xfc00, 0x7e00, 0x7c01, 0xfe01,
              0x0001, 0x03ff, 0x0400, 0x7bff, 0xfbff, 0x83ff};
    case OVF_DTYPE_BFLOAT16:
      return {0,      0x8000, 0x7f80, 0xff80, 0x7fc0, 0x7f81,
              0xffff, 0x0001, 0x007f, 0x0080, 0x7f7f, 0x807f};
    case OVF_DTYPE_FLOAT8_E4M3:
      return {0, 0x80, 0x7f, 0xff, 0x7e, 0xfe, 0x01, 0x07, 0x08, 0x87, 0x78};
    case OVF_DTYPE_FLOAT8_E5M2:
      return {0, 0x80, 0x7c, 0xfc, 0x7d, 0x7f, 0xff, 0xfe, 0x01, 0x03, 0x04, 0x7b, 0x83};
    case OVF_DTYPE_BOOL: return {0, 1, 2, 0x80, 0xff};  // a uint8 viewed as bool: any byte
    default:  // integers: the most negative, -1, 0, 1, the largest (sign bit patterns)
      return {0, 1, ~uint64_t{0}, uint64_t{1} << (8 * ovf::cuda::element_size(dtype) - 1),
              (uint64_t{1} << (8 * ovf::cuda::element_size(dtype) - 1)) - 1};
  }
}

// Whether an element's bits are a finite value (integers always are).
inline bool finite_bits(ovf_dtype dtype, uint64_t bits) {
  switch (dtype) {
    case OVF_DTYPE_FLOAT64: return (bits & 0x7ff0000000000000ull) != 0x7ff0000000000000ull;
    case OVF_DTYPE_FLOAT32: return (bits & 0x7f800000u) != 0x7f800000u;
    case OVF_DTYPE_FLOAT16: return (bits & 0x7c00u) != 0x7c00u;
    case OVF_DTYPE_BFLOAT16: return (bits & 0x7f80u) != 0x7f80u;
    case OVF_DTYPE_FLOAT8_E4M3: return (bits & 0x7fu) != 0x7fu;
    case OVF_DTYPE_FLOAT8_E5M2: return (bits & 0x7cu) != 0x7cu;
    default: return true;
  }
}

enum class Fill {
  kRandomBits,  // uniform bits: NaNs and infinities wherever their patterns fall
  kFinite,      // random finite bits (the fast path) with a few specials
  kZeros,       // all +0: every element read counts once in zero_count
};

// n elements of `dtype`. Specials are planted at random places (about one
// element in 50); uniform bits already hold subnormals (1 in 256 for float32).
inline std::vector<unsigned char> make_elements(ovf_dtype dtype, size_t n, uint32_t seed,
                                                Fill fill) {
  const int size = ovf::cuda::element_size(dtype);
  std::vector<unsigned char> buf(n * size);
  if (fill == Fill::kZeros) return buf;
  std::mt19937_64 rng(seed);
  const uint64_t mask = size == 8 ? ~uint64_t{0} : (uint64_t{1} << (8 * size)) - 1;
  for (size_t i = 0; i < n; ++i) {
    uint64_t bits = rng() & mask;
    if (dtype == OVF_DTYPE_BOOL) bits &= 1;
    if (fill == Fill::kFinite) {
      while (!finite_bits(dtype, bits)) bits = rng() & mask;
    }
    std::memcpy(&buf[i * size], &bits, size);
  }
  const auto specials = special_bits(dtype);
  const size_t planted = std::max<size_t>(1, n / 50);
  for (size_t k = 0; k < planted && n > 0; ++k) {
    const uint64_t bits = specials[rng() % specials.size()];
    if (fill == Fill::kFinite && !finite_bits(dtype, bits)) continue;
    std::memcpy(&buf[(rng() % n) * size], &bits, size);
  }
  return buf;
}

// The CPU engine's statistics of a view. Where the CPU engine does not read a
// dtype (uint16/32/64: its dtype_size() lacks them), a plain reference with the
// same integer semantics stands in.
inline ovf::Stats cpu_stats(const ovf::TensorView& v, bool with_casts = false) {
  if (ovf::dtype_size(v.dtype) != 0) return ovf::compute_stats_cpu(v, with_casts);
  ovf::Stats s;
  s.has_stats = true;
  s.numel = 1;
  for (int d = 0; d < v.ndim; ++d) s.numel *= static_cast<uint64_t>(v.sizes[d]);
  s.abs_min = s.abs_min_nonzero = std::numeric_limits<double>::infinity();
  std::vector<int64_t> offsets{0};
  for (int d = 0; d < v.ndim; ++d) {
    std::vector<int64_t> next;
    for (int64_t base : offsets)
      for (int64_t i = 0; i < v.sizes[d]; ++i) next.push_back(base + i * v.strides[d]);
    offsets.swap(next);
  }
  if (s.numel == 0) offsets.clear();
  const int size = ovf::cuda::element_size(v.dtype);
  for (int64_t off : offsets) {
    uint64_t x = 0;
    std::memcpy(&x, static_cast<const char*>(v.data) + off * size, size);
    const double a = static_cast<double>(x);
    s.abs_min = std::min(s.abs_min, a);
    s.abs_max = std::max(s.abs_max, a);
    if (x == 0) {
      ++s.zero_count;
    } else {
      s.abs_min_nonzero = std::min(s.abs_min_nonzero, a);
    }
  }
  return s;
}

inline ovf::Stats cpu_stats_contiguous(const void* data, ovf_dtype dtype, uint64_t n) {
  const int64_t size = static_cast<int64_t>(n), stride = 1;
  ovf::TensorView v;
  v.data = data;
  v.dtype = dtype;
  v.ndim = 1;
  v.sizes = &size;
  v.strides = &stride;
  return cpu_stats(v);
}

inline void expect_same_stats(const ovf::Stats& got, const ovf::Stats& want) {
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
  EXPECT_EQ(got.has_cast, want.has_cast);
  for (int k = 0; k < ovf::kCastCounts; ++k) {
    EXPECT_EQ(got.cast.n[k], want.cast.n[k]) << "cast count " << k;
  }
}

}  // namespace ovf_test

#endif  // OVF_TESTS_CUDA_TEST_DATA_H
