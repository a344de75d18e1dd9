// The op observer's record of an op between its start and end callbacks, and of
// its outputs until they are judged: shared by the callbacks (op_observer.cpp),
// the judging (op_outputs.cpp) and the queue of ops whose device statistics
// have not arrived yet (op_groups.cpp).
#ifndef OVF_OP_PENDING_H
#define OVF_OP_PENDING_H

#include <ATen/record_function.h>

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "device_engine.h"
#include "op_facts.h"
#include "record.h"
#include "row_scan.h"
#include "stats.h"

namespace ovf {
namespace op_detail {

struct HeldRecord {
  ovf_record record;
  // Weak: it keeps the StorageImpl's address from going to a new tensor (whose
  // op would otherwise seem to return this value) without keeping its memory.
  c10::weak_intrusive_ptr<c10::StorageImpl> storage;
  // The why of the innermost op that produced the value, when it says more than
  // "from finite inputs": an enclosing op that returns the value tells it.
  uint32_t inner_why = OVF_NO_ID;
};

// An output a nested op scanned: a composite op (op_facts.h) returns what an op
// inside it made (aten::linear addmm's result, conv2d convolution's) and writes
// nothing itself, so its statistics are reused while the tensor is the same
// object at the same version. (An op with a kernel of its own may write into a
// nested op's output without a new version: addmm after its copy_ of the bias.) The weak
// reference keeps the object's address from being reused by a new tensor
// (without keeping its memory alive), so an equal address is the same tensor.
struct ScannedOutput {
  c10::weak_intrusive_ptr<c10::TensorImpl> impl;
  uint32_t version;
  const void* data;
  StatsRef stats;
};

// An input judged from its value at the op's start: one the op writes in place
// (read before the op overwrites it), or a 0-dim device tensor that may be a
// NaN/Inf handed to the op as a constant (a CPU one is judged at once).
struct StartInput {
  at::Tensor tensor;
  StatsRef stats;
  bool constant_candidate = false;
};

// An op between its start and end callbacks.
struct PendingOp {
  at::RecordFunctionHandle handle = 0;
  const OpFacts* facts = nullptr;
  uint32_t context = OVF_NO_ID;           // the module the op runs in
  uint64_t known_finite_epoch = 0;        // known_finite.h's at its start
  bool carried_in = false;                // an input held a NaN/Inf nobody meant (not deliberate)
  bool constant = false;                  // a NaN/Inf argument was deliberate (constant_origins.h)
  bool deliberate_nan = false;            // ... and one of those held a NaN
  bool only_constants = false;            // every value it read was made from constants alone
  uint32_t carried_gradient = OVF_NO_ID;  // the parameter whose .grad carried the first NaN in
  uint32_t carried_collective = OVF_NO_ID;  // the collective that wrote the NaN/Inf it carried in
  // The collective whose output it overwrote whole (Gloo's copy of a result into it, made
  // in work.wait() after the collective's own end): what it carries in is what that sent.
  uint32_t overwrote_received = OVF_NO_ID;
  std::vector<at::Tensor> inputs;  // inputs it only reads: judged at the end if needed
  // Its tensor arguments in order: an index into `inputs`, or -1 for one judged
  // at the start (written in place) or not at all (overwritten whole).
  std::vector<int32_t> operands;
  std::vector<StartInput> start_inputs;  // judged with the outputs
  std::vector<ScannedOutput> scanned;    // by the ops nested in this one
  // Its arguments as it was called, when this call can run again (reruns(),
  // op_facts.h): a producer is run on them again for its verdict (op_verdict.h).
  // `overload`: the schema's overload name (the facts are learnt per name:
  // add.Tensor's and add.Scalar's are one).
  bool rerun = false;
  std::vector<c10::IValue> arguments;
  std::string overload;
};

// A backward node (e.g. LogBackward0) whose inner ops are running.
struct BackwardNode {
  at::RecordFunctionHandle handle;
  uint32_t forward_op_id;
  uint32_t module_id;
  uint32_t location_id;  // where in the program the forward op ran
};

// One output of an ended op, until it is judged.
struct OutputLine {
  uint32_t label_id = OVF_NO_ID;
  uint32_t output_index = 0;  // its place among the op's output tensors
  bool readable = false;      // a view ovf reads (else it only returns a held value)
  ovf_dtype dtype = OVF_DTYPE_UNKNOWN;
  DeviceId device{};
  bool zeros = false;  // known to be zeros: no statistics read
  uint64_t numel = 0;
  StatsRef stats;
  // What an enclosing op may return (weak: see HeldRecord).
  c10::weak_intrusive_ptr<c10::StorageImpl> storage{c10::intrusive_ptr<c10::StorageImpl>()};
  bool only_constants_noted = false;  // noted at the end as made from constants alone
  Rows rows;  // the session's first non-finite output: its rows holding NaN/Inf (row_scan.h)
};

// An ended op, until its outputs are judged: at once where their statistics are
// known (CPU tensors, exact device mode), else when its outermost op's device
// batch arrives. Judged in the order the ops ended; an op nested in another
// ends first, and hands what it made to the enclosing op (`parent`).
struct EndedOp {
  PendingOp op;
  at::RecordFunctionHandle parent = 0;  // the op it runs inside, 0 for none
  bool has_node = false;                // it runs in a backward node:
  BackwardNode node{};                  // ... this one
  bool backward = false;                // it runs in a backward pass
  bool expecting = false;               // inside ovf.expected_nonfinite()
  uint64_t batch = 0;                   // the batch its records belong to
  // The program's line (a forward op judged after its outermost op returned:
  // the stack has moved on by then), or OVF_NO_ID.
  uint32_t location_id = OVF_NO_ID;
  bool late = false;  // ... judged so
  // The read inputs' versions at the end: an input written since (before the
  // statistics arrived) is not judged from what it holds now.
  std::vector<uint32_t> input_versions;
  bool inputs_judged = false;     // input_stats computed (once, at the first non-finite output)
  bool inputs_rewritten = false;  // ... and one had been written since: not judged
  std::vector<Stats> input_stats;
  std::vector<OutputLine> outputs;
  std::vector<HeldRecord> held;  // non-finite outputs of nested ops, not committed yet

