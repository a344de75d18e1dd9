// The op observer: with control.observe set, every ATen op's outputs are checked
// with the one-pass stats (LibTorch RecordFunction callbacks), so the stop comes
// inside a module's forward, right after the op that produced a NaN/Inf, with
// the forward's Python frame alive. Backward ops are named by the forward op
// (and module) whose gradient they compute.
#ifndef OVF_OP_OBSERVER_H
#define OVF_OP_OBSERVER_H

#include <cstdint>

#include "ovf/ring.h"

namespace ovf {

// Registers or removes the RecordFunction callbacks to match control.observe.
// Cheap when nothing changed; the hooks call it, so a debugger that writes the
// control block arms ops on a live process at its next module forward.
void sync_op_observer();

// Called after an op's output fired stop events (after ovf_stop_event), on the
// thread that ran the op, inside the op's RecordFunction callback: it must not
// throw. Drivers act on events here; nullptr (the default) does nothing.
using OpEventHandler = void (*)(const ovf_record& record, uint32_t events);
void set_op_event_handler(OpEventHandler handler);

// With the backward pass observed, each forward op's place in the program
// ("train.py:16 in contrastive", interned) is noted when it runs, so that a
// NaN its gradient makes names the forward line. Python programs provide it;
// nullptr (the default) notes none.
using LocationProvider = uint32_t (*)();
void set_location_provider(LocationProvider provider);

// Ops that run for a node of a torch.compile'd graph (_compile_ops.py runs a graph's
// nodes again eagerly where they made a NaN/Inf): their module and program line are
// the node's, given here, not the module stack's and the Python frame's (which are
// the compiled code's); a backward graph's node runs in the backward pass, as the
// gradient of forward op `gradient_of` (interned "aten::sqrt", or OVF_NO_ID). OVF_NO_ID
// for both and not backward: back to those. This thread only.
void set_op_site(uint32_t module_id, uint32_t location_id, bool backward = false,
                 uint32_t gradient_of = OVF_NO_ID);
bool op_site_given();

}  // namespace ovf

#endif  // OVF_OP_OBSERVER_H
