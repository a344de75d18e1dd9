// The reference report's formatting. Every string here mirrors an f-string of
// transformers/debug_utils.py; tests compare against Python's own formatting.
#include "report.h"

#include <cmath>
#include <cstdio>
#include <limits>

#include "ring_writer.h"
#include "row_samples.h"
#include "sample_log.h"
#include "snapshot.h"

namespace ovf {
namespace {

// DebugUnderflowOverflow.prefix: 17 spaces.
constexpr std::string_view kPrefix = "                 ";

std::string right_17(std::string_view word) {  // f"{word:>17}"
  std::string out(word.size() < 17 ? 17 - word.size() : 0, ' ');
  out += word;
  return out;
}

std::string label_of(const ovf_record& r) { return escape_text(interned(r.label_id)); }

std::string module_text(uint32_t id) { return module_name(id, "(no module)"); }

}  // namespace

std::string module_name(uint32_t id, const char* none) {
  if (id == OVF_NO_ID) return none;
  const std::string_view path = interned(id);
  const uint32_t root_class = ovf_state.root_class_id;
  if (path.empty() && root_class != OVF_NO_ID)
    return "<root " + escape_text(interned(root_class)) + ">";
  return escape_text(path);
}

const char* const kColumnHeader = "abs min  abs max  metadata";

std::string format_8_2e(double x) {
  if (std::isnan(x)) return "     nan";
  if (std::isinf(x)) return x > 0 ? "     inf" : "    -inf";
  char buf[64];
  std::snprintf(buf, sizeof buf, "%8.2e", x);
  return buf;
}

std::string format_2e(double x) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.2e", x);
  return buf;
}

std::string format_g(double x, int digits) {
  char buf[40];
  std::snprintf(buf, sizeof buf, "%.*g", digits, x);
  return buf;
}

ReferenceMinMax reference_min_max(const ovf_record& line) {
  constexpr double kNaN = std::numeric_limits<double>::quiet_NaN();
  constexpr double kInf = std::numeric_limits<double>::infinity();
  if (line.nan_count > 0) return {kNaN, kNaN};  // torch.min/max propagate NaN
  const bool any_inf = line.pos_inf_count + line.neg_inf_count > 0;
  const bool any_finite = line.numel > line.pos_inf_count + line.neg_inf_count;
  return {any_finite ? line.abs_min : kInf, any_inf ? kInf : line.abs_max};
}

// Characters that reorder the text around them (U+202E makes "exp" read "pxe"):
// a name must not hide what surrounds it.
bool is_bidi_control(uint32_t cp) {
  return cp == 0x061c || cp == 0x200e || cp == 0x200f || (cp >= 0x202a && cp <= 0x202e) ||
         (cp >= 0x2066 && cp <= 0x2069);
}

std::string escape_text(std::string_view text) {
  std::string out;
  out.reserve(text.size());
  auto hex = [&out](unsigned char c) {
    char buf[8];
    std::snprintf(buf, sizeof buf, "\\x%02x", c);
    out += buf;
  };
  const auto* p = reinterpret_cast<const unsigned char*>(text.data());
  const size_t n = text.size();
  for (size_t i = 0; i < n;) {
    const unsigned char c = p[i];
    if (c == '\\') {
      out += "\\\\";
      ++i;
    } else if (c < 0x20 || c == 0x7f) {
      hex(c);
      ++i;
    } else if (c < 0x80) {
      out += static_cast<char>(c);
      ++i;
    } else {
      // A well-formed UTF-8 sequence passes unless it encodes a C1 control
      // (U+0080..U+009F); anything else is escaped byte by byte.
      const size_t len = c >= 0xf0 ? 4 : c >= 0xe0 ? 3 : c >= 0xc2 ? 2 : 0;
      bool valid = len > 0 && i + len <= n && c <= 0xf4;
      uint32_t cp = len == 2 ? (c & 0x1f) : len == 3 ? (c & 0x0f) : (c & 0x07);
      for (size_t k = 1; valid && k < len; ++k) {
        valid = (p[i + k] & 0xc0) == 0x80;
        cp = (cp << 6) | (p[i + k] & 0x3f);
      }
      if (valid) {
        valid = !(len == 3 && cp < 0x800) && !(len == 4 && (cp < 0x10000 || cp > 0x10ffff)) &&
                !(cp >= 0xd800 && cp <= 0xdfff) && !(cp >= 0x80 && cp <= 0x9f) &&
                !is_bidi_control(cp);
      }
      if (valid) {
        out.append(text.data() + i, len);
        i += len;
      } else {
        hex(c);
        ++i;
      }
    }
  }
  return out;
}

