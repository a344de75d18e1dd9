// A strided view reduced to the fewest dimensions that address the same
// elements, for the statistics engines (the CPU scan and the CUDA kernel's
// launch table): statistics do not depend on the order of elements, so
// dimensions may be reordered, flipped and merged freely.
#ifndef OVF_DIM_MERGE_H
#define OVF_DIM_MERGE_H

#include <cstdint>

namespace ovf {

// torch's own limit on a tensor's rank: the most dimensions a view has, and so
// the most that can remain after merging (engines may take fewer: the CUDA
// kernel indexes at most cuda::kMaxKernelDims).
constexpr int kMaxMergedDims = 64;

struct MergedDims {
  int ndim = 0;                     // 0 only for an empty view; a single element is {1}, {1}
  int64_t sizes[kMaxMergedDims]{};  // outermost (largest stride) first
  int64_t strides[kMaxMergedDims]{};
  int64_t offset = 0;   // elements from the view's data pointer to its lowest element
  uint64_t numel = 0;   // positions walked: the product of sizes (0 for an empty view)
  uint64_t repeat = 1;  // times each position counts: the product of broadcast sizes
};

// Drops size-1 dimensions; takes broadcast (stride 0) dimensions out into
// `repeat` (they re-read the same elements); flips negative strides (moving the
// start to the lowest element); sorts by stride and merges a dimension into the
// next when it steps exactly over that one's span. Contiguous memory in any
// permutation becomes one dimension of stride 1. False for a rank above
// kMaxMergedDims or a negative size.
bool merge_dims(int ndim, const int64_t* sizes, const int64_t* strides, MergedDims* out);

}  // namespace ovf

#endif  // OVF_DIM_MERGE_H
