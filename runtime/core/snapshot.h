// The event snapshot (ring.h: ovf_snapshot): where the program was when an
// event fired. The core owns the buffer and takes it at every event, before
// the stop hook; a driver that knows the program's stack (the Python driver)
// fills it in. Readers find it through ovf_state.snapshot_addr.
#ifndef OVF_SNAPSHOT_H
#define OVF_SNAPSHOT_H

#include <cstdint>
#include <string>

#include "ovf/ring.h"

namespace ovf {

// Fills frames and locals of `snapshot` (counts start at 0). Runs on the
// thread that made the value, inside the event; must not throw.
using SnapshotWriter = void (*)(ovf_snapshot* snapshot);
void set_snapshot_writer(SnapshotWriter writer);

// Takes the snapshot of the event whose record is `event_seq` (nothing
// without a writer). Called by the commit step.
void take_snapshot(uint64_t event_seq);

// "model.py:66 in forward": the program's own innermost frame when the event
// whose record is `event_seq` fired, or "" (no snapshot of that event, no
// frame of the program's). The file as the snapshot holds it (its base name).
std::string user_line_at(uint64_t event_seq);

}  // namespace ovf

#endif  // OVF_SNAPSHOT_H
