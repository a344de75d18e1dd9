// RecordFunction callbacks feeding OP_OUTPUT records into the ring.
//
// Outputs are readable only in the end callback and inputs only in the start
// callback (RecordFunction frees them in between), so the start callback keeps
// references to the input tensors on a per-thread stack and the end callback
// checks them only when an output is non-finite: that tells a producer (all
// inputs finite) from a carrier. In-place ops overwrite their input, so theirs
// is checked at the start instead.
//
// An op's module is the innermost module whose forward runs (module hooks, the
// C++ API's scopes), refined by the parameters it takes (param_context.h): the
// C++ API has no module hooks, so aten::linear on fc.weight names "fc" (parameters.h).
#include "op_observer.h"

#include <ATen/record_function.h>
#include <torch/csrc/autograd/graph_task.h>

#include <algorithm>
#include <array>
#include <atomic>
#include <cmath>
#include <cstring>
#include <limits>
#include <mutex>
#include <string>
#include <unordered_map>
#include <vector>

#include "constant_origins.h"
#include "control.h"
#include "diagnosis.h"
#include "module_stack.h"
#include "monitor.h"
#include "op_facts.h"
#include "parameters.h"
#include "record.h"
#include "ring_writer.h"
#include "stats_cpu.h"
#include "torch_tensor.h"

