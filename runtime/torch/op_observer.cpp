// RecordFunction callbacks feeding OP_OUTPUT records into the ring (the outputs
// themselves are judged in op_outputs.cpp).
//
// Outputs are readable only in the end callback and inputs only in the start
// callback (RecordFunction frees them in between), so the start callback keeps
// references to the input tensors on a per-thread stack and the end callback
// checks them only when an output is non-finite: that tells a producer (all
// inputs finite) from a carrier. In-place ops overwrite their input, so theirs
// is read at the start instead (and judged with the outputs: op_groups.h).
//
// An op's module is the innermost module whose forward runs (module hooks, the
// C++ API's scopes), refined by the parameters it takes (param_context.h): the
// C++ API has no module hooks, so aten::linear on fc.weight names "fc" (parameters.h).
#include "op_observer.h"

#include <ATen/record_function.h>
#include <torch/csrc/autograd/graph_task.h>

#include <array>
#include <atomic>
#include <cmath>
#include <cstring>
#include <mutex>
#include <vector>

#include "constant_origins.h"
#include "control.h"
#include "device_engine.h"
#include "known_finite.h"
#include "module_stack.h"
#include "monitor.h"
#include "op_facts.h"
#include "op_groups.h"
#include "op_pending.h"
#include "op_verdict.h"
#include "parameters.h"
#include "record_kinds.h"
#include "stats_cpu.h"
#include "torch_tensor.h"

