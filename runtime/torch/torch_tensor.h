// at::Tensor -> what the core reads: the one place that knows torch's tensor
// types, and the way a tensor's statistics are computed wherever it lives.
#ifndef OVF_TORCH_TENSOR_H
#define OVF_TORCH_TENSOR_H

#include <ATen/core/Tensor.h>
#include <c10/util/Optional.h>

#include "frame_builder.h"
#include "record.h"
#include "row_scan.h"
#include "stats.h"

namespace ovf {

ovf_dtype to_ovf_dtype(at::ScalarType type);
DeviceId device_id_of(const at::Tensor& tensor);

// Fills `view` for a tensor with real memory of a dtype ovf reads (strided,
// not quantized, with storage, no fake or functional wrapper), on any
// device: `data` is then a device address. Never throws.
bool device_view(const at::Tensor& tensor, TensorView* view);
// The same, for a tensor whose memory this process can read on the CPU.
bool readable_view(const at::Tensor& tensor, TensorView* view);

// The view of `tensor` that the engine computing its statistics reads
// (device_view for the device engine, readable_view for the CPU engine).
bool stats_view(const at::Tensor& tensor, TensorView* view);
// What statistics are read for. A line of the ring holds the cast counts when
// they are asked for (--cast-shares); a judgement (is an op's input finite? a
// NaN constant?) reads only the NaN and Inf counts and skips them: the inputs an
// optimizer's in-place ops write are judged before every write. (A device batch
// counts casts for all its tensors or for none: request_stats ignores it there.)
enum class StatsUse { kLine, kJudging };

// Its statistics by that engine (a device's waited for); `view` from stats_view.
Stats tensor_stats(const at::Tensor& tensor, const TensorView& view, StatsUse use);

// A tensor's statistics as a line of `kind` (make_line), or a "no data" line
// when its memory cannot be read. A device tensor's come from the device
// engine, waited for (one synchronisation: ops, gradients, steps, checkpoints).
ovf_record tensor_line(ovf_record_kind kind, uint32_t label_id, const at::Tensor& tensor,
                       uint32_t flags = 0);

// The rows of the tensor's first dimension that hold NaN/Inf (row_scan.h),
// wherever it lives: a device tensor is copied to host memory for it (at the
// event only: for the non-finite lines that come before the session's first
// non-finite value is set). Extent 0 where it cannot be read, or while the
// device is capturing a CUDA graph (no copy may run then).
Rows tensor_rows(const at::Tensor& tensor);

// The tensor's version, or nullopt where it keeps none (inference tensors).
c10::optional<uint32_t> version_of(const at::Tensor& tensor);

// Whether a readable tensor holds a NaN or Inf (false when unreadable).
bool tensor_nonfinite(const at::Tensor& tensor);

// Adds the tensor as a frame line: its stats and headroom, or a "no data" line.
void add_tensor_line(FrameBuilder& frame, ovf_record_kind kind, uint32_t label_id,
                     const at::Tensor& tensor);

}  // namespace ovf

#endif  // OVF_TORCH_TENSOR_H
