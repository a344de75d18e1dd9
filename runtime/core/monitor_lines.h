// Small pieces monitor.cpp and monitor_frames.cpp share: the batch marker,
// the threshold bits of a line, and the reference's "has nans" text.
#ifndef OVF_MONITOR_LINES_H
#define OVF_MONITOR_LINES_H

#include <cstdint>
#include <string>
#include <string_view>

#include "ovf/ring.h"

namespace ovf {

// Appends a BATCH_START marker for `batch`.
void append_batch_marker(uint64_t batch);

// The ABOVE / BELOW / CAST stop bits a floating line's statistics raise.
uint32_t threshold_bits(const ovf_record& r);

// The "<label> has nans" / "has infs" lines the reference prints for a line.
std::string nonfinite_text(const ovf_record& r, std::string_view label);

}  // namespace ovf

#endif  // OVF_MONITOR_LINES_H
