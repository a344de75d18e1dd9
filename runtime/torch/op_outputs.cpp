// The op observer's second half: an op's outputs, once it has returned -- their
// statistics, what each non-finite one is (producer, carrier, deliberate), why a
// producer made it, and the records, held by an enclosing op that may return
// the value as its own (op_observer.cpp has the callbacks).
#include <ATen/record_function.h>

#include <algorithm>
#include <atomic>
#include <limits>
#include <string>
#include <vector>

#include "constant_origins.h"
#include "diagnosis.h"
#include "monitor.h"
#include "op_observer.h"
#include "op_pending.h"
#include "record.h"
#include "ring_writer.h"
#include "stats_cpu.h"
#include "torch_tensor.h"

namespace ovf {
namespace {

std::atomic<OpEventHandler> g_op_event_handler{nullptr};

}  // namespace

void set_op_event_handler(OpEventHandler handler) {
  g_op_event_handler.store(handler, std::memory_order_release);
}

namespace op_detail {
namespace {

uint32_t output_label_id(size_t index, size_t count) {
  static const uint32_t plain = intern("output");
  if (count == 1) return plain;
  static thread_local std::vector<uint32_t> indexed;
  while (indexed.size() <= index)
    indexed.push_back(intern("output[" + std::to_string(indexed.size()) + "]"));
  return indexed[index];
}

bool aliases_an_input(const at::Tensor& out, const PendingOp& op) {
  if (!out.has_storage()) return false;
  const void* storage = out.storage().unsafeGetStorageImpl();
  for (const at::Tensor& in : op.inputs) {
    if (in.has_storage() && in.storage().unsafeGetStorageImpl() == storage) return true;
  }
  return false;
}

// Judges the inputs the op only read, once an output came out non-finite.
void judge_read_inputs(PendingOp& op) {
  for (const at::Tensor& in : op.inputs) judge_input(op, in);
}

// What a non-finite output is: expected (ovf.expected_nonfinite()), carried in (an input held a
// NaN/Inf nobody meant), deliberate (made from constants alone, or carrying a deliberate -inf on),
// or produced here -- from finite values, or a NaN from deliberate infinities (softmax of a row
// masked whole, -inf - -inf): masks do not make NaN.
uint32_t role_of(const PendingOp& op, const Stats& s) {
  // Inside ovf.expected_nonfinite() everything made is deliberate, and stays
  // so where it is read after the region (the scaler's isinf() of its probe).
  if (Monitor::instance().expecting_nonfinite()) return OVF_FLAG_CONSTANT;
  if (op.carried_in) return OVF_FLAG_CARRIER;
  const bool new_nan = s.nan_count > 0 && !op.deliberate_nan;
  if ((op.constant || op.only_constants) && !new_nan) return OVF_FLAG_CONSTANT;
  return OVF_FLAG_PRODUCER;
}

// Whether `t` is every byte of its storage (a view of part of it is not).
bool covers_its_storage(const at::Tensor& t) {
  if (!t.has_storage()) return false;
  return t.storage_offset() == 0 &&
         static_cast<size_t>(t.numel()) * t.element_size() == t.storage().nbytes();
}

// Notes what the op left in `out`'s storage: a later op that reads it learns
// whether its NaN/Inf is deliberate. In-place writes of data forget a mask.
void note_output(const PendingOp& op, const at::Tensor& out, uint32_t role) {
  // x[0] = 0.0 writes a constant into part of x: the rest is still data.
  const bool part_of_data = op.only_constants && op.facts->in_place && !covers_its_storage(out) &&
                            origin_of(out) != Origin::kOnlyConstants;
  if (op.only_constants && !part_of_data) {
    note_origin(out, Origin::kOnlyConstants);
  } else if (role == OVF_FLAG_CONSTANT) {
    note_origin(out, Origin::kDeliberate);
  } else if (op.facts->in_place) {
    note_origin(out, Origin::kNone);
  }
}

void commit(ovf_record& r) {
  const uint32_t events = Monitor::instance().commit_line(r);
  if (events == 0) return;
  if (OpEventHandler handler = g_op_event_handler.load(std::memory_order_acquire))
    handler(r, events);
}

// A held record's why worth telling from an op that encloses it, or OVF_NO_ID.
uint32_t telling_why(const HeldRecord& h) {
  if (h.inner_why != OVF_NO_ID) return h.inner_why;
  const ovf_record& r = h.record;
  if (!(r.flags & OVF_FLAG_PRODUCER) || r.diagnosis_id == OVF_NO_ID) return OVF_NO_ID;
  return is_generic(interned(r.diagnosis_id)) ? uint32_t{OVF_NO_ID} : r.diagnosis_id;
}

// Drops the held records of `op` that `out` returns (the value is the enclosing
// op's event); the innermost producer's why among them, or OVF_NO_ID.
uint32_t supersede_held(PendingOp& op, const at::Tensor& out) {
  if (op.held.empty() || !out.has_storage()) return OVF_NO_ID;
  const void* storage = out.storage().unsafeGetStorageImpl();
  uint32_t why = OVF_NO_ID;
  const auto end = std::remove_if(op.held.begin(), op.held.end(), [&](const HeldRecord& h) {
    if (h.storage._unsafe_get_target() != storage) return false;
    if (why == OVF_NO_ID) why = telling_why(h);
    return true;
  });
  op.held.erase(end, op.held.end());
  return why;
}

// Why the op made a NaN/Inf from finite inputs (diagnosis.h), interned; the
// inputs' statistics are computed here only, at a producer.
uint32_t diagnose_producer(const PendingOp& op, const Stats& output, ovf_dtype dtype) {
  std::vector<Operand> operands;
  for (int32_t index : op.operands) {
    Operand operand;
    TensorView view;
    if (index >= 0 && stats_view(op.inputs[index], &view)) {
      operand.stats = tensor_stats(op.inputs[index], view);
      operand.dtype = view.dtype;
    }
    operands.push_back(operand);
  }
  const std::string why =
      diagnose(std::string(interned(op.facts->name_id)), {output, dtype}, operands);
  return why.empty() ? OVF_NO_ID : intern(why);
}

// The tensor's version, or nullopt where it keeps none (inference tensors).
c10::optional<uint32_t> version_of(const at::Tensor& t) {
  const c10::VariableVersion& counter = t.unsafeGetTensorImpl()->version_counter();
  if (!counter.enabled()) return c10::nullopt;
  return counter.current_version();
}

// The statistics of `numel` zeros, as the CPU engine would give them.
Stats zero_stats(uint64_t numel) {
  Stats s;
  s.has_stats = true;
  s.numel = numel;
  s.zero_count = numel;
  s.abs_min = numel ? 0.0 : std::numeric_limits<double>::infinity();
  s.abs_max = 0.0;
  s.abs_min_nonzero = std::numeric_limits<double>::infinity();
  return s;
}

constexpr size_t kMaxScanned = 64;  // per op: enough for any composite op's results

// The output's statistics: a nested op's scan of the very same tensor, or a new one.
Stats output_stats(const PendingOp& op, const at::Tensor& out, const TensorView& view,
                   PendingOp* parent) {
  const c10::optional<uint32_t> version = version_of(out);
  const c10::TensorImpl* impl = out.unsafeGetTensorImpl();
  const ScannedOutput* found = nullptr;
  if (version && op.facts->composite) {
    for (const ScannedOutput& s : op.scanned) {
      if (s.impl._unsafe_get_target() == impl && s.version == *version && s.data == view.data) {
        found = &s;
        break;
      }
    }
  }
  const Stats stats = found != nullptr ? found->stats : tensor_stats(out, view);
  if (version && parent != nullptr && parent->scanned.size() < kMaxScanned)
    parent->scanned.push_back({c10::weak_intrusive_ptr<c10::TensorImpl>(out.getIntrusivePtr()),
                               *version, view.data, stats});
  return stats;
}

}  // namespace

void record_outputs(const at::RecordFunction& fn, PendingOp& op, PendingOp* parent,
                    const BackwardNode* node, bool backward) {
  // Reused: an op's outputs are collected on every call.
  static thread_local std::vector<at::Tensor> outputs;
  std::vector<HeldRecord> own;  // this op's non-finite records (rare: no allocation else)
  outputs.clear();
  if (!op.facts->writes_no_values) {
    for (const c10::IValue& value : fn.outputs()) {
      for_each_tensor(value, [&](const at::Tensor& t) { outputs.push_back(t); });
    }
  }
  bool judged = false;
  for (size_t i = 0; i < outputs.size(); ++i) {
    const at::Tensor& out = outputs[i];
    // A view of an input produces no values of its own (in-place ops do).
    if (!op.facts->in_place && aliases_an_input(out, op)) continue;
    const uint32_t inner_why = supersede_held(op, out);
    TensorView view;
    if (!stats_view(out, &view)) continue;
    // Zeros need no read (optimizer.zero_grad() zeroes every gradient each step).
    const bool zeros = op.facts->writes_zeros ||
                       (parent != nullptr && parent->facts->writes_zeros && op.facts->in_place);
    const Stats s = zeros ? zero_stats(static_cast<uint64_t>(out.numel()))
                          : output_stats(op, out, view, parent);
    uint32_t role = 0;
    if (s.nonfinite()) {
      if (!judged) judge_read_inputs(op);
      judged = true;
      role = role_of(op, s);
    }
    note_output(op, out, role);
    uint32_t diagnosis =
        role == OVF_FLAG_PRODUCER ? diagnose_producer(op, s, view.dtype) : uint32_t{OVF_NO_ID};
    // A composite op (cross_entropy_loss) that returns what an op inside it made
    // is told by that op's why (nll_loss2d_forward's 0/0), unless its own says more.
    if (role == OVF_FLAG_PRODUCER && inner_why != OVF_NO_ID &&
        (diagnosis == OVF_NO_ID || is_generic(interned(diagnosis)))) {
      diagnosis = inner_why;
    }
    ovf_record r = make_line(OVF_KIND_OP_OUTPUT, output_label_id(i, outputs.size()), s, view.dtype,
                             device_id_of(out), role | (backward ? OVF_FLAG_BACKWARD : 0));
    r.name_id = op.facts->name_id;
    r.context_id = node != nullptr ? node->module_id : op.context;
    r.aux_id = node != nullptr ? node->forward_op_id
                               : (role == OVF_FLAG_CARRIER ? op.carried_gradient : OVF_NO_ID);
    r.diagnosis_id = diagnosis;
    r.location_id = node != nullptr ? node->location_id : OVF_NO_ID;
    // Only non-finite values wait: an inner op may write an intermediate value
    // that the outer one changes in place (addmm after its copy_ of the bias).
    if (!s.nonfinite()) {
      commit(r);
    } else {
      // Held by the enclosing op, which may return it; committed here after
      // what the nested ops made otherwise.
      own.push_back(
          {r,
           parent != nullptr && out.has_storage()
               ? out.storage().getWeakStorageImpl()
               : c10::weak_intrusive_ptr<c10::StorageImpl>(c10::intrusive_ptr<c10::StorageImpl>()),
           inner_why});
    }
  }
  outputs.clear();  // drop the references now
  // What nested ops made and this op did not return stays theirs, and ran first
  // (rnn_relu's addmm that overflowed): committed before this op's outputs.
  for (std::vector<HeldRecord>* records : {&op.held, &own}) {
    for (HeldRecord& h : *records) {
      if (parent != nullptr && h.storage._unsafe_get_target() != nullptr) {
        parent->held.push_back(h);
      } else {
        commit(h.record);
      }
    }
  }
  op.held.clear();
}

}  // namespace op_detail
}  // namespace ovf
