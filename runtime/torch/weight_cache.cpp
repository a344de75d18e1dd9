#include "weight_cache.h"

#include "stats_cpu.h"
#include "torch_tensor.h"

namespace ovf {

void WeightCache::add_line(FrameBuilder& frame, uint32_t label, const at::Tensor& t) {
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

}  // namespace ovf
