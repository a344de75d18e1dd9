// at::Tensor -> ovf::TensorView: the one place that knows torch's tensor types.
#ifndef OVF_TORCH_TENSOR_H
#define OVF_TORCH_TENSOR_H

#include <ATen/core/Tensor.h>

#include "ovf/monitor.h"
#include "ovf/stats.h"

namespace ovf {

ovf_dtype to_ovf_dtype(at::ScalarType type);
DeviceId device_of(const at::Tensor& tensor);

// Fills `view` for a tensor whose memory this process can read on the CPU
// (strided, not quantized, with storage). Never throws.
bool readable_view(const at::Tensor& tensor, TensorView* view);

// Adds the tensor as a line: its stats, or a "no data" line when unreadable.
void add_tensor_line(FrameBuilder& frame, ovf_record_kind kind, uint32_t label_id, const at::Tensor& tensor);

}  // namespace ovf

#endif  // OVF_TORCH_TENSOR_H
