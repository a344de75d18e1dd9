// One thread's running statistics: the per-element transform (add), and the
// fast passes over a loaded vector that nearly every element goes through.
// __host__ __device__ like the rest (see stats_functors.cuh): the host tests
// feed these very functions random bits and compare with the CPU engine.
#ifndef OVF_CUDA_THREAD_ACC_CUH
#define OVF_CUDA_THREAD_ACC_CUH

#include <cstdint>

#include "hd.cuh"
#include "stats_functors.cuh"
#include "vector.cuh"

namespace ovf::cuda {

// Two keys of a narrow floating type side by side, one per 16-bit half of a
// word (each below 0x8000), reduced lane-wise: float16/bfloat16 come two to a
// word already, fp8 is split into its even and its odd bytes. Per pair: a
// max, a min and a few bit operations, where one key at a time costs as much
// per key. Lane counters hold at most 8 per vector (fp8), far below 2^16.
template <typename Codec>
struct LanePairs {
  static constexpr uint32_t kTop = 0x80008000u, kOne = 0x00010001u;
  uint32_t max = 0;             // per lane: the largest key
  uint32_t below = ~0u;         // per lane: the smallest key - 1, a zero giving 0xffff
  uint32_t zeros = 0, low = 0;  // per lane: zeros, and keys below the smallest normal

  OVF_HD void add(uint32_t keys) {
    max = max_u16x2(max, keys);
    // 0x8000 + key in each lane, so that subtracting from it never borrows
    // from the lane above; its top bit then says "key >= what was subtracted".
    const uint32_t lifted = keys | kTop;
    const uint32_t minus_one = lifted - kOne;
    below = min_u16x2(below, minus_one ^ kTop);
    zeros += (~minus_one & kTop) >> 15;
    if constexpr (Codec::kCountLow) {
      low += (~(lifted - static_cast<uint32_t>(Codec::kMinNormal) * kOne) & kTop) >> 15;
    }
  }
  OVF_HD static uint32_t both(uint32_t lanes) { return (lanes & 0xffffu) + (lanes >> 16); }
};

// A vector's keys of a 1- or 2-byte codec as lane pairs (LanePairs' input),
// fn(pair) for each: float16/bfloat16 words as they are, fp8 words split into
// their even and their odd bytes, the sign bits cleared.
template <typename Codec, typename Fn>
OVF_HD void for_each_key_pair(const Vector& v, Fn&& fn) {
  constexpr uint32_t kAbs = static_cast<uint32_t>(Codec::kAbsMask) * 0x00010001u;
  OVF_UNROLL
  for (int j = 0; j < kVectorBytes / 4; ++j) {
    fn(v.w[j] & kAbs);
    if constexpr (sizeof(typename Codec::Bits) == 1) fn((v.w[j] >> 8) & kAbs);
  }
}

// One thread's running statistics in its codec's own widths: 32-bit counters
// (a thread sees far fewer than 2^32 elements: the launch plan bounds the
// elements per block) and keys as narrow as the element allows.
template <typename Codec>
struct ThreadAcc {
  using Bits = typename Codec::Bits;
  using Key = typename Codec::Key;

  Key min_key = ~Key{0};
  Key max_key = 0;
  Key min_nonzero_key = ~Key{0};
  uint32_t nan = 0, pos_inf = 0, neg_inf = 0, zero = 0, subnormal = 0;

  // The per-element transform: one element, fully classified.
  OVF_HD void add(Bits b) {
    const Key k = Codec::key(b);
    if constexpr (Codec::kFloating) {
      if (k >= Codec::kLimit) {
        if (Codec::kHasInf && k == Codec::kLimit) {
          ++(Codec::negative(b) ? neg_inf : pos_inf);
        } else {
          ++nan;
        }
        return;
      }
      subnormal += (k != 0 && k < Codec::kMinNormal) ? 1u : 0u;
    }
    min_key = lesser(min_key, k);
    max_key = greater(max_key, k);
    if (k != Codec::kZeroKey) {
      min_nonzero_key = lesser(min_nonzero_key, k);
    } else {
      ++zero;
    }
  }

