// Which tensors the device engine computes (device_batch.h), and the ways it
// is used: a frame's lines, pending until the frame's batch arrives; lines
// that share a batch of their own (request_stats: an op group's, op_groups.h;
// an optimizer step's); a single line waited for at once (device_stats_now:
// a checkpoint, an op's inputs at an event).
#ifndef OVF_DEVICE_ENGINE_H
#define OVF_DEVICE_ENGINE_H

#include <ATen/core/Tensor.h>

#include <memory>

#include "device_batch.h"
#include "frame_builder.h"
#include "torch_tensor.h"

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

// A tensor's statistics: computed at once (a CPU tensor), or a line of a
// device batch, there once the batch has arrived.
struct StatsRef {
  std::shared_ptr<TensorStatsBatch> batch;  // null: `known` holds them
  int index = -1;
  Stats known;
  Stats get() const { return batch ? batch->result(index) : known; }
};

// `tensor`'s statistics (`view`: its stats_view): computed now where it is
// not the device engine's, else added to `*batch` (made here when null), to be
// read after the caller submits and waits for it. `use` (torch_tensor.h) is
// the CPU engine's: a batch counts casts for all its tensors or for none.
StatsRef request_stats(const at::Tensor& tensor, const TensorView& view,
                       std::shared_ptr<TensorStatsBatch>* batch, StatsUse use);

// A device tensor's statistics, waited for (has_stats false: not computed).
Stats device_stats_now(const at::Tensor& tensor, ovf_dtype dtype, bool with_casts = false);

}  // namespace ovf

#endif  // OVF_DEVICE_ENGINE_H
