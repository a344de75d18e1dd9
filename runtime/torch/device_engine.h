// Which tensors the device engine computes (device_batch.h), and the two ways
// it is used: a frame's lines, pending until the frame's batch arrives; a
// single line (a gradient, an optimizer step, a checkpoint), waited for at
// once. (Op outputs go in their outermost op's batch: op_groups.h.)
#ifndef OVF_DEVICE_ENGINE_H
#define OVF_DEVICE_ENGINE_H

#include <ATen/core/Tensor.h>

#include <memory>

#include "device_batch.h"
#include "frame_builder.h"

namespace ovf {

// A tensor on a device other than the CPU; CPU tensors too where the test
// knob OVF_TEST_DEFER=N asks (their statistics then go through the portable
// backend and each frame's arrive only after N polls: late on purpose).
bool uses_device_engine(const at::Tensor& tensor);

// Adds `tensor` as a PENDING line of the frame's batch (made at the frame's
// first device tensor), or a "no data" line where its memory is not real.
void add_device_line(FrameBuilder& frame, ovf_record_kind kind, uint32_t label_id,
                     const at::Tensor& tensor);

// A new batch for device statistics (late on purpose under OVF_TEST_DEFER).
std::shared_ptr<TensorStatsBatch> new_device_batch();

// A device tensor's statistics, waited for (has_stats false: not computed).
Stats device_stats_now(const at::Tensor& tensor, ovf_dtype dtype);

}  // namespace ovf

#endif  // OVF_DEVICE_ENGINE_H
