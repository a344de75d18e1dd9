// Dimension merging for the statistics engines (see dim_merge.h).
#include "dim_merge.h"

#include <utility>

namespace ovf {

bool merge_dims(int ndim, const int64_t* sizes, const int64_t* strides, MergedDims* out) {
  *out = MergedDims{};
  if (ndim < 0 || ndim > kMaxMergedDims) return false;
  int64_t size[kMaxMergedDims], stride[kMaxMergedDims];
  int nd = 0;
  for (int d = 0; d < ndim; ++d) {
    if (sizes[d] < 0) return false;
    if (sizes[d] == 0) return true;  // empty: ndim 0, numel 0
  }
  for (int d = 0; d < ndim; ++d) {
    if (sizes[d] == 1) continue;
    if (strides[d] == 0) {
      out->repeat *= static_cast<uint64_t>(sizes[d]);
      continue;
    }
    int64_t s = strides[d];
    if (s < 0) {
      out->offset += (sizes[d] - 1) * s;
      s = -s;
    }
    size[nd] = sizes[d];
    stride[nd] = s;
    ++nd;
  }
  // Largest stride first (insertion sort: nd is small). Equal strides only come
  // from overlapping views; their order does not matter.
  for (int i = 1; i < nd; ++i) {
    for (int j = i; j > 0 && stride[j] > stride[j - 1]; --j) {
      std::swap(stride[j], stride[j - 1]);
      std::swap(size[j], size[j - 1]);
    }
  }
  int merged = 0;
  for (int i = 0; i < nd; ++i) {
    if (merged > 0 && stride[merged - 1] == stride[i] * size[i]) {
      size[merged - 1] *= size[i];
      stride[merged - 1] = stride[i];
    } else {
      size[merged] = size[i];
      stride[merged] = stride[i];
      ++merged;
    }
  }
  if (merged == 0) {  // one element (every dimension size 1 or broadcast)
    size[0] = 1;
    stride[0] = 1;
    merged = 1;
  }
  out->ndim = merged;
  out->numel = 1;
  for (int d = 0; d < merged; ++d) {
    out->sizes[d] = size[d];
    out->strides[d] = stride[d];
    out->numel *= static_cast<uint64_t>(size[d]);
  }
  return true;
}

}  // namespace ovf
