// How the fused kernel splits a frame's tensors among blocks and threads, and
// what one thread reads. __host__ __device__ like the functors, so the host
// tests walk the same blocks and threads the GPU does (frame_plan.h builds the
// table; stats_kernels.cu adds only the launch and CUB's block reduction).
#ifndef OVF_CUDA_FRAME_SCAN_CUH
#define OVF_CUDA_FRAME_SCAN_CUH

#include <cstdint>

#include "cast_tally.cuh"
#include "dim_merge.h"
#include "hd.cuh"
#include "stats_functors.cuh"
#include "thread_acc.cuh"
#include "vector.cuh"

namespace ovf::cuda {

constexpr int kThreads = 256;  // per block, both kernels
// The most dimensions a tensor's entry indexes after merging (dim_merge.h); a
// view that keeps more (a rare, heavily sliced one) is left to the portable backend.
constexpr int kMaxKernelDims = 8;
constexpr int kUnroll = 4;  // 16-byte vectors a thread has in flight at once

// One tensor of the frame: its row in the launch table (device memory). Blocks
// [first_block, first_block + blocks) are its; consecutive tensors' ranges
// follow each other, so a block finds its tensor by binary search.
struct TensorEntry {
  const void* data;               // the lowest element the view reads (element-aligned)
  uint64_t numel;                 // elements walked (broadcast dimensions are not: see MergedDims)
  uint64_t per_block;             // vectors (contiguous) or elements (strided) a block walks
  uint64_t vectors;               // contiguous: whole 16-byte-aligned vectors after the head
  int64_t sizes[kMaxKernelDims];  // merged, outermost first
  int64_t strides[kMaxKernelDims];
  uint32_t first_block;
  uint32_t blocks;  // 0 for an empty tensor
  int32_t dtype;    // enum ovf_dtype
  int32_t ndim;
  uint32_t contiguous;  // one dimension of stride 1: read in aligned 16-byte vectors
  uint32_t head;        // contiguous: elements before the first aligned vector (block 0 reads them)
  uint32_t tail;        // contiguous: elements after the last whole vector (the last block's)
  // The cast thresholds as the dtype's keys (CastBounds::bits), read by a
  // frame that counts cast losses; zeros otherwise.
  uint64_t cast_limits[kCastCounts];
};

// The last entry whose first block is at or before `block`: the one that owns
// it (an empty tensor's range is empty, and it precedes the next tensor's
// entry with the same first block).
OVF_HD inline uint32_t find_tensor(const TensorEntry* table, uint32_t count, uint64_t block) {
  uint32_t lo = 0, hi = count;
  while (hi - lo > 1) {
    const uint32_t mid = lo + (hi - lo) / 2;
    if (table[mid].first_block <= block) {
      lo = mid;
    } else {
      hi = mid;
    }
  }
  return lo;
}

// Element offset of position i of a merged strided layout (outermost first).
OVF_HD inline int64_t element_offset(const TensorEntry& t, uint64_t i) {
  int64_t offset = 0;
  for (int d = t.ndim - 1; d > 0; --d) {
    const uint64_t size = static_cast<uint64_t>(t.sizes[d]);
    offset += static_cast<int64_t>(i % size) * t.strides[d];
    i /= size;
  }
  return offset + static_cast<int64_t>(i) * t.strides[0];
}

// Contiguous: a block owns a run of whole vectors; neighbouring threads read
// neighbouring vectors (coalesced), each with kUnroll loads in flight. Block 0
// also reads the unaligned head, the last block the tail.
template <typename Codec, typename Tally>
OVF_HD Partial scan_contiguous(const TensorEntry& t, uint64_t block, uint32_t tid, uint32_t threads,
                               Tally& tally) {
  using Bits = typename Codec::Bits;
  constexpr int kCount = kPerVector<Bits>;
  const Bits* base = static_cast<const Bits*>(t.data);
  ThreadAcc<Codec> acc;
  if (block == 0) {
    for (uint32_t i = tid; i < t.head; i += threads) {
      acc.add(base[i]);
      tally.add(Codec::key(base[i]));
    }
  }
  const Bits* aligned = base + t.head;
  const uint64_t begin = block * t.per_block;
  const uint64_t end = lesser(begin + t.per_block, t.vectors);
  for (uint64_t v = begin + tid; v < end; v += uint64_t{kUnroll} * threads) {
    Vector loaded[kUnroll];
    OVF_UNROLL
    for (int u = 0; u < kUnroll; ++u) {
      const uint64_t w = v + uint64_t{threads} * u;
      if (w < end) loaded[u] = load_vector(aligned + w * kCount);
    }
    OVF_UNROLL
    for (int u = 0; u < kUnroll; ++u) {
      if (v + uint64_t{threads} * u < end) {
        acc.add_vector(loaded[u]);
        tally.add_vector(loaded[u]);
      }
    }
  }
  if (block + 1 == t.blocks) {
    const Bits* rest = aligned + t.vectors * kCount;
    for (uint32_t i = tid; i < t.tail; i += threads) {
      acc.add(rest[i]);
      tally.add(Codec::key(rest[i]));
    }
  }
  return acc.to_partial();
}

// Strided: a block owns a run of positions, each thread every threads-th one,
// its offset decoded from the merged sizes (one division per extra dimension).
template <typename Codec, typename Tally>
OVF_HD Partial scan_strided(const TensorEntry& t, uint64_t block, uint32_t tid, uint32_t threads,
                            Tally& tally) {
  using Bits = typename Codec::Bits;
  const Bits* base = static_cast<const Bits*>(t.data);
  ThreadAcc<Codec> acc;
  const uint64_t begin = block * t.per_block;
  const uint64_t end = lesser(begin + t.per_block, t.numel);
  for (uint64_t i = begin + tid; i < end; i += threads) {
    const Bits b = base[element_offset(t, i)];
    acc.add(b);
    tally.add(Codec::key(b));
  }
  return acc.to_partial();
}

// Thread `tid` of `threads` in block `block` of tensor t (counted from the
// tensor's first block): what it contributes, as a Partial, or as a
// CastPartial when the frame counts cast losses (floating dtypes only: the
// others' below-counts stay 0 and the host reads none).
template <typename P = Partial>
OVF_HD P thread_scan(const TensorEntry& t, uint64_t block, uint32_t tid, uint32_t threads) {
  return visit_codec(t.dtype, identity_of<P>(), [&](auto codec) {
    using Codec = decltype(codec);
    auto scan = [&](auto& tally) {
      return t.contiguous ? scan_contiguous<Codec>(t, block, tid, threads, tally)
                          : scan_strided<Codec>(t, block, tid, threads, tally);
    };
    if constexpr (std::is_same_v<P, CastPartial> && Codec::kFloating) {
      CastTally<Codec> tally(t.cast_limits);
      const Partial stats = scan(tally);
      return tally.finish(stats);
    } else {
      NoTally none;
      return P{scan(none)};  // a CastPartial's below-counts zero
    }
  });
}

}  // namespace ovf::cuda

#endif  // OVF_CUDA_FRAME_SCAN_CUH
