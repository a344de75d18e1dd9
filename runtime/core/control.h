// The debugger-writable control block as the runtime reads it, and the names
// of its values (OVF_STOP, OVF_OBSERVE, on_nan) shared by every driver.
#ifndef OVF_CONTROL_H
#define OVF_CONTROL_H

#include <cstdint>
#include <string>

#include "ovf/ring.h"

namespace ovf {

// A debugger writes the control block behind the compiler's back: every read
// of a field goes through here.
template <typename T>
T read_control(const T& field) {
  return *const_cast<const volatile T*>(&field);
}

struct NamedBit {
  const char* name;
  uint32_t bit;
};

// enum ovf_stop_bits and enum ovf_observe_bits by name, in the contract's order.
extern const NamedBit kStopBitNames[11];
extern const NamedBit kObserveBitNames[5];

// enum ovf_on_event by name ("raise", ..., "continue"); "unknown" out of range.
const char* on_event_name(uint32_t on_event);
// The code of an on_event name, or -1.
int on_event_code(const std::string& name);

// A comma list of names from `table` as bits. Returns "" or, for an unknown
// name, the one-line error naming `where` and every accepted name.
template <size_t N>
std::string parse_bit_names(const std::string& text, const char* where, const NamedBit (&table)[N],
                            uint32_t* bits);

// Writes the module glob. Returns "" or why it does not fit the block.
std::string write_module_glob(const std::string& glob);

}  // namespace ovf

#endif  // OVF_CONTROL_H