namespace ovf {
namespace op_detail {
namespace {

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
thread_local int t_in_collective = 0;  // collectives running on this thread (nested ops are theirs)
thread_local std::vector<BackwardNode> t_backward;
thread_local int t_in_compiled = 0;  // torch.compile'd regions running on this thread
// set_op_site's: a compiled graph's node whose ops run again eagerly
thread_local uint32_t t_site_module = OVF_NO_ID;
thread_local uint32_t t_site_location = OVF_NO_ID;
thread_local bool t_site_backward = false;             // a node of a compiled backward graph
thread_local uint32_t t_site_gradient_of = OVF_NO_ID;  // ... the forward op it differentiates

std::mutex g_register_mutex;
at::CallbackHandle g_handle = 0;
bool g_registered = false;

uint32_t read_observe() { return read_control(ovf_state.control.observe); }

// A NaN/Inf handed to the op as a constant: a Python float argument, or a
// 0-dim tensor (how torch wraps Python numbers, and scalars such as the inf
// that isfinite compares with). Sets *nan when it is a NaN. A 0-dim device
// tensor is judged with the op's outputs instead (op.start_inputs): its value
// is not waited for here.
bool constant_nonfinite(PendingOp& op, const c10::IValue& value, bool* nan) {
  if (value.isDouble()) {
    *nan = std::isnan(value.toDouble());
    return !std::isfinite(value.toDouble());
  }
  if (!value.isTensor()) return false;
  const at::Tensor& t = value.toTensor();
  if (!t.defined() || t.dim() != 0) return false;
  TensorView view;
  if (!stats_view(t, &view)) return false;
  const StatsRef stats = stats_as_of_now(t, view, StatsUse::kJudging);
  if (stats.batch) {
    op.start_inputs.push_back({t, stats, /*constant_candidate=*/true});
    return false;
  }
  if (!stats.known.nonfinite()) return false;
  *nan = stats.known.nan_count > 0;
  return true;
}

// An input the op writes in place: its value now, judged with the outputs; not
// read again when it is an earlier op's output seen finite and unchanged since
// (known_finite.h) and no collective wrote it.
void note_start_input(PendingOp& op, const at::Tensor& t) {
  if (received_through(t) == OVF_NO_ID && known_finite(t)) {
    StatsRef finite;
    finite.known.has_stats = true;  // no NaN, no Inf: all the judging reads
    op.start_inputs.push_back({t, finite, /*constant_candidate=*/false});
    return;
  }
  TensorView view;
  if (!stats_view(t, &view)) return;
  op.start_inputs.push_back({t, stats_as_of_now(t, view, StatsUse::kJudging, /*submit_now=*/true),
                             /*constant_candidate=*/false});
}

// The overload of the op `fn` runs, into `out` (its capacity reused): torch 2.14
// names it without a copy; 2.6's RecordFunction has no overload_name(), only a
// copy of the whole OperatorName.
template <typename Fn>
auto note_overload(const Fn& fn, std::string& out, int /*preferred*/)
    -> decltype(void(fn.overload_name())) {
  out.assign(fn.overload_name());
}
template <typename Fn>
void note_overload(const Fn& fn, std::string& out, long /*fallback*/) {
  const auto name = fn.operator_name();
  out.assign(name ? name->overload_name : std::string());
}

// A number torch wrapped into a tensor for the op (`mask * 2.0`): a constant.
bool wrapped_number(const at::Tensor& t) { return t.unsafeGetTensorImpl()->is_wrapped_number(); }

// The backward node an op runs in: a compiled backward graph's node run again eagerly
// (set_op_site) is named by the forward op, module and line given for it.
BackwardNode* node_of_site(BackwardNode* node) {
  thread_local BackwardNode site;
  if (!t_site_backward) return node;
  site = {0, t_site_gradient_of, t_site_module, t_site_location};
  return &site;
}

// Inside a backward node, or between nodes of a backward pass: the engine's own
// ops (InputBuffer's sum of two gradients of one tensor) run outside every node;
// or a compiled backward graph's node run again eagerly.
bool in_backward() {
  return !t_backward.empty() || torch::autograd::get_current_graph_task_id() != -1 ||
         t_site_backward;
}

// The module a forward op runs in: the innermost module (or the enclosing op's
// module, which its parameters may have refined), refined again by the first
// input that is a watched parameter of a module inside it.
uint32_t op_context(const at::RecordFunction& fn) {
  uint32_t context = t_site_module != OVF_NO_ID ? t_site_module : innermost_module();
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

// A collective (c10d::allreduce_, _reduce_scatter_base_, ...) writes what other
// ranks sent, on the transport's threads, after its end callback: its outputs are
// never read here. The storages it writes are noted instead, in the forward and
// backward pass alike, so that the op that carries a NaN/Inf out of them names it.
// c10d's schemas mark no argument written, but every collective writes its first
// one: allreduce_'s and broadcast_'s tensors in place, _reduce_scatter_base_'s and
// _allgather_base_'s output, allgather_'s and reduce_scatter_'s output lists, recv_'s
// buffers. Its inputs are this rank's own values, not noted.
void note_collective(const at::RecordFunction& fn) {
  const OpFacts& facts = op_facts(fn);
  const c10::ArrayRef<const c10::IValue> inputs = fn.inputs();
  if (inputs.empty()) return;
  for_each_tensor(inputs[0], [&](const at::Tensor& t) { note_received(t, facts.name_id); });
  forget_known_finite();  // it writes without a version: any tensor may have changed
}

// The storages an op is about to write, judged or not (a backward op while only
// the forward is observed, a collective's own copies): what was seen finite
// there is no longer known (known_finite.h). A judged op's written inputs are
// looked up first.
void note_writes(const at::RecordFunction& fn) {
  const OpFacts& facts = op_facts(fn);
  const std::vector<bool>& written = facts.written;
  const bool all = facts.writes_unmarked || (written.empty() && facts.in_place);
  size_t i = 0;
  for (const c10::IValue& input : fn.inputs()) {
    if (all || (i < written.size() && written[i])) for_each_tensor(input, note_storage_written);
    ++i;
  }
}

// Inside a compiled region the ops that run are the compiled code's own (Inductor's
// extern kernels writing its buffers, from lines of generated code): not observed.
// ovf sees into compiled graphs through their node checks instead (_compile_ops.py),
// whose eager runs of a graph's nodes are observed, as a replay's ops are.
bool in_compiled_code() {
  return t_in_compiled > 0 && !op_site_given() && !Monitor::instance().replaying();
}

std::unique_ptr<at::ObserverContext> on_start(const at::RecordFunction& fn) {
  if (rerunning() || is_ovf_op(fn)) return nullptr;
  if (is_compiler_scope(fn)) {
    if (is_compiled_region(fn)) {
      forget_known_finite();  // its kernels write without ops
      ++t_in_compiled;
    }
    return nullptr;
  }
  if (fn.scope() == at::RecordScope::USER_SCOPE) {
    if (is_transport_work(fn)) ++t_in_collective;
    return nullptr;
  }
  const uint32_t observe = read_observe();
  if (is_collective(fn)) {
    note_collective(fn);
    ++t_in_collective;
    return nullptr;
  }
  // The ops a collective runs on this thread (Gloo's copies into its output) are
  // the collective's own: not watched, or a copy out of its buffer would pass for
  // a value of their making (or a constant, from a buffer made by zeros). So are
  // compiled code's.
  if (t_in_collective > 0 || in_compiled_code()) {
    note_writes(fn);
    return nullptr;
  }
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
  if (!observed) note_writes(fn);
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
  if (t_depth == 0) poll_op_groups();  // the groups whose statistics arrived meanwhile
  if (t_depth == t_pending.size()) t_pending.emplace_back();
  PendingOp& op = t_pending[t_depth++];
  op.handle = fn.handle();
  op.facts = &op_facts(fn);
  op.context = context;
  op.known_finite_epoch = known_finite_epoch();
  op.carried_in = false;
  op.carried_gradient = OVF_NO_ID;
  op.carried_collective = OVF_NO_ID;
  op.overwrote_received = OVF_NO_ID;
  op.constant = false;
  op.deliberate_nan = false;
  // Judged input by input below: a factory is constant whatever it is given;
  // any other op while all it reads is (none of it trained, and not random).
  op.only_constants = op.facts->makes_constant || (!op.facts->random && any_origins());
  bool read_a_tensor = false;
  op.inputs.clear();
  op.operands.clear();
  op.start_inputs.clear();
  op.scanned.clear();
  op.arguments.clear();
  op.rerun = reruns(*op.facts, fn);
  if (op.rerun) {
    op.arguments.assign(fn.inputs().begin(), fn.inputs().end());
    note_overload(fn, op.overload, 0);
  }
  const std::vector<bool>& written = op.facts->written;
  // Without a schema, an in-place op's inputs are judged before it writes them.
  const bool judge_all_now = written.empty() && op.facts->in_place;
  size_t index = 0;
  for (const c10::IValue& input : fn.inputs()) {
    const size_t i = index++;
    bool nan = false;
    if (constant_nonfinite(op, input, &nan)) {
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
        note_start_input(op, t);
      }
    });
  }
  if (!op.facts->makes_constant && !read_a_tensor) op.only_constants = false;
  note_writes(fn);
  return nullptr;
}

}  // namespace

uint32_t program_location() {
  if (t_site_location != OVF_NO_ID) return t_site_location;
  const LocationProvider provider = g_location_provider.load(std::memory_order_acquire);
  return provider != nullptr ? provider() : OVF_NO_ID;
}

namespace {

void on_end(const at::RecordFunction& fn, at::ObserverContext* /*unused*/) {
  if (rerunning() || is_ovf_op(fn)) return;
  if (is_compiler_scope(fn)) {
    if (is_compiled_region(fn) && t_in_compiled > 0) --t_in_compiled;
    return;
  }
  if (fn.scope() == at::RecordScope::USER_SCOPE) {
    if (is_transport_work(fn) && t_in_collective > 0) --t_in_collective;
    return;
  }
  if (is_collective(fn)) {
    if (t_in_collective > 0) --t_in_collective;
    return;
  }
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
    if (Monitor::instance().active() && read_control(ovf_state.control.enabled)) {
      EndedOp& ended = next_ended_op();
      try {
        end_op(fn, op, i >= 2 ? &t_pending[i - 2] : nullptr,
               node_of_site(t_backward.empty() ? nullptr : &t_backward.back()), in_backward(),
               ended);
      } catch (...) {
        drop_ended_op();
        throw;
      }
    }
  } catch (const std::exception&) {
    // An op's outputs ovf cannot read must never fail the op itself.
  }
  op.inputs.clear();  // release the references now, not when the slot is reused
  op.start_inputs.clear();
  op.scanned.clear();
  op.arguments.clear();
  t_depth = i - 1;
  if (t_depth > 0) return;
  try {
    end_outermost_op();
  } catch (const std::exception&) {
  }
}

}  // namespace
}  // namespace op_detail

