#include "weight_cache.h"

#include "device_engine.h"
#include "stats_cpu.h"
#include "torch_tensor.h"

namespace ovf {

void WeightCache::add_line(FrameBuilder& frame, uint32_t label, const at::Tensor& t) {
  if (uses_device_engine(t)) {
    add_device_line(frame, label, t);
    return;
  }
  TensorView view;
  if (!readable_view(t, &view)) {
    frame.add_value(OVF_KIND_WEIGHT, label, OVF_FLAG_NO_DATA);
    return;
  }
  const int64_t version = t.is_inference() ? -1 : static_cast<int64_t>(t._version());
  Entry& cache = entries_[label];
  const bool fresh = version >= 0 && cache.impl == t.unsafeGetTensorImpl() &&
                     cache.data == view.data && cache.version == version;
  if (!fresh) {
    cache.impl = t.unsafeGetTensorImpl();
    cache.data = view.data;
    cache.version = version;
    cache.stats = compute_stats_cpu(view);
    cache.dtype = view.dtype;
    cache.device = device_of(t);
  }
  frame.add_stats(OVF_KIND_WEIGHT, label, cache.stats, cache.dtype, cache.device,
                  fresh ? OVF_FLAG_WEIGHT_CACHED : 0);
  const ovf_dtype against = headroom_dtype();
  if (against != OVF_DTYPE_UNKNOWN) {
    if (!fresh || cache.headroom_against != against) {
      cache.underflow = headroom_underflow(view, against);
      cache.headroom_against = against;
    }
    frame.set_headroom(against, cache.underflow);
  }
}

void WeightCache::add_device_line(FrameBuilder& frame, uint32_t label, const at::Tensor& t) {
  TensorView view;
  if (!device_view(t, &view)) {
    frame.add_value(OVF_KIND_WEIGHT, label, OVF_FLAG_NO_DATA);
    return;
  }
  const int64_t version = t.is_inference() ? -1 : static_cast<int64_t>(t._version());
  Entry& cache = entries_[label];
  const ovf_dtype against = headroom_dtype();
  const bool same = version >= 0 && cache.impl == t.unsafeGetTensorImpl() &&
                    cache.data == view.data && cache.version == version &&
                    cache.headroom_against == against;
  if (same && cache.batch && cache.batch->ready()) {
    cache.stats = cache.batch->result(cache.index);
    cache.underflow = cache.batch->underflow(cache.index);
    cache.batch.reset();
  }
  if (same && !cache.batch && cache.stats.has_stats) {
    frame.add_stats(OVF_KIND_WEIGHT, label, cache.stats, cache.dtype, cache.device,
                    OVF_FLAG_WEIGHT_CACHED);
    if (against != OVF_DTYPE_UNKNOWN) frame.set_headroom(against, cache.underflow);
    return;
  }
  ovf::add_device_line(frame, OVF_KIND_WEIGHT, label, t);
  if (!(frame.records().back().flags & OVF_FLAG_PENDING)) return;  // "no data", or truncated
  cache.impl = t.unsafeGetTensorImpl();
  cache.data = view.data;
  cache.version = version;
  cache.dtype = view.dtype;
  cache.device = device_of(t);
  cache.headroom_against = against;
  cache.stats = Stats{};
  cache.batch = frame.pending().batch;
  cache.index = frame.pending().lines.back().second;
}

}  // namespace ovf
