#include "options.h"

#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <mutex>

#include "control.h"
#include "monitor.h"

namespace ovf {
namespace detail {
namespace {

uint32_t on_event_of(OnNan on_nan) {
  switch (on_nan) {
    case OnNan::kRaise: return OVF_ON_EVENT_RAISE;
    case OnNan::kWarn: return OVF_ON_EVENT_WARN;
    case OnNan::kAbort: return OVF_ON_EVENT_ABORT;
    case OnNan::kWait: return OVF_ON_EVENT_WAIT;
    case OnNan::kContinue: return OVF_ON_EVENT_CONTINUE;
  }
  throw OptionError("ovf: on_nan must be one of raise, warn, abort, wait, continue");
}

OnNan on_nan_of(const std::string& text, const char* where) {
  static const OnNan kByCode[] = {OnNan::kRaise, OnNan::kWarn, OnNan::kAbort, OnNan::kWait,
                                  OnNan::kContinue};
  const int code = on_event_code(text);
  if (code < 0) {
    throw OptionError(std::string("ovf: ") + where +
                      " must be one of raise, warn, abort, wait, continue; got '" + text + "'");
  }
  return kByCode[code];
}

int64_t parse_int(const char* name, const std::string& text) {
  errno = 0;
  char* end = nullptr;
  const long long value = std::strtoll(text.c_str(), &end, 10);
  if (text.empty() || end == nullptr || *end != '\0' || errno != 0) {
    throw OptionError(std::string("ovf: environment variable ") + name +
                      " must be an integer; got '" + text + "'");
  }
  return value;
}

const char* env(const char* name) { return std::getenv(name); }

template <size_t N>
uint32_t bits_of(const char* text, const char* where, const NamedBit (&table)[N]) {
  uint32_t bits = 0;
  const std::string error = parse_bit_names(text, where, table, &bits);
  if (!error.empty()) throw OptionError(error);
  return bits;
}

}  // namespace

bool environment_enabled() {
  const char* value = env("OVF_ENABLE");
  return value != nullptr && std::strcmp(value, "1") == 0;
}

EffectiveOptions effective_options(const Options& given) {
  EffectiveOptions e;
  e.options = given;
  Options& o = e.options;
  if (o.max_frames_to_save == 0) throw OptionError("ovf: max_frames_to_save must be at least 1");
  if (o.after_batch < 0) throw OptionError("ovf: after_batch must be >= 0");
  on_event_of(o.on_nan);  // validates
  bool env_stop = false;
  uint32_t env_observe = 0;
  if (o.from_environment && environment_enabled()) {
    if (const char* v = env("OVF_ON_NAN")) o.on_nan = on_nan_of(v, "OVF_ON_NAN");
    if (const char* v = env("OVF_MAX_FRAMES")) {
      const int64_t n = parse_int("OVF_MAX_FRAMES", v);
      if (n < 1 || n > UINT32_MAX) {
        throw OptionError("ovf: OVF_MAX_FRAMES must be an integer >= 1; got '" + std::string(v) +
                          "'");
      }
      o.max_frames_to_save = static_cast<uint32_t>(n);
    }
    if (const char* v = env("OVF_STOP")) {
      e.stop_mask = bits_of(v, "OVF_STOP", kStopBitNames);
      env_stop = true;
    }
    if (const char* v = env("OVF_OBSERVE"))
      env_observe = bits_of(v, "OVF_OBSERVE", kObserveBitNames);
    if (const char* v = env("OVF_MODULE")) o.module = v;
    if (const char* v = env("OVF_AFTER_BATCH")) {
      o.after_batch = parse_int("OVF_AFTER_BATCH", v);
      if (o.after_batch < 0) throw OptionError("ovf: OVF_AFTER_BATCH must be >= 0");
    }
  }
  if (o.module.size() >= OVF_GLOB_SIZE) throw OptionError("ovf: module glob longer than 255 bytes");
  e.on_event = on_event_of(o.on_nan);
  // Ops are the only thing a C++ program is observed by: the environment adds
  // to them, never turns them off.
  e.observe =
      (o.ops ? OVF_OBSERVE_OPS : 0u) | (o.backward ? OVF_OBSERVE_BACKWARD : 0u) | env_observe;
  o.ops = e.observe & OVF_OBSERVE_OPS;
  o.backward = e.observe & OVF_OBSERVE_BACKWARD;
  if (!env_stop) {
    e.stop_mask = OVF_STOP_NAN | OVF_STOP_INF |
                  (o.carriers ? 0u : uint32_t{OVF_STOP_PRODUCER_ONLY}) |
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

void apply_environment_without_watch() {
  static std::once_flag once;
  std::call_once(once, [] {
    if (Monitor::instance().active() || !environment_enabled()) return;
    ovf_control& c = ovf_state.control;
    if (const char* v = env("OVF_ON_NAN")) c.on_event = on_event_of(on_nan_of(v, "OVF_ON_NAN"));
    if (const char* v = env("OVF_STOP")) c.stop_mask = bits_of(v, "OVF_STOP", kStopBitNames);
    c.generation++;
  });
}

}  // namespace detail
}  // namespace ovf
