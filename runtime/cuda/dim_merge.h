// A strided view reduced to the fewest dimensions that address the same
// elements, for the CUDA statistics kernel: statistics do not depend on the
// order of elements, so dimensions may be reordered, flipped and merged freely.
// Plain C++ (host side of the CUDA backend, tested on the host).
#ifndef OVF_CUDA_DIM_MERGE_H
#define OVF_CUDA_DIM_MERGE_H

#include <cstdint>

namespace ovf::cuda {

// The most dimensions the kernel indexes after merging; a view that keeps more
// (a rare, heavily sliced one) is left to the portable backend.
constexpr int kMaxMergedDims = 8;

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
// permutation becomes one dimension of stride 1. False when more than
// kMaxMergedDims dimensions remain or a size is negative.
bool merge_dims(int ndim, const int64_t* sizes, const int64_t* strides, MergedDims* out);

}  // namespace ovf::cuda

#endif  // OVF_CUDA_DIM_MERGE_H
