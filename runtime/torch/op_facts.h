// What the op observer needs to know about an ATen operator, learnt once per
// operator (by its registry name, a stable C string) and cached per thread.
#ifndef OVF_OP_FACTS_H
#define OVF_OP_FACTS_H

#include <ATen/record_function.h>

#include <cstdint>
#include <vector>

namespace ovf {

struct OpFacts {
  uint32_t name_id = 0;  // interned "aten::log"
  bool writes_no_values =
      false;              // its outputs hold no values yet (empty, resize_, views made in place)
  bool in_place = false;  // "aten::add_", or an out= overload: its output is an input it writes
  // Its outputs hold zeros only (zero_, zeros, zeros_like, new_zeros) and so
  // does the fill_ it runs inside it: their statistics need no read.
  bool writes_zeros = false;
  // Per input position: whether the op writes that argument (schema alias info,
  // e.g. native_batch_norm's running_var) and whether the old values flow into
  // the result (add_ yes; copy_, fill_, zero_ and out= arguments no). Inputs are
  // judged as they were before the op ran: written ones at its start.
  std::vector<bool> written;
  std::vector<bool> old_values_read;
  // Only composed of other operators (CompositeImplicitAutograd, no kernel of
  // its own on the CPU: aten::linear, conv2d, batch_norm): it writes no values
  // itself, so what it returns is what an op inside it made, as that op left it.
  bool composite = false;
  // Its outputs depend on no tensor's values, only on numbers it was given
  // (ones, full, arange, fill_ with a number, zeros_like): "only constants".
  bool makes_constant = false;
  // It draws random numbers (randn, dropout, bernoulli_): never "only constants".
  bool random = false;
  // It writes arguments its schema does not mark as written, without moving
  // their version counters: torch's native_batch_norm updates running_mean and
  // running_var so (2.6 and 2.14, checked). Nothing is judged from that; only
  // what was seen finite there is forgotten (known_finite.h).
  bool writes_unmarked = false;
  // Run again on the same arguments for a verdict (op_verdict.h): an ATen op
  // (another namespace's may talk to other ranks, _c10d_functional's do, or have
  // effects of its own) whose schema is known, that writes no argument and draws
  // no random numbers (a re-run would not see the inputs the op saw, or would make
  // other values by design).
  bool rerun = false;
  // The same for an op whose only writes are the unmarked ones, made only in
  // training: batch norm's running statistics. A call given training=False
  // (evaluation, with running statistics) writes nothing and runs again.
  // `training`: that argument's index.
  bool rerun_unless_training = false;
  int training = -1;
};

// Whether this call of the op can run again for a verdict (rerun above).
bool reruns(const OpFacts& facts, const at::RecordFunction& fn);

// The facts of the op `fn` runs. The reference stays valid for the thread's life.
const OpFacts& op_facts(const at::RecordFunction& fn);

}  // namespace ovf

#endif  // OVF_OP_FACTS_H
