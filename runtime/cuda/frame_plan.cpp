// Launch-table construction for the fused statistics kernel (see frame_plan.h).
#include "frame_plan.h"

#include <algorithm>
#include <cstring>
#include <limits>

#include "partial_stats.h"

namespace ovf::cuda {

int element_size(ovf_dtype dtype) {
  return visit_codec(dtype, 0, [](auto codec) {
    return static_cast<int>(sizeof(typename decltype(codec)::Bits));
  });
}

void FramePlan::clear(bool with_casts) {
  table_.clear();
  meta_.clear();
  total_blocks_ = 0;
  with_casts_ = with_casts;
}

int FramePlan::add(const TensorView& view) {
  const int size = element_size(view.dtype);
  MergedDims merged;
  if (size == 0 || !merge_dims(view.ndim, view.sizes, view.strides, &merged) ||
      merged.ndim > kMaxKernelDims)
    return -1;
  const auto address = reinterpret_cast<uintptr_t>(view.data) + merged.offset * size;
  if (merged.numel > 0 && (view.data == nullptr || address % size != 0)) return -1;

  TensorEntry t;
  std::memset(&t, 0, sizeof t);
  t.data = reinterpret_cast<const void*>(address);
  t.numel = merged.numel;
  t.dtype = view.dtype;
  t.ndim = merged.ndim;
  std::copy(merged.sizes, merged.sizes + merged.ndim, t.sizes);
  std::copy(merged.strides, merged.strides + merged.ndim, t.strides);
  t.contiguous = merged.ndim == 1 && merged.strides[0] == 1;
  const CastBounds* bounds = with_casts_ ? cast_bounds(view.dtype) : nullptr;
  if (bounds != nullptr) std::copy(bounds->bits, bounds->bits + kCastCounts, t.cast_limits);

  uint64_t units = t.numel;  // what blocks divide among themselves
  if (t.contiguous) {
    const uint64_t count = kVectorBytes / size;  // elements per vector
    const uint64_t to_aligned = (kVectorBytes - address % kVectorBytes) % kVectorBytes / size;
    t.head = static_cast<uint32_t>(std::min<uint64_t>(to_aligned, t.numel));
    t.vectors = (t.numel - t.head) / count;
    t.tail = static_cast<uint32_t>((t.numel - t.head) % count);
    units = t.vectors;
  }
  uint64_t blocks = 0;
  if (t.numel > 0) {
    const uint64_t bytes = t.numel * size;
    blocks =
        std::clamp<uint64_t>((bytes + kBytesPerBlock - 1) / kBytesPerBlock, 1, kMaxBlocksPerTensor);
    t.per_block = std::max<uint64_t>(1, (units + blocks - 1) / blocks);
    // No block without work: recount after rounding per_block up. A tensor of
    // head and tail only still has its one block.
    blocks = std::max<uint64_t>(1, (units + t.per_block - 1) / t.per_block);
  }
  if (total_blocks_ + blocks > static_cast<uint64_t>(std::numeric_limits<int32_t>::max())) {
    return -1;  // beyond a grid's x dimension: never a real frame
  }
  t.first_block = total_blocks_;
  t.blocks = static_cast<uint32_t>(blocks);
  total_blocks_ += t.blocks;

  uint64_t numel = 1;
  for (int d = 0; d < view.ndim; ++d) numel *= static_cast<uint64_t>(view.sizes[d]);
  table_.push_back(t);
  meta_.push_back(Meta{numel, merged.repeat, view.dtype, view.negated});
  return static_cast<int>(table_.size()) - 1;
}

Stats FramePlan::finish(int index, const Partial& p) const {
  const Meta& m = meta_.at(static_cast<size_t>(index));
  return partial_to_stats(p, m.dtype, m.numel, m.repeat, m.negated);
}

Stats FramePlan::finish(int index, const CastPartial& p) const {
  Stats s = finish(index, p.stats);
  const Meta& m = meta_.at(static_cast<size_t>(index));
  if (cast_bounds(m.dtype) != nullptr) {
    uint64_t below[kCastCounts];
    for (int j = 0; j < kCastCounts; ++j) below[j] = p.below[j] * m.repeat;
    s.set_cast_from_below(below);
  }
  return s;
}

}  // namespace ovf::cuda
