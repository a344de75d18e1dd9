#include "control.h"

#include <cstring>

namespace ovf {

const NamedBit kStopBitNames[11] = {{"nan", OVF_STOP_NAN},
                                    {"inf", OVF_STOP_INF},
                                    {"above", OVF_STOP_ABOVE},
                                    {"below", OVF_STOP_BELOW},
                                    {"traced", OVF_STOP_TRACED},
                                    {"abort_after", OVF_STOP_ABORT_AFTER},
                                    {"producer_only", OVF_STOP_PRODUCER_ONLY},
                                    {"backward", OVF_STOP_BACKWARD},
                                    {"scaler", OVF_STOP_SCALER},
                                    {"early", OVF_STOP_EARLY},
                                    {"cast", OVF_STOP_CAST}};

const NamedBit kObserveBitNames[5] = {{"ops", OVF_OBSERVE_OPS},
                                      {"backward", OVF_OBSERVE_BACKWARD},
                                      {"optimizer_state", OVF_OBSERVE_OPTIMIZER_STATE},
                                      {"cast", OVF_OBSERVE_CAST},
                                      {"capture_optimizer", OVF_OBSERVE_CAPTURE_OPTIMIZER}};

namespace {
const char* const kOnEventNames[] = {"raise", "warn", "abort", "wait", "continue"};
}  // namespace

const char* on_event_name(uint32_t on_event) {
  return on_event < sizeof kOnEventNames / sizeof kOnEventNames[0] ? kOnEventNames[on_event]
                                                                   : "unknown";
}

int on_event_code(const std::string& name) {
  for (size_t i = 0; i < sizeof kOnEventNames / sizeof kOnEventNames[0]; ++i) {
    if (name == kOnEventNames[i]) return static_cast<int>(i);
  }
  return -1;
}

template <size_t N>
std::string parse_bit_names(const std::string& text, const char* where, const NamedBit (&table)[N],
                            uint32_t* out) {
  uint32_t bits = 0;
  size_t start = 0;
  while (start <= text.size()) {
    size_t comma = text.find(',', start);
    if (comma == std::string::npos) comma = text.size();
    std::string name = text.substr(start, comma - start);
    const size_t first = name.find_first_not_of(" \t");
    name = first == std::string::npos
               ? ""
               : name.substr(first, name.find_last_not_of(" \t") - first + 1);
    if (!name.empty()) {
      bool known = false;
      for (const NamedBit& entry : table) {
        if (name == entry.name) {
          bits |= entry.bit;
          known = true;
        }
      }
      if (!known) {
        std::string all;
        for (const NamedBit& entry : table)
          all += std::string(all.empty() ? "" : ", ") + entry.name;
        return std::string("ovf: ") + where + " names values from " + all + "; got '" + name + "'";
      }
    }
    start = comma + 1;
  }
  *out = bits;
  return "";
}

template std::string parse_bit_names(const std::string&, const char*, const NamedBit (&)[11],
                                     uint32_t*);
template std::string parse_bit_names(const std::string&, const char*, const NamedBit (&)[5],
                                     uint32_t*);

std::string write_module_glob(const std::string& glob) {
  if (glob.size() >= OVF_GLOB_SIZE) return "ovf: module glob longer than 255 bytes";
  ovf_control& c = ovf_state.control;
  std::memset(c.module_glob, 0, OVF_GLOB_SIZE);
  std::memcpy(c.module_glob, glob.data(), glob.size());
  return "";
}

}  // namespace ovf
