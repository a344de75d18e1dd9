#include "weight_cache.h"

#include "device_engine.h"
#include "stats_cpu.h"
#include "torch_tensor.h"

namespace ovf {
namespace {

int64_t version_of(const at::Tensor& t) {
  return t.is_inference() ? -1 : static_cast<int64_t>(t._version());
}

}  // namespace

void WeightCache::Entry::remember(const at::Tensor& t, const TensorView& view, int64_t v) {
  impl = t.unsafeGetTensorImpl();
  data = view.data;
  version = v;
  dtype = view.dtype;
  device = device_of(t);
}

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
  const int64_t version = version_of(t);
  Entry& cache = entries_[label];
  const bool fresh = cache.describes(t, view, version);
  if (!fresh) {
    cache.remember(t, view, version);
    cache.stats = compute_stats_cpu(view);
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
  const int64_t version = version_of(t);
  Entry& cache = entries_[label];
  const ovf_dtype against = headroom_dtype();
  const bool same = cache.describes(t, view, version) && cache.headroom_against == against;
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
  cache.remember(t, view, version);
  cache.headroom_against = against;
  cache.stats = Stats{};
  cache.batch = frame.pending().batch;
  cache.index = frame.pending().lines.back().second;
}

}  // namespace ovf
