// The C++ API (ovf/ovf.h) over the runtime: a session, the op observer armed,
// modules named by path, and the on_nan modes acted on at the first event.
//
// C++ modules have no forward hooks, so there are no module frames: the op
// observer finds the value (its records carry the module: a ModuleScope, or the
// parameters an op takes, parameters.h), and the core's response step decides
// what happens; this file carries it out: print, abort, wait for a debugger, or
// throw the pending error at the next next_batch() / detect_overflow(), never
// from inside the op's callback.
#include "ovf/ovf.h"

#include <atomic>
#include <cstdio>
#include <cstdlib>
#include <iostream>
#include <mutex>
#include <unordered_map>

#include "control.h"
#include "cuda_backend.h"
#include "module_stack.h"
#include "monitor.h"
#include "op_groups.h"
#include "op_observer.h"
#include "options.h"
#include "parameters.h"
#include "report.h"
#include "ring_writer.h"
#include "torch_nn.h"
#include "torch_tensor.h"

namespace ovf {

namespace {

struct Active {
  std::unordered_map<const torch::nn::Module*, uint32_t> module_ids;
};

std::atomic<Active*> g_active{nullptr};

void write_stdout(const std::string& text) {
  if (text.empty()) return;
  std::cout << text << std::flush;
}

// The core's response, carried out: its text printed, then abort or wait (a
// raise is pending in the Monitor, thrown by the next API call).
void carry_out(const Response& response) {
  write_stdout(response.text);
  if (response.action == Action::kAbort) abort_now(response.message);
  if (response.action == Action::kWait) wait_for_release(nullptr);  // until released
}

// The op observer's handler: the core's response, carried out at the op.
// Must not throw.
void on_op_event(const ovf_record& record, uint32_t events) {
  if (g_active.load(std::memory_order_acquire) == nullptr) return;
  try {
    carry_out(Monitor::instance().respond_to_op(record, events));
  } catch (...) {
    // formatting failed (memory): the event stays in the ring for a debugger
  }
}

// The program's end, as Python's exit judge does it: a NaN/Inf whose answer came
// too late for the program's code -- a raise decided after its last next_batch()
// or detect_overflow(), a step's event that no later op answered -- or that
// on_nan warn let it go on after, ends it with status 1 and one line that says
// why: a script or scheduler sees the failure the report told. An exit handler
// registered at the first Watch (after the Monitor and the C++ streams exist, so
// it runs before they are torn down); it replaces the program's own status, and
// flushes what std::exit would have.
void judge_at_exit() {
  Monitor& monitor = Monitor::instance();
  carry_out(monitor.answer_unanswered_step());
  uint64_t batch = 0;
  const char* why = nullptr;
  if (monitor.take_pending_raise(&batch)) {
    why =
        "ovf: non-finite values were found after the program's last check (the report above); "
        "exit status 1, as the throw would have given\n";
  } else if (monitor.went_on_after_nonfinite()) {
    why =
        "ovf: non-finite values were found (the report above) and on_nan warn let the run go "
        "on; exit status 1\n";
  }
  if (why == nullptr) return;
  std::cout.flush();
  std::fflush(nullptr);
  std::fputs(why, stderr);
  std::_Exit(1);
}

void throw_if_pending() {
  uint64_t batch = 0;
  if (Monitor::instance().take_pending_raise(&batch)) throw NonFiniteError(kOverflowMessage, batch);
}

}  // namespace

// ------------------------------------------------------------------ Watch

struct Watch::State {
  Options options;
  Active active;
};

Watch::Watch(torch::nn::Module& model, Options options) : state_(new State) {
  const detail::EffectiveOptions e = detail::effective_options(options);
  state_->options = e.options;
  const Options& o = state_->options;
  Active* expected = nullptr;
  if (!g_active.compare_exchange_strong(expected, &state_->active)) {
    throw std::logic_error("ovf: a Watch is active already (one per process)");
  }
  try {
    for (const detail::NamedModule& m : detail::named_modules(model)) {
      const uint32_t id = intern(m.path);
      state_->active.module_ids.emplace(m.module, id);  // a shared module keeps its first path
      for (const auto& [name, p] : m.parameters) {
        register_parameter(p, id, intern(m.path.empty() ? name : m.path + "." + name));
      }
    }
    set_op_context_from_parameters(true);
    ovf_state.root_class_id = intern(detail::module_class(model));
    SessionOptions session;
    session.max_frames_to_save = o.max_frames_to_save;
    session.on_event = static_cast<ovf_on_event>(e.on_event);
    const std::string error = Monitor::instance().start_session(session);
    if (!error.empty()) throw OptionError("ovf: " + error);
    note_cuda_backend();
    ovf_control& c = ovf_state.control;
    c.stop_mask = e.stop_mask;
    c.after_batch = o.after_batch;
    write_module_glob(o.module);  // checked by effective_options
    c.observe = e.observe;
    c.generation++;
    clear_modules_on_thread();
    set_op_event_handler(&on_op_event);
    sync_op_observer();
    static const bool judged_at_exit = std::atexit(&judge_at_exit) == 0;
    (void)judged_at_exit;
    if (o.on_nan == OnNan::kAbort && !enable_core_dumps()) {
      std::fprintf(
          stderr,
          "ovf: core dumps are disabled by the hard limit (ulimit -H -c); on_nan abort will "
          "abort without a core file\n");
    }
  } catch (...) {
    set_op_context_from_parameters(false);
    clear_parameters();
    g_active.store(nullptr);
    throw;
  }
}

Watch::~Watch() {
  ovf_state.control.observe = 0;
  ovf_state.control.generation++;
  sync_op_observer();
  flush_op_groups();  // ops judged late still reach this session's handler
  set_op_event_handler(nullptr);
  Monitor::instance().stop_session();
  set_op_context_from_parameters(false);
  clear_parameters();
  g_active.store(nullptr, std::memory_order_release);
}

void Watch::next_batch() {
  // A debugger may have changed control.observe on the live process.
  sync_op_observer();
  throw_if_pending();  // the failed batch is not counted, as in Python
  Monitor::instance().end_batch();
}

void Watch::after_step(const torch::optim::Optimizer& optimizer) {
  detail::check_optimizer(optimizer);
}

uint64_t Watch::batch() const { return ovf_state.batch; }

const Options& Watch::options() const { return state_->options; }

// ------------------------------------------------------------------ detect_overflow

bool detect_overflow(const at::Tensor& var, const std::string& ctx) {
  detail::apply_environment_without_watch();
  std::string text;
  const ovf_record line = tensor_line(OVF_KIND_CHECKPOINT, 0, var);
  const bool found =
      !(line.flags & OVF_FLAG_NO_DATA) && Monitor::instance().checkpoint(line, ctx, &text);
  write_stdout(text);
  throw_if_pending();
  return found;
}

// ------------------------------------------------------------------ ModuleScope

ModuleScope::ModuleScope(const torch::nn::Module* module) {
  Active* active = g_active.load(std::memory_order_acquire);
  if (active == nullptr || module == nullptr) return;
  auto it = active->module_ids.find(module);
  if (it == active->module_ids.end()) return;
  push_module(this, it->second, __atomic_load_n(&ovf_state.write_seq, __ATOMIC_ACQUIRE));
  pushed_ = true;
}

ModuleScope::ModuleScope(const std::string& name) {
  if (g_active.load(std::memory_order_acquire) == nullptr) return;
  push_module(this, intern(name), __atomic_load_n(&ovf_state.write_seq, __ATOMIC_ACQUIRE));
  pushed_ = true;
}

ModuleScope::~ModuleScope() {
  if (pushed_) pop_module(this);
}

std::string report() {
  const uint64_t end = ovf_state.last_event_seq == OVF_NO_SEQ
                           ? __atomic_load_n(&ovf_state.write_seq, __ATOMIC_ACQUIRE)
                           : ovf_state.last_event_seq + 1;
  return format_event_report(ovf_state.batch, 0, end, ovf_state.max_frames_to_save,
                             /*session_start=*/0);
}

}  // namespace ovf