namespace ovf {
namespace {

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

std::atomic<OpEventHandler> g_op_event_handler{nullptr};

// A backward node (e.g. LogBackward0) whose inner ops are running.
struct BackwardNode {
  at::RecordFunctionHandle handle;
  uint32_t forward_op_id;
  uint32_t module_id;
  uint32_t location_id;  // where in the program the forward op ran
};

// The forward op that created autograd node `seq_nr`, to name its gradient.
// Direct-mapped by sequence number: fixed memory, newer entries win.
struct ForwardOp {
  int64_t seq_nr = -1;
  uint32_t op_id = OVF_NO_ID;
  uint32_t module_id = OVF_NO_ID;
  uint32_t location_id = OVF_NO_ID;
};

std::atomic<LocationProvider> g_location_provider{nullptr};
// The location of the outermost op running on this thread: the ops nested in
// it were called from the same line of the program.
thread_local uint32_t t_outer_location = OVF_NO_ID;
constexpr size_t kForwardOps = 1u << 16;
std::array<ForwardOp, kForwardOps> g_forward_ops;

thread_local std::vector<PendingOp> t_pending;  // entries [0, t_depth) are live; capacity is reused
thread_local size_t t_depth = 0;
thread_local std::vector<BackwardNode> t_backward;

std::mutex g_register_mutex;
at::CallbackHandle g_handle = 0;
bool g_registered = false;

uint32_t read_observe() { return read_control(ovf_state.control.observe); }

uint32_t output_label_id(size_t index, size_t count) {
  static const uint32_t plain = intern("output");
  if (count == 1) return plain;
  static thread_local std::vector<uint32_t> indexed;
  while (indexed.size() <= index)
    indexed.push_back(intern("output[" + std::to_string(indexed.size()) + "]"));
  return indexed[index];
}

// Read with the statistics engine: an ATen op here would run this observer again.
bool holds_nan(const at::Tensor& t) {
  TensorView view;
  return stats_view(t, &view) && tensor_stats(t, view).nan_count > 0;
}

// A NaN/Inf handed to the op as a constant: a Python float argument, or a
// 0-dim tensor (how torch wraps Python numbers, and scalars such as the inf
// that isfinite compares with). Sets *nan when it is a NaN.
bool constant_nonfinite(const c10::IValue& value, bool* nan) {
  if (value.isDouble()) {
    *nan = std::isnan(value.toDouble());
    return !std::isfinite(value.toDouble());
  }
  if (value.isTensor()) {
    const at::Tensor& t = value.toTensor();
    if (!t.defined() || t.dim() != 0 || !tensor_nonfinite(t)) return false;
    *nan = holds_nan(t);
    return true;
  }
  return false;
}

// A number torch wrapped into a tensor for the op (`mask * 2.0`): a constant.
bool wrapped_number(const at::Tensor& t) { return t.unsafeGetTensorImpl()->is_wrapped_number(); }

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

// Inside a backward node, or between nodes of a backward pass: the engine's own
// ops (InputBuffer's sum of two gradients of one tensor) run outside every node.
bool in_backward() {
  return !t_backward.empty() || torch::autograd::get_current_graph_task_id() != -1;
}

void judge_input(PendingOp& op, const at::Tensor& t) {
  if (!tensor_nonfinite(t)) return;
  if (!has_constant_origin(t)) {
    op.carried_in = true;
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
  if (!op.deliberate_nan && holds_nan(t)) op.deliberate_nan = true;
}

// The module a forward op runs in: the innermost module (or the enclosing op's
// module, which its parameters may have refined), refined again by the first
// input that is a watched parameter of a module inside it.
uint32_t op_context(const at::RecordFunction& fn) {
  uint32_t context = innermost_module();
  if (t_depth > 0) {
    const uint32_t enclosing = t_pending[t_depth - 1].context;
    if (enclosing != OVF_NO_ID && module_within(enclosing, context)) context = enclosing;
  }
  if (!op_context_from_parameters()) return context;
  for (const c10::IValue& input : fn.inputs()) {
    uint32_t owner = OVF_NO_ID;
    for_each_tensor(input, [&](const at::Tensor& t) {
      if (owner == OVF_NO_ID) owner = parameter_module(t);
    });
    if (owner != OVF_NO_ID) return module_within(owner, context) ? owner : context;
  }
  return context;
}

std::unique_ptr<at::ObserverContext> on_start(const at::RecordFunction& fn) {
  const uint32_t observe = read_observe();
  if (fn.scope() == at::RecordScope::BACKWARD_FUNCTION) {
    const int64_t seq = fn.seqNr();
    const ForwardOp& origin = g_forward_ops[static_cast<size_t>(seq) % kForwardOps];
    const bool known = seq >= 0 && origin.seq_nr == seq;
    t_backward.push_back({fn.handle(), known ? origin.op_id : OVF_NO_ID,
                          known ? origin.module_id : OVF_NO_ID,
                          known ? origin.location_id : OVF_NO_ID});
    return nullptr;
  }
  const bool backward = in_backward();
  const bool noted = !backward && fn.seqNr() >= 0 && (observe & OVF_OBSERVE_BACKWARD);
  const bool observed = observe & (backward ? OVF_OBSERVE_BACKWARD : OVF_OBSERVE_OPS);
  if (!noted && !observed) return nullptr;
  const uint32_t context = backward ? OVF_NO_ID : op_context(fn);
  // Every forward op with a sequence number is noted while backward is
  // observed, checked or not: ops that make no autograd node share the next
  // node's number, and the one that makes it comes last, so it wins the slot.
  if (noted) {
    if (t_depth == 0) {
      const LocationProvider provider = g_location_provider.load(std::memory_order_acquire);
      t_outer_location = provider != nullptr ? provider() : OVF_NO_ID;
    }
    g_forward_ops[static_cast<size_t>(fn.seqNr()) % kForwardOps] = {
        fn.seqNr(), op_facts(fn).name_id, context, t_outer_location};
  }
  if (!observed) return nullptr;
  if (t_depth == t_pending.size()) t_pending.emplace_back();
  PendingOp& op = t_pending[t_depth++];
  op.handle = fn.handle();
  op.facts = &op_facts(fn);
  op.context = context;
  op.carried_in = false;
  op.carried_gradient = OVF_NO_ID;
  op.constant = false;
  op.deliberate_nan = false;
  // Judged input by input below: a factory is constant whatever it is given;
  // any other op while all it reads is (none of it trained, and not random).
  op.only_constants = op.facts->makes_constant || (!op.facts->random && any_origins());
  bool read_a_tensor = false;
  op.inputs.clear();
  op.operands.clear();
  op.held.clear();
  op.scanned.clear();
  const std::vector<bool>& written = op.facts->written;
  // Without a schema, an in-place op's inputs are judged before it writes them.
  const bool judge_all_now = written.empty() && op.facts->in_place;
  size_t index = 0;
  for (const c10::IValue& input : fn.inputs()) {
    const size_t i = index++;
    bool nan = false;
    if (constant_nonfinite(input, &nan)) {
      op.constant = true;  // deliberate: the op was told to make this value
      op.deliberate_nan |= nan;
      continue;
    }
    const bool now = judge_all_now || (i < written.size() && written[i]);
    const bool overwritten = now && i < written.size() && !op.facts->old_values_read[i];
    for_each_tensor(input, [&](const at::Tensor& t) {
      op.operands.push_back(now ? -1 : static_cast<int32_t>(op.inputs.size()));
      if (overwritten) return;
      if (op.only_constants && !op.facts->makes_constant && !wrapped_number(t)) {
        read_a_tensor = true;
        op.only_constants = !t.requires_grad() && origin_of(t) == Origin::kOnlyConstants;
      }
      if (!now) {
        op.inputs.push_back(t);
      } else {
        judge_input(op, t);
      }
    });
  }
  if (!op.facts->makes_constant && !read_a_tensor) op.only_constants = false;
  return nullptr;
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

// `parent`: the op this one runs inside, or nullptr.
void record_outputs(const at::RecordFunction& fn, PendingOp& op, PendingOp* parent) {
  const bool backward = in_backward();
  const BackwardNode* node = t_backward.empty() ? nullptr : &t_backward.back();
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

void on_end(const at::RecordFunction& fn, at::ObserverContext* /*unused*/) {
  if (fn.scope() == at::RecordScope::BACKWARD_FUNCTION) {
    // Pop down to this node: nodes that threw never reached their end.
    for (size_t i = t_backward.size(); i > 0; --i) {
      if (t_backward[i - 1].handle == fn.handle()) {
        t_backward.resize(i - 1);
        break;
      }
    }
    return;
  }
  // Find this op on the pending stack; ops above it threw before their end.
  size_t i = t_depth;
  while (i > 0 && t_pending[i - 1].handle != fn.handle()) --i;
  if (i == 0) return;  // started before the observer was armed, or not observed
  PendingOp& op = t_pending[i - 1];
  try {
    if (Monitor::instance().active() && read_control(ovf_state.control.enabled))
      record_outputs(fn, op, i >= 2 ? &t_pending[i - 2] : nullptr);
  } catch (const std::exception&) {
    // An op's outputs ovf cannot read must never fail the op itself.
  }
  op.inputs.clear();  // release the references now, not when the slot is reused
  op.held.clear();
  op.scanned.clear();
  t_depth = i - 1;
}

}  // namespace

void set_location_provider(LocationProvider provider) {
  g_location_provider.store(provider, std::memory_order_release);
}

void set_op_event_handler(OpEventHandler handler) {
  g_op_event_handler.store(handler, std::memory_order_release);
}

void sync_op_observer() {
  const bool wanted = (read_observe() & (OVF_OBSERVE_OPS | OVF_OBSERVE_BACKWARD)) != 0;
  if (wanted == g_registered) return;
  std::lock_guard<std::mutex> lock(g_register_mutex);
  if (wanted && !g_registered) {
    g_handle = at::addGlobalCallback(
        at::RecordFunctionCallback(&on_start, &on_end)
            .needsInputs(true)
            .needsOutputs(true)
            .needsIds(true)  // unique handles pair each end with its start
            .scopes({at::RecordScope::FUNCTION, at::RecordScope::BACKWARD_FUNCTION}));
    g_registered = true;
  } else if (!wanted && g_registered) {
    at::removeCallback(g_handle);
    g_registered = false;
  }
}

}  // namespace ovf
