#include "torch_tensor.h"

#include <ATen/FunctionalTensorWrapper.h>
#include <torch/version.h>  // which scalar types this torch has

#include "device_batch.h"
#include "device_engine.h"
#include "own_ops.h"
#include "recent_stats.h"
#include "row_scan.h"
#include "stats_cpu.h"

namespace ovf {

ovf_dtype to_ovf_dtype(at::ScalarType t) {
  switch (t) {
    case at::kDouble: return OVF_DTYPE_FLOAT64;
    case at::kFloat: return OVF_DTYPE_FLOAT32;
    case at::kHalf: return OVF_DTYPE_FLOAT16;
    case at::kBFloat16: return OVF_DTYPE_BFLOAT16;
    case at::kComplexFloat: return OVF_DTYPE_COMPLEX64;
    case at::kComplexDouble: return OVF_DTYPE_COMPLEX128;
    case at::kLong: return OVF_DTYPE_INT64;
    case at::kInt: return OVF_DTYPE_INT32;
    case at::kShort: return OVF_DTYPE_INT16;
    case at::kChar: return OVF_DTYPE_INT8;
    case at::kByte: return OVF_DTYPE_UINT8;
    case at::kBool: return OVF_DTYPE_BOOL;
    case at::kFloat8_e4m3fn: return OVF_DTYPE_FLOAT8_E4M3;
    case at::kFloat8_e5m2: return OVF_DTYPE_FLOAT8_E5M2;
    case at::kUInt16: return OVF_DTYPE_UINT16;
    case at::kUInt32: return OVF_DTYPE_UINT32;
    case at::kUInt64: return OVF_DTYPE_UINT64;
    default: return OVF_DTYPE_UNKNOWN;
  }
}

DeviceId device_id_of(const at::Tensor& t) {
  const auto d = t.device();
  if (d.is_cpu()) return {0, -1};
  if (d.is_cuda()) return {kCudaDeviceType, static_cast<int8_t>(d.index())};
  return {255, static_cast<int8_t>(d.has_index() ? d.index() : -1)};
}

bool device_view(const at::Tensor& t, TensorView* view) {
  try {
    if (!t.defined() || t.layout() != at::kStrided || t.is_quantized()) return false;
    const ovf_dtype dtype = to_ovf_dtype(t.scalar_type());
    if (dtype == OVF_DTYPE_UNKNOWN || !t.has_storage()) return false;
    // Fake tensors (Dynamo tracing), tensor subclasses that dispatch to Python
    // and functionalization wrappers stand for values they do not hold: their
    // memory is not read (it is on the meta device, or elsewhere).
    if (t.unsafeGetTensorImpl()->is_python_dispatch() ||
        at::functionalization::impl::isFunctionalTensor(t) || t.device().is_meta() ||
        t.storage().device() != t.device()) {
      return false;
    }
    view->data = t.numel() == 0 ? nullptr : t.data_ptr();
    view->dtype = dtype;
    view->ndim = static_cast<int>(t.dim());
    view->sizes = t.sizes().data();
    view->strides = t.strides().data();
    view->negated = t.is_neg();
    return true;
  } catch (const std::exception&) {
    return false;  // tensors without storage (functorch wrappers, ...) throw on data_ptr
  }
}

bool readable_view(const at::Tensor& t, TensorView* view) {
  return t.defined() && t.device().is_cpu() && device_view(t, view);
}

void add_tensor_line(FrameBuilder& frame, ovf_record_kind kind, uint32_t label,
                     const at::Tensor& t) {
  TensorView view;
  if (uses_device_engine(t)) {
    add_device_line(frame, kind, label, t);
  } else if (readable_view(t, &view)) {
    // A module's inputs and outputs are mostly tensors an earlier hook of this
    // forward read (recent_stats.h); its parameters are read at every forward.
    const bool may_be_recent = kind == OVF_KIND_INPUT || kind == OVF_KIND_OUTPUT;
    const bool casts = cast_counts_asked();
    const Stats* known = may_be_recent ? recent_stats(t, view, casts) : nullptr;
    const Stats stats = frame.add_tensor(kind, label, view, device_id_of(t), known);
    if (may_be_recent && known == nullptr) remember_stats(t, view, casts, stats);
  } else {
    frame.add_value(kind, label, OVF_FLAG_NO_DATA);
  }
}

bool stats_view(const at::Tensor& t, TensorView* view) {
  return uses_device_engine(t) ? device_view(t, view) : readable_view(t, view);
}

Stats tensor_stats(const at::Tensor& t, const TensorView& view, StatsUse use) {
  const bool with_casts = use == StatsUse::kLine && cast_counts_asked();
  return uses_device_engine(t) ? device_stats_now(t, view.dtype, with_casts)
                               : compute_stats_cpu(view, with_casts);
}

ovf_record tensor_line(ovf_record_kind kind, uint32_t label_id, const at::Tensor& t,
                       uint32_t flags) {
  TensorView view;
  Stats stats;
  if (!stats_view(t, &view) || !(stats = tensor_stats(t, view, StatsUse::kLine)).has_stats)
    return make_value_line(kind, label_id, flags | OVF_FLAG_NO_DATA);
  ovf_record line = make_line(kind, label_id, stats, view.dtype, device_id_of(t), flags);
  if (rows_wanted(stats)) set_rows(line, uses_device_engine(t) ? tensor_rows(t) : find_rows(view));
  return line;
}

Rows tensor_rows(const at::Tensor& t) {
  TensorView view;
  if (t.device().is_cpu()) return readable_view(t, &view) ? find_rows(view) : Rows{};
  if (t.dim() < 1 || t.size(0) > kMaxRowsScanned) return {};  // not worth the copy
  if (device_capturing(t.device())) return {};                // no copy may run
  try {
    OwnOpsGuard guard;
    const at::Tensor host = t.to(at::kCPU);
    return readable_view(host, &view) ? find_rows(view) : Rows{};
  } catch (const std::exception&) {
    return {};  // out of host memory, a device error: rows not measured
  }
}

c10::optional<uint32_t> version_of(const at::Tensor& t) {
  const c10::VariableVersion& counter = t.unsafeGetTensorImpl()->version_counter();
  if (!counter.enabled()) return c10::nullopt;
  return counter.current_version();
}

bool tensor_nonfinite(const at::Tensor& t) {
  TensorView view;
  return stats_view(t, &view) && tensor_stats(t, view, StatsUse::kJudging).nonfinite();
}

}  // namespace ovf
