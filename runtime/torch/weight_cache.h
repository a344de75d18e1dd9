// Weight lines of module frames: a parameter's statistics are computed again
// only when its version counter, storage or identity changed.
#ifndef OVF_WEIGHT_CACHE_H
#define OVF_WEIGHT_CACHE_H

#include <ATen/core/Tensor.h>

#include <cstdint>
#include <memory>
#include <unordered_map>

#include "frame_builder.h"

namespace ovf {

class WeightCache {
 public:
  // Adds `param` as a WEIGHT line labelled `label_id` (cached stats are flagged
  // OVF_FLAG_WEIGHT_CACHED), with its headroom when control.headroom_dtype asks.
  void add_line(FrameBuilder& frame, uint32_t label_id, const at::Tensor& param);
  void clear() { entries_.clear(); }

 private:
  struct Entry {
    const void* impl = nullptr;
    const void* data = nullptr;
    int64_t version = -1;
    Stats stats;
    ovf_dtype dtype = OVF_DTYPE_UNKNOWN;
    DeviceId device;
    ovf_dtype headroom_against = OVF_DTYPE_UNKNOWN;  // what `underflow` was counted against
    uint64_t underflow = 0;
    // A device parameter's statistics on their way (device_engine.h): read
    // into `stats` once they arrived, while the version still matches.
    std::shared_ptr<DeviceStatsBatch> batch;
    int index = -1;

    // Whether it describes `t` as it is now: the same tensor, memory and
    // version counter (a tensor without one, an inference tensor, never matches).
    bool describes(const at::Tensor& t, const TensorView& view, int64_t version) const {
      return version >= 0 && impl == t.unsafeGetTensorImpl() && data == view.data &&
             this->version == version;
    }
    // Makes it describe `t` (its statistics are the caller's to set).
    void remember(const at::Tensor& t, const TensorView& view, int64_t version);
  };
  void add_device_line(FrameBuilder& frame, uint32_t label_id, const at::Tensor& param);
  std::unordered_map<uint32_t, Entry> entries_;  // by label id
};

}  // namespace ovf

#endif  // OVF_WEIGHT_CACHE_H
