// The host half of one fused launch: turns a frame's tensor views into the
// launch table (frame_scan.cuh) and finished Partials into ovf::Stats. Plain
// C++ with no CUDA call, so the host tests drive it too.
#ifndef OVF_CUDA_FRAME_PLAN_H
#define OVF_CUDA_FRAME_PLAN_H

#include <cstdint>
#include <vector>

#include "frame_scan.cuh"
#include "stats.h"

namespace ovf::cuda {

// Bytes of one element for the dtypes the CUDA backend reads, 0 for others.
int element_size(ovf_dtype dtype);

class FramePlan {
 public:
  // Block sizing: a tensor gets one block per kBytesPerBlock of data, at most
  // kMaxBlocksPerTensor (enough to fill any current GPU several times over; the
  // second kernel then combines at most that many partials per tensor).
  static constexpr uint64_t kBytesPerBlock = 64 * 1024;
  static constexpr uint64_t kMaxBlocksPerTensor = 4096;

  // Starts a frame; with_casts: it also counts what casts to the narrow types
  // would lose (its partials are CastPartials).
  void clear(bool with_casts = false);
  bool with_casts() const { return with_casts_; }
  // Adds a view whose data is device memory; returns its index in the frame,
  // or -1 when this backend cannot read it (a dtype it does not know, more
  // than kMaxKernelDims dimensions after merging, data not aligned to its
  // element size, a null pointer): the caller uses another backend for it.
  int add(const TensorView& view);

  const std::vector<TensorEntry>& table() const { return table_; }
  uint32_t tensors() const { return static_cast<uint32_t>(table_.size()); }
  uint32_t total_blocks() const { return total_blocks_; }

  // Tensor `index`'s statistics from its combined Partial (or CastPartial:
  // with the cast losses, for floating dtypes).
  Stats finish(int index, const Partial& p) const;
  Stats finish(int index, const CastPartial& p) const;

 private:
  struct Meta {
    uint64_t numel;   // the view's element count
    uint64_t repeat;  // broadcast factor (MergedDims::repeat)
    ovf_dtype dtype;
    bool negated;
  };
  std::vector<TensorEntry> table_;
  std::vector<Meta> meta_;
  uint32_t total_blocks_ = 0;
  bool with_casts_ = false;
};

}  // namespace ovf::cuda

#endif  // OVF_CUDA_FRAME_PLAN_H
