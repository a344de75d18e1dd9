// The C++ API (ovf/ovf.h) over the runtime: a session, the op observer armed,
// modules named by path, and the on_nan modes acted on at the first event.
//
// C++ modules have no forward hooks, so there are no module frames: the op
// observer finds the value (its records carry the module: a ModuleScope, or the
// parameters an op takes, param_context.h), and this file does what the Python
// driver's forward hook does with an event: print the report, abort, wait for a
// debugger, or remember the error and throw it at the next next_batch() /
// detect_overflow(), never from inside the op's callback.
#include "ovf/ovf.h"

#include <sys/resource.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <iostream>
#include <mutex>
#include <unordered_map>

#include "module_names.h"
#include "ovf/module_stack.h"
#include "ovf/monitor.h"
#include "ovf/op_observer.h"
#include "ovf/param_context.h"
#include "ovf/report.h"
#include "ovf/ring_writer.h"
#include "ovf/torch_tensor.h"

namespace ovf {

namespace {

constexpr const char* kOverflowMessage =
    "DebugUnderflowOverflow: inf/nan detected, aborting as there is no point running further. "
    "Please scroll up above this traceback to see the activation values prior to this event.";

template <typename T>
T read_control(const T& field) {
  return *const_cast<const volatile T*>(&field);
}

// ------------------------------------------------------------------ options

const char* const kOnNanNames[] = {"raise", "warn", "abort", "wait", "continue"};

uint32_t on_event_code(OnNan on_nan) {
  switch (on_nan) {
    case OnNan::kRaise: return OVF_ON_EVENT_RAISE;
    case OnNan::kWarn: return OVF_ON_EVENT_WARN;
    case OnNan::kAbort: return OVF_ON_EVENT_ABORT;
    case OnNan::kWait: return OVF_ON_EVENT_WAIT;
    case OnNan::kContinue: return OVF_ON_EVENT_CONTINUE;
  }
  throw OptionError("ovf: on_nan must be one of raise, warn, abort, wait, continue");
}

OnNan parse_on_nan(const std::string& text, const char* where) {
  static const OnNan kValues[] = {OnNan::kRaise, OnNan::kWarn, OnNan::kAbort, OnNan::kWait, OnNan::kContinue};
  for (size_t i = 0; i < 5; ++i) {
    if (text == kOnNanNames[i]) return kValues[i];
  }
  throw OptionError(std::string("ovf: ") + where + " must be one of raise, warn, abort, wait, continue; got '" +
                    text + "'");
}

int64_t parse_int(const char* name, const std::string& text) {
  errno = 0;
  char* end = nullptr;
  const long long value = std::strtoll(text.c_str(), &end, 10);
  if (text.empty() || end == nullptr || *end != '\0' || errno != 0) {
    throw OptionError(std::string("ovf: environment variable ") + name + " must be an integer; got '" + text + "'");
  }
  return value;
}

// A comma list of names as bits; an unknown name is an OptionError naming them all.
template <size_t N>
uint32_t parse_bits(const std::string& text, const char* where, const std::pair<const char*, uint32_t> (&names)[N]) {
  uint32_t bits = 0;
  size_t start = 0;
  while (start <= text.size()) {
    size_t comma = text.find(',', start);
    if (comma == std::string::npos) comma = text.size();
    std::string name = text.substr(start, comma - start);
    const size_t first = name.find_first_not_of(" \t");
    name = first == std::string::npos ? "" : name.substr(first, name.find_last_not_of(" \t") - first + 1);
    if (!name.empty()) {
      bool known = false;
      for (const auto& entry : names) {
        if (name == entry.first) {
          bits |= entry.second;
          known = true;
        }
      }
      if (!known) {
        std::string all;
        for (const auto& entry : names) all += std::string(all.empty() ? "" : ", ") + entry.first;
        throw OptionError(std::string("ovf: ") + where + " names values from " + all + "; got '" + name + "'");
      }
    }
    start = comma + 1;
  }
  return bits;
}

const std::pair<const char*, uint32_t> kStopNames[] = {
    {"nan", OVF_STOP_NAN},       {"inf", OVF_STOP_INF},
    {"above", OVF_STOP_ABOVE},   {"below", OVF_STOP_BELOW},
    {"traced", OVF_STOP_TRACED}, {"abort_after", OVF_STOP_ABORT_AFTER},
    {"producer_only", OVF_STOP_PRODUCER_ONLY}, {"backward", OVF_STOP_BACKWARD}};
const std::pair<const char*, uint32_t> kObserveNames[] = {{"ops", OVF_OBSERVE_OPS}, {"backward", OVF_OBSERVE_BACKWARD}};

const char* env(const char* name) { return std::getenv(name); }

bool environment_enabled() {
  const char* value = env("OVF_ENABLE");
  return value != nullptr && std::strcmp(value, "1") == 0;
}

// What the control block gets: Options, then what the environment overrides.
struct Effective {
  Options options;
  uint32_t stop_mask = 0;
  uint32_t observe = 0;
};

Effective effective_options(const Options& given) {
  Effective e;
  e.options = given;
  Options& o = e.options;
  if (o.max_frames_to_save == 0) throw OptionError("ovf: max_frames_to_save must be at least 1");
  if (o.after_batch < 0) throw OptionError("ovf: after_batch must be >= 0");
  on_event_code(o.on_nan);  // validates
  bool env_stop = false;
  uint32_t env_observe = 0;
  if (o.from_environment && environment_enabled()) {
    if (const char* v = env("OVF_ON_NAN")) o.on_nan = parse_on_nan(v, "OVF_ON_NAN");
    if (const char* v = env("OVF_MAX_FRAMES")) {
      const int64_t n = parse_int("OVF_MAX_FRAMES", v);
      if (n < 1 || n > UINT32_MAX) throw OptionError("ovf: OVF_MAX_FRAMES must be an integer >= 1; got '" + std::string(v) + "'");
      o.max_frames_to_save = static_cast<uint32_t>(n);
    }
    if (const char* v = env("OVF_STOP")) {
      e.stop_mask = parse_bits(v, "OVF_STOP", kStopNames);
      env_stop = true;
    }
    if (const char* v = env("OVF_OBSERVE")) env_observe = parse_bits(v, "OVF_OBSERVE", kObserveNames);
    if (const char* v = env("OVF_MODULE")) o.module = v;
    if (const char* v = env("OVF_AFTER_BATCH")) {
      o.after_batch = parse_int("OVF_AFTER_BATCH", v);
      if (o.after_batch < 0) throw OptionError("ovf: OVF_AFTER_BATCH must be >= 0");
    }
  }
  if (o.module.size() >= OVF_GLOB_SIZE) throw OptionError("ovf: module glob longer than 255 bytes");
  // Ops are the only thing a C++ program is observed by: the environment adds
  // to them, never turns them off.
  e.observe = (o.ops ? OVF_OBSERVE_OPS : 0u) | (o.backward ? OVF_OBSERVE_BACKWARD : 0u) | env_observe;
  o.ops = e.observe & OVF_OBSERVE_OPS;
  o.backward = e.observe & OVF_OBSERVE_BACKWARD;
  if (!env_stop) {
    e.stop_mask = OVF_STOP_NAN | OVF_STOP_INF | (o.carriers ? 0u : uint32_t{OVF_STOP_PRODUCER_ONLY}) |
                  (o.backward ? uint32_t{OVF_STOP_BACKWARD} : 0u);
  } else if (!(env_observe & OVF_OBSERVE_OPS) && (e.stop_mask & (OVF_STOP_NAN | OVF_STOP_INF))) {
    // A debugger armed module-level stops (no --ops); a C++ program has only
    // ops, where the equivalent is the op that produced the value, not every
    // op that passes it on. `break-on-nan --ops --carriers` sets OVF_OBSERVE.
    e.stop_mask |= OVF_STOP_PRODUCER_ONLY;
  }
  o.carriers = !(e.stop_mask & OVF_STOP_PRODUCER_ONLY);
  return e;
}

// ------------------------------------------------------------------ the active watch

struct Active {
  std::unordered_map<const torch::nn::Module*, uint32_t> module_ids;
  uint32_t max_frames = 21;
};

std::atomic<Active*> g_active{nullptr};
std::mutex g_event_mutex;          // one event acted on at a time
uint64_t g_report_floor = 0;       // records before this were reported (or precede the session)
bool g_reported = false;           // warn and wait act on the first event only
bool g_raise_pending = false;      // raise: thrown at the next next_batch() / detect_overflow()
uint64_t g_raise_batch = 0;

void write_stdout(const std::string& text) {
  if (text.empty()) return;
  std::cout << text << std::flush;
}

// The last `max` OP_OUTPUT / CHECKPOINT records in [floor, end), oldest first.
std::vector<const ovf_record*> last_ops(uint64_t floor, uint64_t end, uint32_t max) {
  std::vector<const ovf_record*> newest_first;
  for (uint64_t seq = end; seq > floor && newest_first.size() < max;) {
    const ovf_record* r = find_record(--seq);
    if (r == nullptr) break;  // overwritten
    if (r->kind == OVF_KIND_OP_OUTPUT || r->kind == OVF_KIND_CHECKPOINT) newest_first.push_back(r);
  }
  return {newest_first.rbegin(), newest_first.rend()};
}

std::string module_text(uint32_t id) { return id == OVF_NO_ID ? "(no module)" : escape_text(interned(id)); }

// One op record as `ovf frames --ops` prints it (plugin/ovf_plugin/report.py, format_op).
std::string format_op(const ovf_record& r) {
  if (r.kind == OVF_KIND_CHECKPOINT) return format_record(r);
  std::string values;
  if ((r.flags & OVF_FLAG_HAS_STATS) && r.numel) {
    const ReferenceMinMax mm = reference_min_max(r);
    values = format_8_2e(mm.min) + " " + format_8_2e(mm.max);
  } else {
    values = std::string(17 - ((r.flags & OVF_FLAG_HAS_STATS) ? 5 : 7), ' ') +
             ((r.flags & OVF_FLAG_HAS_STATS) ? "empty" : "no data");
  }
  std::string what;
  if (r.flags & OVF_FLAG_BACKWARD) {
    what = "grad = " + escape_text(interned(r.name_id)) + " for " +
           (r.aux_id == OVF_NO_ID ? std::string("an unknown op") : escape_text(interned(r.aux_id))) + " in " +
           module_text(r.context_id);
  } else {
    what = escape_text(interned(r.label_id)) + " = " + escape_text(interned(r.name_id)) + " in " +
           module_text(r.context_id);
  }
  if (r.flags & OVF_FLAG_PRODUCER) {
    what += " (produced here)";
  } else if (r.flags & OVF_FLAG_CARRIER) {
    what += " (carried)";
  } else if (r.flags & OVF_FLAG_CONSTANT) {
    what += " (from a constant)";
  }
  return values + " " + what;
}

std::string report_text(uint64_t floor, uint64_t end, uint32_t max) {
  std::string text = format_detection_report(ovf_state.batch, floor, end, max);
  const auto ops = last_ops(floor, end, max);
  if (!ops.empty()) {
    text += "Last " + std::to_string(ops.size()) + " ops:\n" + kColumnHeader + "\n";
    for (const ovf_record* r : ops) text += format_op(*r) + "\n";
  }
  return text + describe_first_nonfinite();
}

void wait_for_debugger() {
  volatile uint32_t* released = &ovf_state.control.wait_released;
  while (*released == 0) usleep(100 * 1000);
  *released = 0;
}

// The op observer's handler: what the Python driver's forward hook does with
// an event, done at the op. Must not throw.
void on_op_event(const ovf_record& record, uint32_t events) {
  if (!(events & (OVF_STOP_NAN | OVF_STOP_INF | OVF_STOP_BACKWARD))) return;
  Active* active = g_active.load(std::memory_order_acquire);
  if (active == nullptr) return;
  const uint32_t on_event = read_control(ovf_state.control.on_event);
  if (on_event == OVF_ON_EVENT_CONTINUE) return;  // a debugger handles it
  try {
    std::lock_guard<std::mutex> lock(g_event_mutex);
    const uint64_t end = record.seq + 1;
    switch (on_event) {
      case OVF_ON_EVENT_WARN:
        if (!g_reported) write_stdout(report_text(g_report_floor, end, active->max_frames));
        g_reported = true;
        break;
      case OVF_ON_EVENT_ABORT:
        write_stdout(report_text(g_report_floor, end, active->max_frames));
        std::fprintf(stderr,
                     "ovf: non-finite value detected; aborting so that the kernel writes a core file "
                     "(open it with: gdb %s core, then: ovf frames)\n",
                     program_invocation_name);
        std::fflush(nullptr);
        std::abort();
      case OVF_ON_EVENT_WAIT:
        if (g_reported) break;
        g_reported = true;
        write_stdout(report_text(g_report_floor, end, active->max_frames) + attach_instructions(getpid()));
        wait_for_debugger();
        break;
      default:  // raise
        if (g_raise_pending) break;
        write_stdout(report_text(g_report_floor, end, active->max_frames));
        g_raise_pending = true;
        g_raise_batch = record.batch;
        break;
    }
    g_report_floor = end;
  } catch (...) {
    // formatting failed (memory): the event stays in the ring for a debugger
  }
}

void throw_if_pending() {
  std::lock_guard<std::mutex> lock(g_event_mutex);
  if (!g_raise_pending) return;
  g_raise_pending = false;
  throw NonFiniteError(kOverflowMessage, g_raise_batch);
}

void write_glob(const std::string& glob) {
  ovf_control& c = ovf_state.control;
  std::memset(c.module_glob, 0, OVF_GLOB_SIZE);
  std::memcpy(c.module_glob, glob.data(), glob.size());
}

bool enable_core_dumps() {
  rlimit limit;
  if (getrlimit(RLIMIT_CORE, &limit) != 0) return false;
  limit.rlim_cur = limit.rlim_max;
  return setrlimit(RLIMIT_CORE, &limit) == 0 && limit.rlim_cur != 0;
}

}  // namespace

// ------------------------------------------------------------------ Watch

struct Watch::State {
  Options options;
  Active active;
};

Watch::Watch(torch::nn::Module& model, Options options) : state_(new State) {
  const Effective e = effective_options(options);
  state_->options = e.options;
  const Options& o = state_->options;
  Active* expected = nullptr;
  if (!g_active.compare_exchange_strong(expected, &state_->active)) {
    throw std::logic_error("ovf: a Watch is active already (one per process)");
  }
  try {
    state_->active.max_frames = o.max_frames_to_save;
    for (const detail::NamedModule& m : detail::named_modules(model)) {
      const uint32_t id = intern(m.path);
      state_->active.module_ids.emplace(m.module, id);  // a shared module keeps its first path
      for (const at::Tensor& p : m.parameters) watch_parameter(p, id);
    }
    SessionOptions session;
    session.max_frames_to_save = o.max_frames_to_save;
    session.on_event = static_cast<ovf_on_event>(on_event_code(o.on_nan));
    const std::string error = Monitor::instance().start_session(session);
    if (!error.empty()) throw OptionError("ovf: " + error);
    ovf_control& c = ovf_state.control;
    c.stop_mask = e.stop_mask;
    c.after_batch = o.after_batch;
    write_glob(o.module);
    c.observe = e.observe;
    c.generation++;
    {
      std::lock_guard<std::mutex> lock(g_event_mutex);
      g_report_floor = __atomic_load_n(&ovf_state.write_seq, __ATOMIC_ACQUIRE);
      g_reported = false;
      g_raise_pending = false;
    }
    clear_modules_on_thread();
    set_op_event_handler(&on_op_event);
    sync_op_observer();
    if (o.on_nan == OnNan::kAbort && !enable_core_dumps()) {
      std::fprintf(stderr,
                   "ovf: core dumps are disabled by the hard limit (ulimit -H -c); on_nan abort will "
                   "abort without a core file\n");
    }
  } catch (...) {
    clear_watched_parameters();
    g_active.store(nullptr);
    throw;
  }
}

Watch::~Watch() {
  ovf_state.control.observe = 0;
  ovf_state.control.generation++;
  sync_op_observer();
  set_op_event_handler(nullptr);
  Monitor::instance().stop_session();
  clear_watched_parameters();
  g_active.store(nullptr, std::memory_order_release);
  std::lock_guard<std::mutex> lock(g_event_mutex);
  g_raise_pending = false;
}

void Watch::next_batch() {
  // A debugger may have changed control.observe on the live process.
  sync_op_observer();
  throw_if_pending();  // the failed batch is not counted, as in Python
  Monitor::instance().end_batch();
}

uint64_t Watch::batch() const { return ovf_state.batch; }

const Options& Watch::options() const { return state_->options; }

// ------------------------------------------------------------------ detect_overflow

namespace {

// Without a Watch, `ovf break-on-nan` still stops at a non-finite checkpoint:
// the environment's on_nan (continue under a debugger) and stop bits apply.
void apply_environment_without_watch() {
  static std::once_flag once;
  std::call_once(once, [] {
    if (g_active.load() != nullptr || Monitor::instance().active() || !environment_enabled()) return;
    ovf_control& c = ovf_state.control;
    if (const char* v = env("OVF_ON_NAN")) c.on_event = on_event_code(parse_on_nan(v, "OVF_ON_NAN"));
    if (const char* v = env("OVF_STOP")) c.stop_mask = parse_bits(v, "OVF_STOP", kStopNames);
    c.generation++;
  });
}

}  // namespace

bool detect_overflow(const at::Tensor& var, const std::string& ctx) {
  apply_environment_without_watch();
  std::string text;
  bool found = false;
  TensorView view;
  if (readable_view(var, &view)) {
    found = Monitor::instance().checkpoint(compute_stats_cpu(view), view.dtype, device_of(var), ctx, &text);
  }
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
  Active* active = g_active.load(std::memory_order_acquire);
  const uint32_t max = active != nullptr ? active->max_frames : ovf_state.max_frames_to_save;
  const uint64_t end = ovf_state.last_event_seq == OVF_NO_SEQ ? __atomic_load_n(&ovf_state.write_seq, __ATOMIC_ACQUIRE)
                                                              : ovf_state.last_event_seq + 1;
  return report_text(0, end, max);
}

}  // namespace ovf
