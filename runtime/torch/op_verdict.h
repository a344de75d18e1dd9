// The verdict on an op that produced a NaN/Inf from finite inputs: the op is run
// again on the same arguments, twice on its own device and once in float64 on
// the CPU, and one line says which of three it is -- the math itself (float64
// makes it too), the dtype's range or precision (float64 does not), or neither
// (the same inputs give another result: the hardware or a racy kernel). Stored
// in the record's verdict_id (ring.h), so debuggers and cores read it too.
#ifndef OVF_OP_VERDICT_H
#define OVF_OP_VERDICT_H

#include <cstdint>

#include "op_pending.h"
#include "stats.h"

namespace ovf {
namespace op_detail {

// The verdict on output `line` (statistics `made`) of the producing op `e`,
// interned; OVF_NO_ID once a process has given its first kVerdicts (each costs
// three runs of the op and a float64 copy of its inputs).
uint32_t op_verdict(const EndedOp& e, const OutputLine& line, const Stats& made);

constexpr int kVerdicts = 8;

// Whether this thread is running an op again for a verdict: the op observer
// leaves those runs alone.
bool rerunning();

}  // namespace op_detail
}  // namespace ovf

#endif  // OVF_OP_VERDICT_H
