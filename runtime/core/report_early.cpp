// What a process prints at an early warning (OVF_STOP_EARLY, a WARNING record).
// plugin/ovf_ring/early.py words the same for debuggers.
#include <string>

#include "report.h"
#include "ring_writer.h"
#include "stats.h"

namespace ovf {
namespace {

// Growth and ratios are estimates: three digits say them.
std::string format_3g(double x) { return format_g(x, 3); }

}  // namespace

std::string describe_early_warning(const ovf_record& w) {
  const std::string head = "ovf: early warning at batch " + std::to_string(w.batch) + ": ";
  if (w.cause_seq != OVF_NO_SEQ) {  // a module's growth
    const uint64_t passes = w.batch + w.skips_in_row;
    return head + escape_text(interned(w.name_id)) + " (" + escape_text(interned(w.label_id)) +
           ")'s output abs max grew from " + format_3g(w.scale_before) + " to " +
           format_3g(w.abs_max) + " in one batch (x" + format_3g(w.abs_max / w.scale_before) +
           "); at that growth it passes " + dtype_name(static_cast<ovf_dtype>(w.dtype)) +
           "'s largest value " + format_g(w.scale_after) + " in " + std::to_string(w.skips_in_row) +
           (w.skips_in_row == 1 ? " batch" : " batches") + " (batch " + std::to_string(passes) +
           ")\n";
  }
  std::string text = head + escape_text(interned(w.name_id)) + ".step() changed the weights by " +
                     format_3g(w.abs_max) +
                     " times their size (|dw|/|w| over its parameters, above " +
                     format_3g(w.scale_after) + ": --update-ratio)";
  if (w.label_id != OVF_NO_ID) {
    text += "; the largest change: " + escape_text(interned(w.label_id)) +
            " (|dw|/|w| = " + format_3g(w.scale_before) + ")";
  }
  return text + "\n";
}

}  // namespace ovf