  // A loaded vector. Floating vectors take a fast pass first, as the CPU
  // engine's scan does (stats_scan.inc): only the largest key, the smallest
  // non-zero key, the zeros and, where kCountLow, the keys below the smallest
  // normal. If the largest key is not finite (a NaN or an infinity in the
  // vector), or a subnormal turned up where none is counted, the vector is
  // classified again element by element.
  OVF_HD void add_vector(const Vector& v) {
    if constexpr (Codec::kFloating && sizeof(Bits) <= 2) {
      if (add_lanes(v)) return;
    } else if constexpr (Codec::kFloating) {
      if (add_lean(v)) return;
    }
    add_each(v);
  }

  // The fast pass for 4- and 8-byte elements, one key at a time. The smallest
  // key - 1 is the non-zero minimum - 1 (a zero wraps around to the top).
  OVF_HD bool add_lean(const Vector& v) {
    Key mx = 0, below = ~Key{0};
    uint32_t zeros = 0, low = 0;
    OVF_UNROLL
    for (int i = 0; i < kPerVector<Bits>; ++i) {
      const Key k = Codec::key(element<Bits>(v, i));
      mx = greater(mx, k);
      below = lesser(below, static_cast<Key>(k - 1));
      zeros += k == 0 ? 1u : 0u;
      if constexpr (Codec::kCountLow) low += k < Codec::kMinNormal ? 1u : 0u;
    }
    return merge_fast(mx, static_cast<Key>(below + 1), zeros, low);
  }

  // The fast pass for 1- and 2-byte elements, two keys at a time (LanePairs).
  OVF_HD bool add_lanes(const Vector& v) {
    LanePairs<Codec> pairs;
    for_each_key_pair<Codec>(v, [&](uint32_t keys) { pairs.add(keys); });
    const uint32_t below = lesser(pairs.below & 0xffffu, pairs.below >> 16);
    const Key mnz = below == 0xffffu ? Key{0} : static_cast<Key>(below + 1);
    return merge_fast(greater(pairs.max & 0xffffu, pairs.max >> 16), mnz,
                      LanePairs<Codec>::both(pairs.zeros), LanePairs<Codec>::both(pairs.low));
  }

  // Takes a fast pass's result (mnz: the smallest non-zero key, 0 if every
  // element was zero; low counts zeros too); false when the vector needs
  // add_each instead.
  OVF_HD bool merge_fast(Key mx, Key mnz, uint32_t zeros, uint32_t low) {
    const bool unseen_subnormal = !Codec::kCountLow && mnz != 0 && mnz < Codec::kMinNormal;
    if (mx >= Codec::kLimit || unseen_subnormal) return false;
    min_key = lesser(min_key, zeros > 0 ? Key{0} : mnz);
    max_key = greater(max_key, mx);
    if (mnz != 0) min_nonzero_key = lesser(min_nonzero_key, mnz);
    zero += zeros;
    if constexpr (Codec::kCountLow) subnormal += low - zeros;
    return true;
  }

  // Every element of a vector through add(). Rare for floating types, so the
  // elements within a word are walked by a rolled loop (the unrolled fast pass
  // alone should set the kernel's register count), shifting the word: an index
  // that is not a constant would put the loaded vectors in local memory.
  OVF_HD void add_each(const Vector& v) {
    if constexpr (sizeof(Bits) >= 4) {
      OVF_UNROLL
      for (int i = 0; i < kPerVector<Bits>; ++i) add(element<Bits>(v, i));
    } else {
      OVF_UNROLL
      for (int j = 0; j < kVectorBytes / 4; ++j) {
        uint32_t word = v.w[j];
        OVF_NO_UNROLL
        for (int k = 0; k < 4 / static_cast<int>(sizeof(Bits)); ++k) {
          add(static_cast<Bits>(word));
          word >>= 8 * sizeof(Bits);
        }
      }
    }
  }

  // Widened for the block reduction (keys zero-extended: the order holds).
  OVF_HD Partial to_partial() const {
    return Partial{nan, pos_inf, neg_inf, zero, subnormal, min_key, max_key, min_nonzero_key};
  }
};

}  // namespace ovf::cuda

#endif  // OVF_CUDA_THREAD_ACC_CUH