std::string format_record(const ovf_record& r) {
  switch (r.kind) {
    case OVF_KIND_FRAME:
    case OVF_KIND_STEP:
      // f"{self.prefix} {self.module_names[module]} {module.__class__.__name__}"
      return std::string(kPrefix) + " " + escape_text(interned(r.name_id)) + " " +
             escape_text(interned(r.label_id));
    case OVF_KIND_BATCH_START:
      // batch_start_frame(): two lines appended to the frame being built.
      return "\n\n" + std::string(kPrefix) +
             " *** Starting batch number=" + std::to_string(r.batch) + " ***\n" + kColumnHeader;
    case OVF_KIND_NONE: return right_17("None") + " " + label_of(r);
    case OVF_KIND_NOT_TENSOR: return right_17("not a tensor") + " " + label_of(r);
    case OVF_KIND_CHECKPOINT: break;
    default: {
      // A device's statistics on their way (fast device mode).
      if (r.flags & OVF_FLAG_PENDING) return right_17("pending") + " " + label_of(r);
      if (!(r.flags & OVF_FLAG_HAS_STATS)) {
        return right_17((r.flags & OVF_FLAG_NO_DATA) ? "no data" : "unknown dtype") + " " +
               label_of(r);
      }
      // The reference fails on an empty tensor (min of nothing); ovf says so.
      if (r.numel == 0) return right_17("empty") + " " + label_of(r);
      const ReferenceMinMax mm = reference_min_max(r);
      return format_8_2e(mm.min) + " " + format_8_2e(mm.max) + " " + label_of(r);
    }
  }
  const ReferenceMinMax mm = reference_min_max(r);
  return format_8_2e(mm.min) + " " + format_8_2e(mm.max) + " " + escape_text(interned(r.name_id));
}

std::string format_frames(const std::vector<const ovf_record*>& records) {
  std::string out;
  bool first = true;
  for (const ovf_record* r : records) {
    if (!first) out += '\n';
    first = false;
    out += format_record(*r);
  }
  return out;
}

namespace {

bool belongs_to_frames(uint8_t kind) {
  switch (kind) {
    case OVF_KIND_FRAME:
    case OVF_KIND_WEIGHT:
    case OVF_KIND_INPUT:
    case OVF_KIND_OUTPUT:
    case OVF_KIND_BATCH_START:
    case OVF_KIND_NONE:
    case OVF_KIND_NOT_TENSOR: return true;
    default: return false;
  }
}

}  // namespace

std::vector<const ovf_record*> last_frames(uint64_t floor_seq, uint64_t end_seq,
                                           uint32_t max_frames, uint32_t* frames_found) {
  std::vector<const ovf_record*> newest_first;
  uint32_t frames = 0;
  for (uint64_t seq = end_seq; seq > floor_seq && max_frames > 0;) {
    --seq;
    const ovf_record* r = find_record(seq);
    if (r == nullptr) break;  // overwritten: the ring holds nothing older
    // Only frames, their lines and batch markers are the reference's frames:
    // not checkpoints, ops, optimizer steps, gradients, buffers, a loss
    // scaler's updates or early warnings.
    if (!belongs_to_frames(r->kind)) continue;
    if (frames == max_frames) {
      // Past the oldest kept frame only its batch markers still belong to it.
      if (r->kind != OVF_KIND_BATCH_START) break;
      newest_first.push_back(r);
      continue;
    }
    // Markers after the newest frame belong to a frame not yet written.
    if (frames == 0 && newest_first.empty() && r->kind == OVF_KIND_BATCH_START) continue;
    newest_first.push_back(r);
    if (r->kind == OVF_KIND_FRAME) ++frames;
  }
  // A partial frame (lines whose FRAME was cut off by the floor) is not a frame.
  while (!newest_first.empty() && newest_first.back()->kind != OVF_KIND_FRAME &&
         newest_first.back()->kind != OVF_KIND_BATCH_START) {
    newest_first.pop_back();
  }
  if (frames_found != nullptr) *frames_found = frames;
  return {newest_first.rbegin(), newest_first.rend()};
}

namespace {

// " at model.py:66 in forward": the line the record names (an op judged after
// its statistics arrived), else the event's snapshot's.
std::string user_line(const ovf_record& r) {
  if (r.location_id != OVF_NO_ID) return " at " + escape_text(interned(r.location_id));
  const std::string where = user_line_at(r.seq);
  return where.empty() ? "" : " at " + where;
}

}  // namespace

std::string carried_from(uint32_t gradient_of) {
  if (gradient_of == OVF_NO_ID) {
    return " from a value no op ovf watched made (made before ovf started, or outside the ops "
           "it sees)";
  }
  return " by the gradient of " + escape_text(interned(gradient_of)) +
         ": it was made in the backward pass, which ovf did not watch (--backward names the op "
         "that made it and its forward line)";
}

