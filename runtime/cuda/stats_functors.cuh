// The per-element transform's parts (each dtype's codec: element bits -> key)
// and the combine step of partial results, for every dtype the CUDA backend
// reads; thread_acc.cuh applies them to elements. Everything here is
// __host__ __device__: the kernels run exactly these functions, and the host
// tests run them against the CPU engine (runtime/core/stats_cpu.cpp).
//
// The device works in "keys": an unsigned integer per element whose order is
// the order of |x| within one dtype, so that min and max are integer
// instructions (no floating-point unit, no fp64 on GPUs that have little of it).
// The host turns the three keys of a finished tensor into doubles once
// (partial_stats.h).
#ifndef OVF_CUDA_STATS_FUNCTORS_CUH
#define OVF_CUDA_STATS_FUNCTORS_CUH

#include <cstdint>
#include <type_traits>

#include "hd.cuh"
#include "ovf/ring.h"

namespace ovf::cuda {

template <typename T>
OVF_HD constexpr T lesser(T a, T b) {
  return b < a ? b : a;
}
template <typename T>
OVF_HD constexpr T greater(T a, T b) {
  return a < b ? b : a;
}

// A thread's, a block's or a whole tensor's statistics before they become
// ovf::Stats. Keys cover finite elements only; whether there were any, and any
// non-zero ones, the host reads from the counts (a key alone cannot say: every
// key value is some element's for the 64-bit integer types).
struct Partial {
  uint64_t nan, pos_inf, neg_inf, zero, subnormal;
  uint64_t min_key, max_key, min_nonzero_key;
};

OVF_HD inline Partial identity_partial() {
  return Partial{0, 0, 0, 0, 0, ~uint64_t{0}, 0, ~uint64_t{0}};
}

// The combine step: associative and commutative, so blocks and threads may
// reduce in any order and the result is the same bits.
OVF_HD inline Partial combine(const Partial& a, const Partial& b) {
  return Partial{a.nan + b.nan,
                 a.pos_inf + b.pos_inf,
                 a.neg_inf + b.neg_inf,
                 a.zero + b.zero,
                 a.subnormal + b.subnormal,
                 lesser(a.min_key, b.min_key),
                 greater(a.max_key, b.max_key),
                 lesser(a.min_nonzero_key, b.min_nonzero_key)};
}

// The combine step as the function object CUB's reductions take, for Partial
// and for cast_tally.cuh's CastPartial (found at instantiation).
struct Combine {
  template <typename P>
  OVF_HD P operator()(const P& a, const P& b) const {
    return combine(a, b);
  }
};

// Keys are 32 bits wide for elements of up to 4 bytes: 64-bit integer
// operations are two instructions each on a GPU.
template <typename T>
using KeyFor = std::conditional_t<sizeof(T) == 8, uint64_t, uint32_t>;

// Floating types (IEEE binary64/32/16, bfloat16, fp8): sign-magnitude, so the
// bits with the sign cleared, read as an integer, order like |x|, and NaN
// patterns sort above the infinity's. Keys at or above kLimit are not finite:
// with an infinity (kHasInf), kLimit is its key and larger keys are NaNs;
// e4m3fn has none, and kLimit is its only NaN key (S.1111.111). Keys below
// kMinNormal other than 0 are subnormals. kCountLow: subnormals are common in
// this type's data (float16 and fp8 have little range below 1), so the lean
// pass counts them instead of sending their vectors to the full pass.
template <typename B, B kSign, B kLimitBits, B kMinNormalBits, bool kHasInfinity, bool kLow>
struct FloatCodec {
  using Bits = B;
  using Key = KeyFor<B>;
  static constexpr bool kFloating = true;
  static constexpr bool kHasInf = kHasInfinity;
  static constexpr bool kCountLow = kLow;
  static constexpr Key kZeroKey = 0;
  static constexpr Key kLimit = kLimitBits;
  static constexpr Key kMinNormal = kMinNormalBits;
  static constexpr B kAbsMask = static_cast<B>(~kSign);
  OVF_HD static Key key(Bits b) { return static_cast<Key>(b & kAbsMask); }
  OVF_HD static bool negative(Bits b) { return (b & kSign) != 0; }
};

using Float64Codec = FloatCodec<uint64_t, 0x8000000000000000ull, 0x7ff0000000000000ull,
                                0x0010000000000000ull, true, false>;
using Float32Codec = FloatCodec<uint32_t, 0x80000000u, 0x7f800000u, 0x00800000u, true, false>;
using Float16Codec = FloatCodec<uint16_t, 0x8000, 0x7c00, 0x0400, true, true>;
using BFloat16Codec = FloatCodec<uint16_t, 0x8000, 0x7f80, 0x0080, true, false>;
using Float8E4M3Codec = FloatCodec<uint8_t, 0x80, 0x7f, 0x08, false, true>;
using Float8E5M2Codec = FloatCodec<uint8_t, 0x80, 0x7c, 0x04, true, true>;

// Signed integers: the magnitude the reference prints (torch's abs(), where the
// most negative value wraps around to itself and stays negative), offset by
// half the key range so that that one negative magnitude sorts below zero.
template <typename T>
struct SignedIntCodec {
  using Bits = std::make_unsigned_t<T>;
  using Key = KeyFor<T>;
  using SignedKey = std::make_signed_t<Key>;
  static constexpr bool kFloating = false;
  static constexpr Key kBias = Key{1} << (8 * sizeof(Key) - 1);
  static constexpr Key kZeroKey = kBias;
  static constexpr T kMost = static_cast<T>(Bits{1} << (8 * sizeof(T) - 1));  // most negative
  OVF_HD static Key key(Bits b) {
    const T v = static_cast<T>(b);
    const SignedKey magnitude = v == kMost ? SignedKey{v} : static_cast<SignedKey>(v < 0 ? -v : v);
    return static_cast<Key>(magnitude) ^ kBias;
  }
  // The magnitude a key stands for (the host's half of key()).
  OVF_HD static SignedKey magnitude(Key k) { return static_cast<SignedKey>(k ^ kBias); }
};

// Unsigned integers: the value is its own magnitude and key.
template <typename T>
struct UnsignedIntCodec {
  using Bits = T;
  using Key = KeyFor<T>;
  static constexpr bool kFloating = false;
  static constexpr Key kZeroKey = 0;
  OVF_HD static Key key(Bits b) { return static_cast<Key>(b); }
};

// bool: a byte that is false (0) or true (any other value: a uint8 tensor
// viewed as bool may hold 2), magnitude 1, as torch and the CPU engine read it.
struct BoolCodec {
  using Bits = uint8_t;
  using Key = KeyFor<uint8_t>;
  static constexpr bool kFloating = false;
  static constexpr Key kZeroKey = 0;
  OVF_HD static Key key(Bits b) { return b != 0 ? Key{1} : Key{0}; }
};

// Returns fn(Codec{}) for the codec of `dtype`, or `otherwise` for dtypes this
// backend does not read (complex: |z| would need the host's hypot to the last
// bit). The one list of dtypes and codecs; values return rather than land in
// a captured variable, which would put them in local memory on the device.
template <typename R, typename Fn>
OVF_HD R visit_codec(int dtype, R otherwise, Fn&& fn) {
  switch (dtype) {
    case OVF_DTYPE_FLOAT64: return fn(Float64Codec{});
    case OVF_DTYPE_FLOAT32: return fn(Float32Codec{});
    case OVF_DTYPE_FLOAT16: return fn(Float16Codec{});
    case OVF_DTYPE_BFLOAT16: return fn(BFloat16Codec{});
    case OVF_DTYPE_FLOAT8_E4M3: return fn(Float8E4M3Codec{});
    case OVF_DTYPE_FLOAT8_E5M2: return fn(Float8E5M2Codec{});
    case OVF_DTYPE_INT64: return fn(SignedIntCodec<int64_t>{});
    case OVF_DTYPE_INT32: return fn(SignedIntCodec<int32_t>{});
    case OVF_DTYPE_INT16: return fn(SignedIntCodec<int16_t>{});
    case OVF_DTYPE_INT8: return fn(SignedIntCodec<int8_t>{});
    case OVF_DTYPE_UINT8: return fn(UnsignedIntCodec<uint8_t>{});
    case OVF_DTYPE_BOOL: return fn(BoolCodec{});
    case OVF_DTYPE_UINT16: return fn(UnsignedIntCodec<uint16_t>{});
    case OVF_DTYPE_UINT32: return fn(UnsignedIntCodec<uint32_t>{});
    case OVF_DTYPE_UINT64: return fn(UnsignedIntCodec<uint64_t>{});
    default: return otherwise;
  }
}

}  // namespace ovf::cuda

#endif  // OVF_CUDA_STATS_FUNCTORS_CUH
