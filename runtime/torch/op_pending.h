// The op observer's record of an op between its start and end callbacks, shared by
// the callbacks (op_observer.cpp) and the judging of its outputs (op_outputs.cpp).
#ifndef OVF_OP_PENDING_H
#define OVF_OP_PENDING_H

#include <ATen/record_function.h>

#include <cstdint>
#include <vector>

#include "op_facts.h"
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
  Stats stats;
};

// An op between its start and end callbacks.
struct PendingOp {
  at::RecordFunctionHandle handle = 0;
  const OpFacts* facts = nullptr;
  uint32_t context = OVF_NO_ID;           // the module the op runs in
  bool carried_in = false;                // an input held a NaN/Inf nobody meant (not deliberate)
  bool constant = false;                  // a NaN/Inf argument was deliberate (constant_origins.h)
  bool deliberate_nan = false;            // ... and one of those held a NaN
  bool only_constants = false;            // every value it read was made from constants alone
  uint32_t carried_gradient = OVF_NO_ID;  // the parameter whose .grad carried the first NaN in
  std::vector<at::Tensor> inputs;         // inputs it only reads: judged at the end if needed
  // Its tensor arguments in order: an index into `inputs`, or -1 for one judged
  // at the start (written in place) or not at all (overwritten whole).
  std::vector<int32_t> operands;
  // Non-finite outputs of ops nested in this one, not committed yet: the value
  // an enclosing op returns is that op's event (.half() is aten::to, not the
  // _to_copy and copy_ inside it), so it is held until the outermost ends.
  std::vector<HeldRecord> held;
  std::vector<ScannedOutput> scanned;  // by the ops nested in this one
};

// A backward node (e.g. LogBackward0) whose inner ops are running.
struct BackwardNode {
  at::RecordFunctionHandle handle;
  uint32_t forward_op_id;
  uint32_t module_id;
  uint32_t location_id;  // where in the program the forward op ran
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

// Judges one input of `op` (a NaN/Inf read: carried in, or deliberate).
void judge_input(PendingOp& op, const at::Tensor& t);

// Checks the op's outputs and commits their records (a non-finite one is held
// by `parent`, the op this one runs inside, or nullptr, which may return it).
// `node`: the backward node the op runs in, or nullptr; `backward`: whether it
// runs in a backward pass (the engine's own ops run outside every node).
void record_outputs(const at::RecordFunction& fn, PendingOp& op, PendingOp* parent,
                    const BackwardNode* node, bool backward);

}  // namespace op_detail
}  // namespace ovf

#endif  // OVF_OP_PENDING_H