std::string describe_first_nonfinite() {
  const ovf_record* first =
      find_record(__atomic_load_n(&ovf_state.first_nonfinite_seq, __ATOMIC_ACQUIRE));
  if (first == nullptr) return "";
  // The rows only where the batch's samples are known: the reference's report
  // stays as it prints it for every run that feeds no DataLoader batches.
  const bool samples_known = !samples_of_batch(first->batch).empty();
  return describe_nonfinite(first, "the first non-finite value") + describe_replay(*first) +
         (samples_known ? describe_row_samples(*first) : "");
}

std::string describe_replay(const ovf_record& line) {
  const ovf_record* frame = line.frame_seq != OVF_NO_SEQ ? find_record(line.frame_seq) : nullptr;
  if (frame == nullptr || (frame->kind != OVF_KIND_FRAME && frame->kind != OVF_KIND_STEP) ||
      frame->verdict_id == OVF_NO_ID)
    return "";
  std::string text = "ovf: " + escape_text(interned(frame->verdict_id)) + "\n";
  const ovf_record* op = frame->cause_seq != OVF_NO_SEQ ? find_record(frame->cause_seq) : nullptr;
  if (op != nullptr) text += describe_nonfinite(op, "the first non-finite value");
  return text;
}

std::string describe_nonfinite(const ovf_record* first, const std::string& what) {
  if (first == nullptr) return "";
  const std::string batch = std::to_string(first->batch);
  auto text = [](uint32_t id) {
    return id == OVF_NO_ID ? std::string("an unknown op") : escape_text(interned(id));
  };
  auto module = [](uint32_t id) { return module_name(id, "no module"); };
  auto at = [](uint32_t id) {
    return id == OVF_NO_ID ? std::string() : " at " + escape_text(interned(id));
  };
  if (first->kind == OVF_KIND_GRAD) {
    return "ovf: " + what + " was the gradient of " + module(first->name_id) + "'s " +
           escape_text(interned(first->label_id)).substr(5) + " in the backward pass (batch " +
           batch + ")\n";
  }
  if (first->kind == OVF_KIND_OP_OUTPUT) {
    // A carrier's why says where its value came from (a collective), if ovf knows.
    const bool received = first->diagnosis_id != OVF_NO_ID;
    const std::string gradient_of = first->aux_id == OVF_NO_ID && (first->flags & OVF_FLAG_CARRIER)
                                        ? ""
                                        : ", the gradient of " + text(first->aux_id) + " in " +
                                              module(first->context_id) + at(first->location_id);
    std::string line =
        (first->flags & OVF_FLAG_BACKWARD)
            ? "ovf: " + what +
                  ((first->flags & OVF_FLAG_CARRIER)
                       ? " was carried into " + text(first->name_id) + " in the backward pass"
                       : " was produced in the backward pass by " + text(first->name_id)) +
                  gradient_of + " (batch " + batch + ")\n"
        : (first->flags & OVF_FLAG_CARRIER)
            ? "ovf: " + what + " was carried into " + text(first->name_id) + " in " +
                  module(first->context_id) + user_line(*first) + " (batch " + batch + ")" +
                  (received ? "" : carried_from(first->aux_id)) + "\n"
            : "ovf: " + what + " was produced by " + text(first->name_id) + " in " +
                  module(first->context_id) + user_line(*first) + " (batch " + batch + ")\n";
    if (first->diagnosis_id != OVF_NO_ID) line += "ovf: why: " + text(first->diagnosis_id) + "\n";
    if (first->verdict_id != OVF_NO_ID) line += "ovf: verdict: " + text(first->verdict_id) + "\n";
    return line;
  }
  if (first->kind == OVF_KIND_BUFFER) {
    return "ovf: " + what + " was written into the buffer " + text(first->label_id) +
           " by the forward of " + module(first->context_id) + " (batch " + batch + ")\n";
  }
  const ovf_record* frame =
      first->kind == OVF_KIND_STEP_PARAM ? find_record(first->frame_seq) : nullptr;
  if (frame != nullptr && frame->kind == OVF_KIND_STEP) {
    // A gradient that was non-finite already: the backward pass made it.
    const bool carried = (frame->flags & OVF_FLAG_CARRIER) != 0;
    return "ovf: " + what + " was written by optimizer.step (" + text(frame->label_id) + ") into " +
           text(first->label_id) + " (after batch " + batch + ")" +
           (carried ? " from its gradient: it was made in the backward pass (--backward names the "
                      "op that made it and its forward line)"
                    : "") +
           "\n";
  }
  return "";
}

