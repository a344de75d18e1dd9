// Judging an ended op's outputs (op_pending.h): what each non-finite one is
// (producer, carrier, deliberate), why a producer made it, and the records,
// held by an enclosing op that may return the value as its own.
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
#include "op_verdict.h"
#include "parameters.h"
#include "record.h"
#include "ring_writer.h"
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

// The records committed on this thread whose events the handler has not seen.
thread_local std::vector<std::pair<ovf_record, uint32_t>> t_events;

}  // namespace

// The statistics of the inputs the op only read, as they are now: computed
// once, the first time an output comes out non-finite (at the op's end where
// its outputs' statistics were known there, else when they arrived). An input
// written since the op read it is not judged by what it holds now.
const std::vector<Stats>& read_input_stats(EndedOp& e) {
  if (e.inputs_judged) return e.input_stats;
  e.inputs_judged = true;
  e.input_stats.resize(e.op.inputs.size());
  for (size_t i = 0; i < e.op.inputs.size(); ++i) {
    const at::Tensor& in = e.op.inputs[i];
    const c10::optional<uint32_t> version = version_of(in);
    if (version.value_or(kNoVersion) != e.input_versions[i]) {
      e.inputs_rewritten = true;
      continue;
    }
    TensorView view;
    if (stats_view(in, &view)) e.input_stats[i] = tensor_stats(in, view, StatsUse::kJudging);
  }
  return e.input_stats;
}

