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
// C++ API has no module hooks, so aten::linear on fc.weight names "fc".
#include "ovf/op_observer.h"

#include <ATen/record_function.h>

#include <array>
#include <atomic>
#include <cmath>
#include <cstring>
#include <mutex>
#include <shared_mutex>
#include <string>
#include <unordered_map>
#include <vector>

#include "ovf/module_stack.h"
#include "ovf/monitor.h"
#include "ovf/param_context.h"
#include "ovf/ring_writer.h"
#include "ovf/torch_tensor.h"

namespace ovf {
namespace {

// An op between its start and end callbacks.
struct PendingOp {
  at::RecordFunctionHandle handle = 0;
  bool in_place = false;
  bool input_nonfinite = false;     // in-place ops: decided at the start
  bool constant_nonfinite = false;  // a scalar argument or 0-dim tensor input is NaN/Inf
  uint32_t context = OVF_NO_ID;     // the module the op runs in
  std::vector<at::Tensor> inputs;   // other ops: checked at the end if needed
};

// Watched parameters -> their module (param_context.h). Written when a C++
// Watch starts or ends, read by every op: a reader-writer lock, and a flag that
// keeps programs registering nothing (Python) off the lock entirely.
struct ParamRegistry {
  std::shared_mutex mutex;
  std::unordered_map<const void*, uint32_t> by_impl;     // TensorImpl*
  std::unordered_map<const void*, uint32_t> by_storage;  // StorageImpl*: views of a parameter
  std::vector<at::Tensor> keep;                          // the addresses above stay theirs
  std::atomic<bool> any{false};
};

ParamRegistry& param_registry() {
  static auto* registry = new ParamRegistry();  // never destroyed: ops may run during exit
  return *registry;
}

std::atomic<OpEventHandler> g_op_event_handler{nullptr};

// A backward node (e.g. LogBackward0) whose inner ops are running.
struct BackwardNode {
  at::RecordFunctionHandle handle;
  uint32_t forward_op_id;
  uint32_t module_id;
};

// The forward op that created autograd node `seq_nr`, to name its gradient.
// Direct-mapped by sequence number: fixed memory, newer entries win.
struct ForwardOp {
  int64_t seq_nr = -1;
  uint32_t op_id = OVF_NO_ID;
  uint32_t module_id = OVF_NO_ID;
};
constexpr size_t kForwardOps = 1u << 16;
std::array<ForwardOp, kForwardOps> g_forward_ops;

thread_local std::vector<PendingOp> t_pending;  // entries [0, t_depth) are live; capacity is reused
thread_local size_t t_depth = 0;
thread_local std::vector<BackwardNode> t_backward;

std::mutex g_register_mutex;
at::CallbackHandle g_handle = 0;
bool g_registered = false;

uint32_t read_observe() { return *const_cast<const volatile uint32_t*>(&ovf_state.control.observe); }

// Op names are stable C strings of the operator registry: cache their ids.
uint32_t op_name_id(const char* name) {
  static thread_local std::unordered_map<const char*, uint32_t> ids;
  auto it = ids.find(name);
  if (it != ids.end()) return it->second;
  const uint32_t id = intern(name);
  ids.emplace(name, id);
  return id;
}

uint32_t output_label_id(size_t index, size_t count) {
  static const uint32_t plain = intern("output");
  if (count == 1) return plain;
  static thread_local std::vector<uint32_t> indexed;
  while (indexed.size() <= index) indexed.push_back(intern("output[" + std::to_string(indexed.size()) + "]"));
  return indexed[index];
}

bool ends_with(const char* s, const char* suffix) {
  const size_t n = std::strlen(s), m = std::strlen(suffix);
  return n >= m && std::strcmp(s + n - m, suffix) == 0;
}

// Ops whose outputs hold no values yet (fresh or resized memory): checking
// them would find NaNs that nobody computed.
bool writes_no_values(const char* name) {
  static const char* const kNames[] = {"aten::empty", "aten::empty_like", "aten::empty_strided",
                                       "aten::new_empty", "aten::new_empty_strided", "aten::resize_",
                                       "aten::resize_as_", "aten::set_", "aten::as_strided_",
                                       "aten::detach_", "aten::t_", "aten::transpose_",
                                       "aten::squeeze_", "aten::unsqueeze_"};
  for (const char* n : kNames) {
    if (std::strcmp(name, n) == 0) return true;
  }
  return false;
}

bool is_in_place(const at::RecordFunction& fn) {
  if (ends_with(fn.name(), "_")) return true;
  const auto op = fn.operator_name();
  return op && op->overload_name == "out";
}

bool tensor_nonfinite(const at::Tensor& t) {
  TensorView view;
  return readable_view(t, &view) && compute_stats_cpu(view).nonfinite();
}

// A NaN/Inf handed to the op as a constant: a Python float argument, or a
// 0-dim tensor (how torch wraps Python numbers, and scalars such as the inf
// that isfinite compares with).
bool constant_nonfinite(const c10::IValue& value) {
  if (value.isDouble()) return !std::isfinite(value.toDouble());
  if (value.isTensor()) {
    const at::Tensor& t = value.toTensor();
    return t.defined() && t.dim() == 0 && tensor_nonfinite(t);
  }
  return false;
}

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

bool in_backward() { return !t_backward.empty(); }

// The module a forward op runs in: the innermost module (or the enclosing op's
// module, which its parameters may have refined), refined again by the first
// input that is a watched parameter of a module inside it.
uint32_t op_context(const at::RecordFunction& fn) {
  uint32_t context = innermost_module();
  if (t_depth > 0) {
    const uint32_t enclosing = t_pending[t_depth - 1].context;
    if (enclosing != OVF_NO_ID && module_within(enclosing, context)) context = enclosing;
  }
  if (!param_registry().any.load(std::memory_order_acquire)) return context;
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
    t_backward.push_back({fn.handle(), known ? origin.op_id : OVF_NO_ID, known ? origin.module_id : OVF_NO_ID});
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
    g_forward_ops[static_cast<size_t>(fn.seqNr()) % kForwardOps] = {fn.seqNr(), op_name_id(fn.name()), context};
  }
  if (!observed) return nullptr;
  if (t_depth == t_pending.size()) t_pending.emplace_back();
  PendingOp& op = t_pending[t_depth++];
  op.handle = fn.handle();
  op.context = context;
  op.in_place = is_in_place(fn);
  op.input_nonfinite = false;
  op.constant_nonfinite = false;
  op.inputs.clear();
  for (const c10::IValue& input : fn.inputs()) {
    if (constant_nonfinite(input)) {
      op.constant_nonfinite = true;  // deliberate: the op was told to make this value
      continue;
    }
    for_each_tensor(input, [&](const at::Tensor& t) {
      if (op.in_place) {
        op.input_nonfinite = op.input_nonfinite || tensor_nonfinite(t);
      } else {
        op.inputs.push_back(t);
      }
    });
  }
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

void record_outputs(const at::RecordFunction& fn, PendingOp& op) {
  const char* name = fn.name();
  if (writes_no_values(name)) return;
  const bool backward = in_backward();
  const BackwardNode* node = backward ? &t_backward.back() : nullptr;
  std::vector<at::Tensor> outputs;
  for (const c10::IValue& value : fn.outputs()) {
    for_each_tensor(value, [&](const at::Tensor& t) { outputs.push_back(t); });
  }
  bool inputs_checked = false, carried = op.input_nonfinite;
  for (size_t i = 0; i < outputs.size(); ++i) {
    const at::Tensor& out = outputs[i];
    // A view of an input produces no values of its own (in-place ops do).
    if (!op.in_place && aliases_an_input(out, op)) continue;
    TensorView view;
    if (!readable_view(out, &view)) continue;
    const Stats s = compute_stats_cpu(view);
    ovf_record r;
    std::memset(&r, 0, sizeof r);
    r.kind = OVF_KIND_OP_OUTPUT;
    r.frame_seq = OVF_NO_SEQ;
    r.name_id = op_name_id(name);
    r.label_id = output_label_id(i, outputs.size());
    r.context_id = node != nullptr ? node->module_id : op.context;
    r.aux_id = node != nullptr ? node->forward_op_id : OVF_NO_ID;
    r.dtype = view.dtype;
    const DeviceId device = device_of(out);
    r.device_type = device.type;
    r.device_index = device.index;
    r.flags = OVF_FLAG_HAS_STATS | (s.numel == 0 ? OVF_FLAG_EMPTY : 0) | (backward ? OVF_FLAG_BACKWARD : 0);
    if (s.nonfinite()) {
      if (!inputs_checked) {
        for (const at::Tensor& in : op.inputs) carried = carried || tensor_nonfinite(in);
        inputs_checked = true;
      }
      r.flags |= OVF_FLAG_NONFINITE | (carried                 ? OVF_FLAG_CARRIER
                                       : op.constant_nonfinite ? OVF_FLAG_CONSTANT
                                                               : OVF_FLAG_PRODUCER);
    }
    copy_stats(s, &r);
    const uint32_t events = Monitor::instance().op_output(r);
    if (events != 0) {
      if (OpEventHandler handler = g_op_event_handler.load(std::memory_order_acquire)) handler(r, events);
    }
  }
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
    if (Monitor::instance().active() && ovf_state.control.enabled) record_outputs(fn, op);
  } catch (const std::exception&) {
    // An op's outputs ovf cannot read must never fail the op itself.
  }
  op.inputs.clear();  // release the references now, not when the slot is reused
  t_depth = i - 1;
}

}  // namespace