namespace {

std::string detection_text(uint64_t batch_number, const std::vector<const ovf_record*>& records,
                           uint32_t frames, bool early = false) {
  std::string out = (early ? "\novf: early warning during batch_number="
                           : "\nDetected inf/nan during batch_number=") +
                    std::to_string(batch_number) + "\n";
  out += "Last " + std::to_string(frames) + " forward frames:\n";
  out += std::string(kColumnHeader) + "\n";
  out += format_frames(records) + "\n";
  out += "\n\n\n";  // print("\n\n")
  return out;
}

}  // namespace

std::string format_detection_report(uint64_t batch_number, uint64_t floor_seq, uint64_t end_seq,
                                    uint32_t max_frames) {
  uint32_t frames = 0;
  const auto records = last_frames(floor_seq, end_seq, max_frames, &frames);
  return detection_text(batch_number, records, frames);
}

const char* const kCompiledUnseen =
    "module frames are recorded there; the ATen ops Inductor fuses into its kernels are not "
    "seen without --ops (its checks enter the graphs)";

std::string compiled_note(const std::vector<const ovf_record*>& records, uint32_t frames) {
  uint32_t compiled = 0;
  for (const ovf_record* r : records)
    compiled += r->kind == OVF_KIND_FRAME && (r->flags & OVF_FLAG_COMPILED);
  if (compiled == 0) return "";
  return "ovf: " + std::to_string(compiled) + " of " + std::to_string(frames) +
         (frames == 1 ? " frame" : " frames") +
         " listed ran in torch.compile'd graphs: " + kCompiledUnseen + "\n";
}

std::vector<const ovf_record*> last_ops(uint64_t floor, uint64_t end, uint32_t max) {
  std::vector<const ovf_record*> newest_first;
  for (uint64_t seq = end; seq > floor && newest_first.size() < max;) {
    const ovf_record* r = find_record(--seq);
    if (r == nullptr) break;  // overwritten
    if (r->kind == OVF_KIND_OP_OUTPUT || r->kind == OVF_KIND_CHECKPOINT ||
        r->kind == OVF_KIND_BUFFER) {
      newest_first.push_back(r);
    }
  }
  return {newest_first.rbegin(), newest_first.rend()};
}

std::string format_op(const ovf_record& r) {
  if (r.kind == OVF_KIND_CHECKPOINT) return format_record(r);
  std::string values;
  if ((r.flags & OVF_FLAG_HAS_STATS) && r.numel) {
    const ReferenceMinMax mm = reference_min_max(r);
    values = format_8_2e(mm.min) + " " + format_8_2e(mm.max);
  } else {
    values = right_17((r.flags & OVF_FLAG_HAS_STATS) ? "empty" : "no data");
  }
  const std::string where = module_text(r.context_id);
  std::string what;
  if (r.kind == OVF_KIND_BUFFER) {
    return values + " buffer " + escape_text(interned(r.label_id)) + " (made non-finite by " +
           module_text(r.context_id) + "'s forward)";
  }
  if (r.flags & OVF_FLAG_BACKWARD) {
    what =
        "grad = " + escape_text(interned(r.name_id)) + " for " +
        (r.aux_id == OVF_NO_ID ? std::string("an unknown op") : escape_text(interned(r.aux_id))) +
        " in " + where;
    if (r.location_id != OVF_NO_ID) what += " at " + escape_text(interned(r.location_id));
  } else {
    what = escape_text(interned(r.label_id)) + " = " + escape_text(interned(r.name_id)) + " in " +
           where;
    if (r.location_id != OVF_NO_ID) what += " at " + escape_text(interned(r.location_id));
  }
  if (r.flags & OVF_FLAG_PRODUCER) {
    what += " (produced here)";
  } else if (r.flags & OVF_FLAG_CARRIER) {
    what += " (carried)";
  } else if (r.flags & OVF_FLAG_CONSTANT) {
    what += " (deliberate)";
  }
  return values + " " + what;
}

std::string format_event_report(uint64_t batch_number, uint64_t floor, uint64_t end,
                                uint32_t max_frames, uint64_t session_start) {
  uint32_t frames = 0;
  const auto records = last_frames(floor, end, max_frames, &frames);
  const ovf_record* event = find_record(end - 1);
  const bool early = event != nullptr && event->kind == OVF_KIND_WARNING;
  std::string text =
      detection_text(batch_number, records, frames, early) + compiled_note(records, frames);
  const auto ops = last_ops(floor, end, max_frames);
  if (!ops.empty()) {
    text += "Last " + std::to_string(ops.size()) + " ops and buffers:\n" + kColumnHeader + "\n";
    for (const ovf_record* r : ops) text += format_op(*r) + "\n";
  }
  if (early) return text + describe_early_warning(*event);
  if (event != nullptr && event->kind == OVF_KIND_SCALER)
    return text + describe_scaler_stop(*event);
  return text + describe_first_nonfinite() + describe_batch_samples(batch_number) +
         describe_scaler_history(session_start, end);
}

}  // namespace ovf
