// The op observer's second half: an op's outputs, once it has returned -- their
// statistics, requested at its end (op_groups.h says when they are judged:
// op_judge.cpp), what an output needs noted before the ops after it start, and
// the ended op's state kept for the judging (op_observer.cpp has the callbacks).
#include <ATen/record_function.h>

#include <string>
#include <vector>

#include "constant_origins.h"
#include "device_engine.h"
#include "known_finite.h"
#include "monitor.h"
#include "op_pending.h"
#include "record.h"
#include "ring_writer.h"
#include "torch_tensor.h"

namespace ovf {
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

// Whether `t` is every byte of its storage (a view of part of it is not).
bool covers_its_storage(const at::Tensor& t) {
  if (!t.has_storage()) return false;
  return t.storage_offset() == 0 &&
         static_cast<size_t>(t.numel()) * t.element_size() == t.storage().nbytes();
}

// Notes at the op's end what it left in `out`'s storage that needs no value
// (made from constants alone; an in-place write of data forgets a mask), so
// that the ops after it, which start before it is judged, read it. Returns
// whether it was noted as made from constants alone.
bool note_output_at_end(PendingOp& op, const at::Tensor& out) {
  // x[0] = 0.0 writes a constant into part of x: the rest is still data.
  const bool part_of_data = op.only_constants && op.facts->in_place && !covers_its_storage(out) &&
                            origin_of(out) != Origin::kOnlyConstants;
  if (op.only_constants && !part_of_data) {
    note_origin(out, Origin::kOnlyConstants);
    return true;
  }
  if (op.facts->in_place) {
    const uint32_t filled_by = forget_origin(out);
    // Its first argument overwritten whole: it replaces what a collective sent there.
    const std::vector<bool>& read = op.facts->old_values_read;
    if (op.overwrote_received == OVF_NO_ID && !read.empty() && !read[0] && op.facts->written[0])
      op.overwrote_received = filled_by;
  }
  return false;
}

constexpr size_t kMaxScanned = 64;  // per op: enough for any composite op's results

// The output's statistics: a nested op's scan of the very same tensor, or a new one.
StatsRef output_stats(const PendingOp& op, const at::Tensor& out, const TensorView& view,
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
  // Noted known finite: only what an op wrote in place (parameters, optimizer
  // states and buffers are written again; a new tensor per op would fill the
  // table with dead ones), as it was before its statistics were read, and not
  // when something may have written unseen while the op ran (a collective in it).
  const KnownFiniteMark mark = op.facts->in_place ? known_finite_mark(out) : KnownFiniteMark{};
  StatsRef stats = found != nullptr ? found->stats : stats_as_of_now(out, view, StatsUse::kLine);
  if (mark.eligible && mark.epoch == op.known_finite_epoch && !stats.batch &&
      stats.known.has_stats && !stats.known.nonfinite())
    note_finite(out, mark);
  if (version && parent != nullptr && parent->scanned.size() < kMaxScanned)
    parent->scanned.push_back({c10::weak_intrusive_ptr<c10::TensorImpl>(out.getIntrusivePtr()),
                               *version, view.data, stats});
  return stats;
}

}  // namespace

void EndedOp::clear() {
  op.inputs.clear();
  op.operands.clear();
  op.start_inputs.clear();
  op.scanned.clear();
  op.arguments.clear();
  parent = 0;
  has_node = false;
  backward = false;
  expecting = false;
  batch = 0;
  location_id = OVF_NO_ID;
  late = false;
  input_versions.clear();
  inputs_judged = false;
  inputs_rewritten = false;
  input_stats.clear();
  outputs.clear();
  held.clear();
}

void end_op(const at::RecordFunction& fn, PendingOp& op, PendingOp* parent,
            const BackwardNode* node, bool backward, EndedOp& e) {
  // Reused: an op's outputs are collected on every call.
  static thread_local std::vector<at::Tensor> outputs;
  outputs.clear();
  if (!op.facts->writes_no_values) {
    for (const c10::IValue& value : fn.outputs()) {
      for_each_tensor(value, [&](const at::Tensor& t) { outputs.push_back(t); });
    }
  }
  bool all_known = true;
  bool known_nonfinite = false;
  for (size_t i = 0; i < outputs.size(); ++i) {
    const at::Tensor& out = outputs[i];
    // A view of an input produces no values of its own (in-place ops do).
    if (!op.facts->in_place && aliases_an_input(out, op)) continue;
    e.outputs.emplace_back();
    OutputLine& line = e.outputs.back();
    line.label_id = output_label_id(i, outputs.size());
    line.output_index = static_cast<uint32_t>(i);
    if (out.has_storage()) line.storage = out.storage().getWeakStorageImpl();
    TensorView view;
    line.readable = stats_view(out, &view);
    if (!line.readable) continue;
    line.dtype = view.dtype;
    line.device = device_id_of(out);
    line.numel = static_cast<uint64_t>(out.numel());
    // Zeros need no read (optimizer.zero_grad() zeroes every gradient each step).
    line.zeros = op.facts->writes_zeros ||
                 (parent != nullptr && parent->facts->writes_zeros && op.facts->in_place);
    if (!line.zeros) line.stats = output_stats(op, out, view, parent);
    all_known = all_known && line.stats.batch == nullptr;
    known_nonfinite = known_nonfinite || (!line.zeros && line.stats.known.nonfinite());
    // Deliberate values (masks) are not the rows a NaN came from.
    if (!line.zeros && line.stats.batch == nullptr && !uses_device_engine(out) && !op.constant &&
        !op.deliberate_nan && rows_wanted(line.stats.known))
      line.rows = find_rows(view);
    line.only_constants_noted = note_output_at_end(op, out);
  }
  outputs.clear();  // drop the references now
  e.parent = parent != nullptr ? parent->handle : 0;
  e.has_node = node != nullptr;
  if (node != nullptr) e.node = *node;
  e.backward = backward;
  e.expecting = Monitor::instance().expecting_nonfinite();
  e.batch = Monitor::instance().record_batch();
  e.op.handle = op.handle;
  e.op.facts = op.facts;
  e.op.context = op.context;
  e.op.carried_in = op.carried_in;
  e.op.constant = op.constant;
  e.op.deliberate_nan = op.deliberate_nan;
  e.op.only_constants = op.only_constants;
  e.op.carried_gradient = op.carried_gradient;
  e.op.carried_collective = op.carried_collective;
  e.op.overwrote_received = op.overwrote_received;
  e.op.rerun = op.rerun;
  // Known and finite (the CPU's usual case): the inputs say nothing more.
  if (all_known && !known_nonfinite) return;
  // Swapped, not copied: both keep their capacity for the next op.
  std::swap(e.op.inputs, op.inputs);
  std::swap(e.op.operands, op.operands);
  std::swap(e.op.start_inputs, op.start_inputs);
  std::swap(e.op.arguments, op.arguments);
  std::swap(e.op.overload, op.overload);
  for (const at::Tensor& in : e.op.inputs)
    e.input_versions.push_back(version_of(in).value_or(kNoVersion));
  // Where the outputs' values are known now, a non-finite one has its inputs
  // read now too: an op nested after it in the same outermost op may write them.
  if (known_nonfinite) read_input_stats(e);
}

}  // namespace op_detail
}  // namespace ovf
