// What a cast to the narrow floating types would lose, on the device: one
// thread's counts of elements whose key lies below each of the twelve cast
// thresholds (core/cast_loss.h: the host turns them into overflow, flush and
// subnormal counts with cast_counts_from_below, as for the CPU engine).
// Taken in the same pass as the other statistics when a frame asks for them
// (FramePlan::clear(true)); __host__ __device__ like the rest, so the host
// tests run these very functions.
//
// Every threshold is at most the codec's kLimit (the first key that is not
// finite), so NaN and infinity keys are never below one: the tally needs no
// finiteness test of its own.
#ifndef OVF_CUDA_CAST_TALLY_CUH
#define OVF_CUDA_CAST_TALLY_CUH

#include <cstdint>

#include "cast_loss.h"
#include "hd.cuh"
#include "stats_functors.cuh"
#include "thread_acc.cuh"
#include "vector.cuh"

namespace ovf::cuda {

// A Partial with the below-threshold counts (index as CastBounds::bits).
struct CastPartial {
  Partial stats;
  uint64_t below[kCastCounts];
};

// The identity of each partial type's combine step.
template <typename P>
OVF_HD P identity_of();
template <>
OVF_HD inline Partial identity_of<Partial>() {
  return identity_partial();
}
template <>
OVF_HD inline CastPartial identity_of<CastPartial>() {
  CastPartial p{identity_partial(), {}};
  return p;
}

OVF_HD inline CastPartial combine(const CastPartial& a, const CastPartial& b) {
  CastPartial p{combine(a.stats, b.stats), {}};
  OVF_UNROLL
  for (int j = 0; j < kCastCounts; ++j) p.below[j] = a.below[j] + b.below[j];
  return p;
}

// A thread's tally for a codec's keys. 32-bit counters, as ThreadAcc's.
template <typename Codec>
struct CastTally {
  using Bits = typename Codec::Bits;
  using Key = typename Codec::Key;

  Key limit[kCastCounts];
  uint32_t below[kCastCounts] = {};

  OVF_HD explicit CastTally(const uint64_t* thresholds) {
    OVF_UNROLL
    for (int j = 0; j < kCastCounts; ++j) limit[j] = static_cast<Key>(thresholds[j]);
  }

  OVF_HD void add(Key k) {
    OVF_UNROLL
    for (int j = 0; j < kCastCounts; ++j) below[j] += k < limit[j] ? 1u : 0u;
  }

  OVF_HD void add_vector(const Vector& v) {
    if constexpr (sizeof(Bits) <= 2) {
      add_lanes(v);
    } else {
      OVF_UNROLL
      for (int i = 0; i < kPerVector<Bits>; ++i) add(Codec::key(element<Bits>(v, i)));
    }
  }

  // 1- and 2-byte keys two at a time, one per 16-bit lane (as LanePairs):
  // 0x8000 + key - limit keeps its top bit clear exactly when key < limit
  // (every limit is below 0x8000, so no lane borrows from the one above).
  OVF_HD void add_lanes(const Vector& v) {
    using Lanes = LanePairs<Codec>;
    uint32_t lanes[kCastCounts] = {};  // at most 8 per lane per vector
    for_each_key_pair<Codec>(v, [&](uint32_t keys) {
      const uint32_t lifted = keys | Lanes::kTop;
      OVF_UNROLL
      for (int j = 0; j < kCastCounts; ++j) {
        const uint32_t lane_limit = static_cast<uint32_t>(limit[j]) * Lanes::kOne;
        lanes[j] += (~(lifted - lane_limit) & Lanes::kTop) >> 15;
      }
    });
    OVF_UNROLL
    for (int j = 0; j < kCastCounts; ++j) below[j] += Lanes::both(lanes[j]);
  }

  OVF_HD CastPartial finish(const Partial& stats) const {
    CastPartial p{stats, {}};
    OVF_UNROLL
    for (int j = 0; j < kCastCounts; ++j) p.below[j] = below[j];
    return p;
  }
};

// The tally of a frame that asks for no cast counts, or of a type that has none.
struct NoTally {
  template <typename K>
  OVF_HD void add(K) {}
  OVF_HD void add_vector(const Vector&) {}
};

}  // namespace ovf::cuda

#endif  // OVF_CUDA_CAST_TALLY_CUH
