// When an op's records (and the gradient lines of --backward) are judged. An outermost op (with the
// ops nested in it) is one group: its device tensors' statistics go into one device batch (the
// values an in-place op overwrites into a batch enqueued at its start), and
// the group is judged once they are known:
//   - CPU tensors only: at the outermost op's end, as before;
//   - exact device mode: there too, after one wait for the group's batches;
//   - fast device mode: queued, and judged in the order the groups ended when
//     their statistics have arrived -- at a later op, a module hook, at the
//     latest at a batch boundary or the session's end (flush_op_groups). At
//     most kMaxGroupsInFlight wait at once: one more waits for the oldest.
// The records keep the batch their op ran in, however late they are judged.
#ifndef OVF_OP_GROUPS_H
#define OVF_OP_GROUPS_H

#include <ATen/core/Tensor.h>

#include <cstdint>

#include "op_pending.h"

namespace ovf {

constexpr size_t kMaxGroupsInFlight = 64;

// Judges the queued groups whose statistics arrived (never waits; skips while
// another thread judges). Cheap when none is queued.
void poll_op_groups();

// Waits for every queued group and judges it. The caller must not hold a lock
// the handler of op events takes (the interpreter's: release it first).
void flush_op_groups();

// Waits (host synchronisations) for op statistics so far -- exact mode's, the
// window's, the flushes' -- and the groups that had device statistics (tests
// count them, OVF_TEST_DEFER).
struct OpGroupCounts {
  uint64_t waits;
  uint64_t device_groups;
};
OpGroupCounts op_group_counts();

// A line of its own -- a module output's gradient (gradients.h) -- judged as
// a group of its own: at once on the CPU, after one wait in exact mode,
// queued in fast mode. Its record is `line` with the tensor's statistics;
// nothing when they cannot be read.
void queue_tensor_line(const ovf_record& line, const at::Tensor& tensor);

namespace op_detail {

// A cleared EndedOp for an op that ends inside this thread's outermost op (or
// is it), in the group; drop_ended_op() takes it back (the op could not be read).
EndedOp& next_ended_op();
void drop_ended_op();

// This thread's outermost op ended: its group is judged or queued.
void end_outermost_op();

}  // namespace op_detail
}  // namespace ovf

#endif  // OVF_OP_GROUPS_H
