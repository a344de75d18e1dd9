// The C++ API's options as in effect: ovf::Options, then what the OVF_*
// environment variables (set by `ovf break-on-nan` for the next `run`) override.
#ifndef OVF_CPP_OPTIONS_H
#define OVF_CPP_OPTIONS_H

#include <cstdint>

#include "ovf/ovf.h"

namespace ovf {
namespace detail {

struct EffectiveOptions {
  Options options;
  uint32_t on_event = 0;   // enum ovf_on_event
  uint32_t stop_mask = 0;  // enum ovf_stop_bits
  uint32_t observe = 0;    // enum ovf_observe_bits
};

// Validates `given` and applies the environment; OptionError says what is wrong.
EffectiveOptions effective_options(const Options& given);

// OVF_ENABLE=1: a debugger (or python3 -m ovf) asked for ovf.
bool environment_enabled();

// Without a Watch, `ovf break-on-nan` still stops at a non-finite
// detect_overflow: the environment's on_nan and stop bits apply. Once.
void apply_environment_without_watch();

}  // namespace detail
}  // namespace ovf

#endif  // OVF_CPP_OPTIONS_H
