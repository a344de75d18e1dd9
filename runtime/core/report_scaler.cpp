// What a process prints when a loss scaler gave up (OVF_STOP_SCALER): the run
// of skipped steps, the scale, and what made the first skip's gradients
// non-finite. plugin/ovf_ring/scaler.py words the same for debuggers.
#include <algorithm>
#include <string>

#include "control.h"
#include "report.h"
#include "ring_writer.h"

namespace ovf {
namespace {

// The run's first skip: walked back from its last (skips_in_row counts down by
// one per SCALER record of the run); `last` when the ring lost the others.
const ovf_record& first_skip_of_run(const ovf_record& last) {
  const ovf_record* first = &last;
  for (uint64_t seq = last.seq; seq > 0 && first->skips_in_row > 1;) {
    const ovf_record* r = find_record(--seq);
    if (r == nullptr) break;  // overwritten
    if (r->kind == OVF_KIND_SCALER && r->skips_in_row == first->skips_in_row - 1) first = r;
  }
  return *first;
}

}  // namespace

std::string describe_scaler_stop(const ovf_record& update) {
  const ovf_record& first = first_skip_of_run(update);
  const uint32_t skips = update.skips_in_row;
  const ovf_control& c = ovf_state.control;
  const double floor = read_control(c.scale_floor);
  std::string why = floor > 0 && update.scale_after < floor && update.scale_before >= floor
                        ? ", below the floor " + format_g(floor) + " (--scale-floor)"
                        : " (--scaler-skips " + std::to_string(skips) + ")";
  std::string text =
      "ovf: " + escape_text(interned(update.name_id)) + " skipped " + std::to_string(skips) +
      (skips == 1 ? " step" : " steps in a row") + " (batch " + std::to_string(first.batch) +
      (skips == 1 ? "" : " to " + std::to_string(update.batch)) +
      "): the gradients were non-finite each time, and its scale went from " +
      format_g(first.scale_before) + " to " + format_g(update.scale_after) + why + "\n";
  const std::string which = first.label_id == OVF_NO_ID
                                ? std::string("a gradient")
                                : escape_text(interned(first.label_id)) + "'s gradient";
  const ovf_record* cause = find_record(first.cause_seq);
  if (cause != nullptr) {
    return text + describe_nonfinite(
                      cause, "the first skip's first non-finite value (" + which + " held one)");
  }
  return text + "ovf: the first skip found " + which +
         " non-finite; the op that made it ran unseen: --ops --backward names it and its forward "
         "line\n";
}

std::string describe_scaler_history(uint64_t start, uint64_t end) {
  const uint64_t capacity = ovf_state.record_capacity;
  const uint64_t floor = std::max(start, end > capacity ? end - capacity : 0);
  const ovf_record* last = nullptr;
  uint64_t skips = 0;
  for (uint64_t seq = end; seq > floor;) {
    const ovf_record* r = find_record(--seq);
    if (r == nullptr) break;  // overwritten
    if (r->kind != OVF_KIND_SCALER) continue;
    if (last == nullptr) last = r;
    skips += r->skips_in_row != 0;
  }
  if (last == nullptr) return "";
  return "ovf: " + escape_text(interned(last->name_id)) + " had skipped " + std::to_string(skips) +
         (skips == 1 ? " step" : " steps") + " (the last at batch " + std::to_string(last->batch) +
         "); its scale is " + format_g(last->scale_after) + "\n";
}

}  // namespace ovf