namespace {

// A NaN/Inf in an input the op read: carried in, or deliberate (constant_origins.h).
void judge_input(PendingOp& op, const at::Tensor& t, const Stats& s) {
  if (!s.nonfinite()) return;
  if (!has_constant_origin(t)) {
    op.carried_in = true;
    if (op.carried_collective == OVF_NO_ID) op.carried_collective = received_through(t);
    // The first value that reaches an op from where ovf did not look: a
    // parameter's gradient (the backward pass, unwatched without --backward)
    // is named on the record.
    if (op.carried_gradient == OVF_NO_ID &&
        __atomic_load_n(&ovf_state.first_nonfinite_seq, __ATOMIC_ACQUIRE) == OVF_NO_SEQ) {
      op.carried_gradient = gradient_owner(t);
    }
    return;
  }
  op.constant = true;
  if (s.nan_count > 0) op.deliberate_nan = true;
}

// The inputs judged from their values at the start: in-place operands, and
// 0-dim device tensors that turn out to be NaN/Inf constants (those are then
// not inputs that carry a value in). Returns the constants' tensors.
std::vector<const c10::TensorImpl*> judge_start_inputs(PendingOp& op) {
  std::vector<const c10::TensorImpl*> constants;
  for (const StartInput& in : op.start_inputs) {
    const Stats s = in.stats.get();
    if (!in.constant_candidate) {
      judge_input(op, in.tensor, s);
    } else if (s.nonfinite()) {
      op.constant = true;  // deliberate: the op was told to make this value
      op.deliberate_nan |= s.nan_count > 0;
      constants.push_back(in.tensor.unsafeGetTensorImpl());
    }
  }
  return constants;
}

// What a non-finite output is: expected (ovf.expected_nonfinite()), carried in (an input held a
// NaN/Inf nobody meant), deliberate (made from constants alone, or carrying a deliberate -inf on),
// or produced here -- from finite values, or a NaN from deliberate infinities (softmax of a row
// masked whole, -inf - -inf): masks do not make NaN.
// Inside an expected region (GradScaler's scaled backward, ovf.expected_nonfinite()) the role is
// judged all the same: the commit makes the line deliberate (OVF_FLAG_EXPECTED), and a producer
// there, with its why, is what a skipped step names as its cause.
uint32_t role_of(const EndedOp& e, const Stats& s) {
  const PendingOp& op = e.op;
  if (op.carried_in) return OVF_FLAG_CARRIER;
  const bool new_nan = s.nan_count > 0 && !op.deliberate_nan;
  if ((op.constant || op.only_constants) && !new_nan) return OVF_FLAG_CONSTANT;
  return OVF_FLAG_PRODUCER;
}

void commit(ovf_record& r, const EndedOp& e) {
  const uint32_t events = Monitor::instance().commit_line(r, e.batch, e.late);
  if (events != 0) t_events.emplace_back(r, events);
}

// A held record's why worth telling from an op that encloses it, or OVF_NO_ID.
uint32_t telling_why(const HeldRecord& h) {
  if (h.inner_why != OVF_NO_ID) return h.inner_why;
  const ovf_record& r = h.record;
  if (!(r.flags & OVF_FLAG_PRODUCER) || r.diagnosis_id == OVF_NO_ID) return OVF_NO_ID;
  return is_generic(interned(r.diagnosis_id)) ? uint32_t{OVF_NO_ID} : r.diagnosis_id;
}

// Drops the held records that an output in `storage` returns (the value is the
// enclosing op's event); the innermost producer's why among them, or OVF_NO_ID.
uint32_t supersede_held(std::vector<HeldRecord>& held, const void* storage) {
  if (held.empty() || storage == nullptr) return OVF_NO_ID;
  uint32_t why = OVF_NO_ID;
  const auto end = std::remove_if(held.begin(), held.end(), [&](const HeldRecord& h) {
    if (h.storage._unsafe_get_target() != storage) return false;
    if (why == OVF_NO_ID) why = telling_why(h);
    return true;
  });
  held.erase(end, held.end());
  return why;
}

// A carrier's why where the value it carried was written by a collective: the
// rank that made it is another (ovf.ranks reads the words as they are here).
uint32_t received_why(uint32_t collective_id) {
  if (collective_id == OVF_NO_ID) return OVF_NO_ID;
  return intern("it arrived through " + std::string(interned(collective_id)) +
                ", a collective: another rank sent it (python3 -m ovf.ranks names the rank "
                "that made it)");
}

// Why the op made a NaN/Inf from finite inputs (diagnosis.h), interned.
uint32_t diagnose_producer(EndedOp& e, const Stats& output, ovf_dtype dtype) {
  const std::vector<Stats>& inputs = read_input_stats(e);
  if (e.inputs_rewritten) {
    static const uint32_t rewritten = intern(
        "an input was written again before the statistics arrived (fast device mode): "
        "--device-mode exact judges it");
    return rewritten;
  }
  std::vector<Operand> operands;
  for (int32_t index : e.op.operands) {
    Operand operand;
    TensorView view;
    if (index >= 0 && stats_view(e.op.inputs[index], &view)) {
      operand.stats = inputs[index];
      operand.dtype = view.dtype;
    }
    operands.push_back(operand);
  }
  const std::string why =
      diagnose(std::string(interned(e.op.facts->name_id)), {output, dtype}, operands);
  return why.empty() ? OVF_NO_ID : intern(why);
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

}  // namespace

void judge_op(EndedOp& e, EndedOp* parent) {
  PendingOp& op = e.op;
  const std::vector<const c10::TensorImpl*> constants = judge_start_inputs(op);
  std::vector<HeldRecord> own;  // this op's non-finite records (rare: no allocation else)
  bool judged = false;
  for (const OutputLine& line : e.outputs) {
    const uint32_t inner_why = supersede_held(e.held, line.storage._unsafe_get_target());
    if (!line.readable) continue;
    const Stats s = line.zeros ? zero_stats(line.numel) : line.stats.get();
    Rows rows = line.rows;
    uint32_t role = 0;
    if (s.nonfinite()) {
      if (!judged) {  // the inputs it only read
        const std::vector<Stats>& inputs = read_input_stats(e);
        for (size_t i = 0; i < op.inputs.size(); ++i) {
          const c10::TensorImpl* impl = op.inputs[i].unsafeGetTensorImpl();
          if (std::find(constants.begin(), constants.end(), impl) == constants.end())
            judge_input(op, op.inputs[i], inputs[i]);
        }
      }
      judged = true;
      if (op.carried_in && op.carried_collective == OVF_NO_ID)
        op.carried_collective = op.overwrote_received;
      role = role_of(e, s);
      // A device output's rows: read again now that its statistics are here, for
      // a value nobody meant (never a mask's deliberate -inf, batch after batch).
      if (line.stats.batch != nullptr && (role == OVF_FLAG_PRODUCER || role == OVF_FLAG_CARRIER) &&
          rows_wanted(s, e.expecting))
        rows = line.stats.batch->rows(line.stats.index);
    }
    // What is made deliberately stays so where it is read later (the scaler's
    // isinf() of its probe after the region).
    if ((role == OVF_FLAG_CONSTANT || (role != 0 && e.expecting)) && !line.only_constants_noted) {
      if (c10::intrusive_ptr<c10::StorageImpl> storage = line.storage.lock())
        note_origin(c10::Storage(std::move(storage)), Origin::kDeliberate);
    }
    uint32_t diagnosis = role == OVF_FLAG_PRODUCER  ? diagnose_producer(e, s, line.dtype)
                         : role == OVF_FLAG_CARRIER ? received_why(op.carried_collective)
                                                    : uint32_t{OVF_NO_ID};
    // A composite op (cross_entropy_loss) that returns what an op inside it made
    // is told by that op's why (nll_loss2d_forward's 0/0), unless its own says more.
    if (role == OVF_FLAG_PRODUCER && inner_why != OVF_NO_ID &&
        (diagnosis == OVF_NO_ID || is_generic(interned(diagnosis)))) {
      diagnosis = inner_why;
    }
    ovf_record r = make_line(OVF_KIND_OP_OUTPUT, line.label_id, s, line.dtype, line.device,
                             role | (e.backward ? OVF_FLAG_BACKWARD : 0) |
                                 (role != 0 && e.expecting ? OVF_FLAG_EXPECTED : 0));
    r.name_id = op.facts->name_id;
    r.context_id = e.has_node ? e.node.module_id : op.context;
    r.aux_id = e.has_node ? e.node.forward_op_id
                          : (role == OVF_FLAG_CARRIER ? op.carried_gradient : OVF_NO_ID);
    r.diagnosis_id = diagnosis;
    if (role == OVF_FLAG_PRODUCER && !e.expecting) r.verdict_id = op_verdict(e, line, s);
    r.location_id = e.has_node ? e.node.location_id : e.location_id;
    // A replay's producer names its line now: no event snapshot is taken for it.
    // Nor is the snapshot's line the program's for a compiled graph's node (its
    // given site is).
    if (role == OVF_FLAG_PRODUCER && r.location_id == OVF_NO_ID && !e.backward &&
        (Monitor::instance().replaying() || op_site_given())) {
      r.location_id = program_location();
    }
    set_rows(r, rows);
    // Only non-finite values wait: an inner op may write an intermediate value
    // that the outer one changes in place (addmm after its copy_ of the bias).
    if (!s.nonfinite()) {
      commit(r, e);
    } else {
      // Held by the enclosing op, which may return it; committed here after
      // what the nested ops made otherwise.
      own.push_back({r,
                     parent != nullptr ? line.storage
                                       : c10::weak_intrusive_ptr<c10::StorageImpl>(
                                             c10::intrusive_ptr<c10::StorageImpl>()),
                     inner_why});
    }
  }
  // What nested ops made and this op did not return stays theirs, and ran first
  // (rnn_relu's addmm that overflowed): committed before this op's outputs.
  for (std::vector<HeldRecord>* records : {&e.held, &own}) {
    for (HeldRecord& h : *records) {
      if (parent != nullptr && h.storage._unsafe_get_target() != nullptr) {
        parent->held.push_back(h);
      } else {
        commit(h.record, e);
      }
    }
  }
  e.held.clear();
}

void deliver_op_events() {
  if (t_events.empty()) return;
  std::vector<std::pair<ovf_record, uint32_t>> events;
  events.swap(t_events);
  const OpEventHandler handler = g_op_event_handler.load(std::memory_order_acquire);
  if (handler == nullptr) return;
  for (const auto& [record, bits] : events) handler(record, bits);
}

}  // namespace op_detail
}  // namespace ovf