  // Ready to describe another op; vectors keep their capacity (ops are many).
  void clear();
};

template <typename Fn>
void for_each_tensor(const c10::IValue& value, Fn&& fn) {
  if (value.isTensor()) {
    if (value.toTensor().defined()) fn(value.toTensor());
  } else if (value.isTensorList()) {
    for (const at::Tensor& t : value.toTensorList().vec()) {
      if (t.defined()) fn(t);
    }
  }
}

// The statistics of `t` as of now: computed at once on the CPU; a device
// tensor's in the current thread's group's batch (op_groups.h), which
// `submit_now` enqueues at once (stream order then reads the value before the
// op about to run overwrites it).
StatsRef stats_as_of_now(const at::Tensor& t, const TensorView& view, StatsUse use,
                         bool submit_now = false);

// Collects an ended op's outputs into `ended` (a cleared EndedOp; their
// statistics requested, not waited for). `parent`: the op this one runs
// inside, or nullptr. `node`: the backward node it runs in, or nullptr;
// `backward`: whether it runs in a backward pass (the engine's own ops run
// outside every node).
void end_op(const at::RecordFunction& fn, PendingOp& op, PendingOp* parent,
            const BackwardNode* node, bool backward, EndedOp& ended);

// An input's version where it keeps none (EndedOp::input_versions).
constexpr uint32_t kNoVersion = 0xffffffffu;

// The statistics of the inputs the op only read, as they are now (op_judge.cpp):
// computed once, at its first non-finite output.
const std::vector<Stats>& read_input_stats(EndedOp& ended);

// Judges an ended op once its statistics are known: what each non-finite
// output is (producer, carrier, deliberate), why a producer made it; commits
// its records, or hands the non-finite ones to `parent` (the enclosing op,
// which may return the value; nullptr at the outermost op). The events of the
// records committed wait on this thread for deliver_op_events().
void judge_op(EndedOp& ended, EndedOp* parent);

// The program's line running now ("model.py:66 in forward", interned), or
// OVF_NO_ID where the driver gives none (set_location_provider).
uint32_t program_location();

// Hands the events judge_op committed on this thread to the driver's handler
// (set_op_event_handler): called with no lock of ovf's held, since the
// handler may take the interpreter's lock.
void deliver_op_events();

}  // namespace op_detail
}  // namespace ovf

#endif  // OVF_OP_PENDING_H