void watch_parameter(const at::Tensor& param, uint32_t module_name_id) {
  if (!param.defined()) return;
  ParamRegistry& registry = param_registry();
  std::unique_lock<std::shared_mutex> lock(registry.mutex);
  if (!registry.by_impl.emplace(param.unsafeGetTensorImpl(), module_name_id).second) return;
  if (param.has_storage()) registry.by_storage.emplace(param.storage().unsafeGetStorageImpl(), module_name_id);
  registry.keep.push_back(param);
  registry.any.store(true, std::memory_order_release);
}

void clear_watched_parameters() {
  ParamRegistry& registry = param_registry();
  std::vector<at::Tensor> released;
  {
    std::unique_lock<std::shared_mutex> lock(registry.mutex);
    registry.any.store(false, std::memory_order_release);
    registry.by_impl.clear();
    registry.by_storage.clear();
    released.swap(registry.keep);
  }
  // the last references may free tensors: outside the lock
}

uint32_t parameter_module(const at::Tensor& t) {
  ParamRegistry& registry = param_registry();
  if (!registry.any.load(std::memory_order_acquire) || !t.defined()) return OVF_NO_ID;
  std::shared_lock<std::shared_mutex> lock(registry.mutex);
  auto it = registry.by_impl.find(t.unsafeGetTensorImpl());
  if (it != registry.by_impl.end()) return it->second;
  if (!t.has_storage() || registry.by_storage.empty()) return OVF_NO_ID;
  auto st = registry.by_storage.find(t.storage().unsafeGetStorageImpl());
  return st != registry.by_storage.end() ? st->second : OVF_NO_ID;
}

bool module_within(uint32_t inner, uint32_t outer) {
  if (outer == OVF_NO_ID || inner == outer) return true;
  if (inner == OVF_NO_ID) return false;
  const std::string_view o = interned(outer), i = interned(inner);
  if (o.empty()) return true;  // the root module contains every path
  return i.size() > o.size() && i.compare(0, o.size(), o) == 0 && i[o.size()] == '.';
}

void set_op_event_handler(OpEventHandler handler) { g_op_event_handler.store(handler, std::memory_order_release); }

void sync_op_observer() {
  const bool wanted = (read_observe() & (OVF_OBSERVE_OPS | OVF_OBSERVE_BACKWARD)) != 0;
  if (wanted == g_registered) return;
  std::lock_guard<std::mutex> lock(g_register_mutex);
  if (wanted && !g_registered) {
    g_handle = at::addGlobalCallback(at::RecordFunctionCallback(&on_start, &on_end)
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