void set_location_provider(LocationProvider provider) {
  using op_detail::g_location_provider;
  g_location_provider.store(provider, std::memory_order_release);
}

void set_op_site(uint32_t module_id, uint32_t location_id, bool backward, uint32_t gradient_of) {
  op_detail::t_site_module = module_id;
  op_detail::t_site_location = location_id;
  op_detail::t_site_backward = backward;
  op_detail::t_site_gradient_of = gradient_of;
}

bool op_site_given() {
  using namespace op_detail;  // NOLINT(google-build-using-namespace): the site's state
  return t_site_module != OVF_NO_ID || t_site_location != OVF_NO_ID || t_site_backward;
}

void sync_op_observer() {
  using namespace op_detail;  // NOLINT(google-build-using-namespace): its callbacks and state
  const bool wanted = (read_observe() & (OVF_OBSERVE_OPS | OVF_OBSERVE_BACKWARD)) != 0;
  if (wanted == g_registered) return;
  std::lock_guard<std::mutex> lock(g_register_mutex);
  if (wanted && !g_registered) {
    forget_known_finite();  // what ran while nothing was observed wrote unseen
    g_handle = at::addGlobalCallback(
        at::RecordFunctionCallback(&on_start, &on_end)
            .needsInputs(true)
            .needsOutputs(true)
            .needsIds(true)  // unique handles pair each end with its start
            .scopes({at::RecordScope::FUNCTION, at::RecordScope::BACKWARD_FUNCTION,
                     at::RecordScope::USER_SCOPE}));
    g_registered = true;
  } else if (!wanted && g_registered) {
    at::removeCallback(g_handle);
    g_registered = false;
  }
}

}  // namespace ovf
