// The op observer: with control.observe set, every ATen op's outputs are checked
// with the one-pass stats (LibTorch RecordFunction callbacks), so the stop comes
// inside a module's forward, right after the op that produced a NaN/Inf, with
// the forward's Python frame alive. Backward ops are named by the forward op
// (and module) whose gradient they compute.
#ifndef OVF_OP_OBSERVER_H
#define OVF_OP_OBSERVER_H

namespace ovf {

// Registers or removes the RecordFunction callbacks to match control.observe.
// Cheap when nothing changed; the hooks call it, so a debugger that writes the
// control block arms ops on a live process at its next module forward.
void sync_op_observer();

}  // namespace ovf

#endif  // OVF_OP_OBSERVER_H
