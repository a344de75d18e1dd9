// The event summary (event_summary.h): built from the ring's first non-finite
// record and written once, without replacing any file.
#include "event_summary.h"

#include <fcntl.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <mutex>

#include "hints.h"
#include "report.h"
#include "ring_writer.h"
#include "row_samples.h"
#include "sample_log.h"
#include "snapshot.h"

namespace ovf {
namespace {

std::mutex dir_mutex;
std::string summary_dir;
std::atomic<bool> written{false};

// A JSON string of text that escape_text made printable (no control bytes, valid UTF-8).
std::string json_string(const std::string& text) {
  std::string out = "\"";
  for (const char c : text) {
    if (c == '"' || c == '\\') out += '\\';
    if (static_cast<unsigned char>(c) < 0x20) {
      char hex[8];
      std::snprintf(hex, sizeof hex, "\\u%04x", static_cast<unsigned char>(c));
      out += hex;
    } else {
      out += c;
    }
  }
  return out + "\"";
}

std::string json_text_or_null(uint32_t id) {
  return id == OVF_NO_ID ? "null" : json_string(escape_text(interned(id)));
}

// The module the record belongs to, as `ovf frames` names it.
std::string module_of(const ovf_record& r) {
  switch (r.kind) {
    case OVF_KIND_OP_OUTPUT:
    case OVF_KIND_BUFFER: return module_name(r.context_id, "");
    case OVF_KIND_GRAD: return module_name(r.name_id, "");
    case OVF_KIND_STEP_PARAM: return escape_text(interned(r.label_id));  // the parameter's path
    default: {
      const ovf_record* frame = find_record(r.frame_seq);
      return frame != nullptr && frame->kind == OVF_KIND_FRAME ? module_name(frame->name_id, "")
                                                               : "";
    }
  }
}

// What the replay at the event found (monitor_replay.cpp: the FRAME of a module line,
// the STEP of an optimizer step's parameter, holds its line in verdict_id and its
// producing op in cause_seq), or null.
std::string replay_json(const ovf_record& first) {
  const ovf_record* frame = first.kind == OVF_KIND_FRAME ? &first : find_record(first.frame_seq);
  if (first.kind == OVF_KIND_OP_OUTPUT || frame == nullptr ||
      (frame->kind != OVF_KIND_FRAME && frame->kind != OVF_KIND_STEP) ||
      frame->verdict_id == OVF_NO_ID) {
    return "null";
  }
  std::string out = "{\"said\": " + json_text_or_null(frame->verdict_id);
  const ovf_record* op = find_record(frame->cause_seq);
  if (op == nullptr) return out + ", \"op\": null}";
  out += ", \"op\": " + json_text_or_null(op->name_id);
  out += ", \"module\": " + json_string(module_name(op->context_id, ""));
  out += ", \"line\": " + json_text_or_null(op->location_id);
  out += ", \"why\": " + json_text_or_null(op->diagnosis_id);
  return out + ", \"verdict\": " + json_text_or_null(op->verdict_id) + "}";
}

const char* kind_name(uint8_t kind) {
  switch (kind) {
    case OVF_KIND_OP_OUTPUT: return "op";
    case OVF_KIND_GRAD: return "gradient";
    case OVF_KIND_BUFFER: return "buffer";
    case OVF_KIND_STEP_PARAM: return "optimizer step";
    case OVF_KIND_WEIGHT: return "parameter";
    case OVF_KIND_INPUT: return "module input";
    case OVF_KIND_OUTPUT: return "module output";
    case OVF_KIND_CHECKPOINT: return "checkpoint";
    default: return "other";
  }
}

// What the stop summary says of the value, without "ovf: " and the final "\n":
// describe_nonfinite's line where it has one, else the module line's own words.
std::string what_happened(const ovf_record& first) {
  std::string line = describe_nonfinite(&first, "the first non-finite value");
  if (!line.empty()) return line.substr(5, line.find('\n') - 5);  // its first line
  const std::string module = module_of(first);
  return "the first non-finite value was the " + escape_text(interned(first.label_id)) + " of " +
         (module.empty() ? std::string("no module") : module) + " (batch " +
         std::to_string(first.batch) + ")";
}

std::string events_text(uint32_t events) {
  std::string out;
  for (const auto& [bit, name] :
       {std::pair{OVF_STOP_NAN, "nan"}, {OVF_STOP_INF, "inf"}, {OVF_STOP_BACKWARD, "backward"}}) {
    if (events & bit) out += (out.empty() ? "" : ",") + std::string(name);
  }
  return out;
}

std::string file_name() {
  std::string safe;
  for (const char c : host_name()) {
    const bool plain = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
                       c == '-' || c == '.' || c == '_';
    safe += plain ? c : '_';
  }
  char rank[32] = "";
  if (ovf_state.rank >= 0) std::snprintf(rank, sizeof rank, "rank%05d-", ovf_state.rank);
  return "ovf-event-" + std::string(rank) + safe + "-" + std::to_string(getpid()) + ".json";
}

}  // namespace

void set_event_summary_dir(const std::string& dir) {
  std::lock_guard<std::mutex> lock(dir_mutex);
  summary_dir = dir;
}

std::string event_summary_dir() {
  std::lock_guard<std::mutex> lock(dir_mutex);
  return summary_dir;
}

const char* nonfinite_role(const ovf_record& first) {
  switch (first.kind) {
    case OVF_KIND_OP_OUTPUT: return (first.flags & OVF_FLAG_CARRIER) ? "carrier" : "producer";
    case OVF_KIND_STEP_PARAM: {
      const ovf_record* step = find_record(first.frame_seq);
      const bool carried = step != nullptr && (step->flags & OVF_FLAG_CARRIER);
      return carried ? "carrier" : "producer";
    }
    case OVF_KIND_OUTPUT:
    case OVF_KIND_GRAD:
    case OVF_KIND_BUFFER: return "producer";
    default: return "carrier";  // a parameter, a module's input, a checkpointed value
  }
}

std::string event_summary_json(const ovf_record& first, uint32_t events, const std::string& line) {
  const bool op = first.kind == OVF_KIND_OP_OUTPUT;
  std::string out = "{\"ovf_event_summary\": " + std::to_string(kEventSummaryVersion);
  out += ", \"rank\": " + std::to_string(ovf_state.rank);
  out += ", \"local_rank\": " + std::to_string(ovf_state.local_rank);
  out += ", \"world_size\": " + std::to_string(ovf_state.world_size);
  out += ", \"host\": " + json_string(escape_text(host_name()));
  out += ", \"pid\": " + std::to_string(getpid());
  out += ", \"batch\": " + std::to_string(first.batch);
  out += ", \"seq\": " + std::to_string(first.seq);
  out += ", \"time_ns\": " + std::to_string(first.timestamp_ns);
  out += ", \"events\": " + json_string(events_text(events));
  out += ", \"kind\": " + json_string(kind_name(first.kind));
  out += ", \"role\": " + json_string(nonfinite_role(first));
  out += ", \"op\": " + (op ? json_text_or_null(first.name_id) : std::string("null"));
  out += ", \"module\": " + json_string(module_of(first));
  out += ", \"line\": " + (line.empty() ? std::string("null") : json_string(line));
  out += ", \"what\": " + json_string(what_happened(first));
  out += ", \"why\": " + (op ? json_text_or_null(first.diagnosis_id) : std::string("null"));
  out += ", \"verdict\": " + (op ? json_text_or_null(first.verdict_id) : std::string("null"));
  out += ", \"replay\": " + replay_json(first);
  out += ", \"samples\": [";
  const auto samples = samples_of_batch(first.batch);
  for (size_t i = 0; i < samples.size(); ++i) {
    out += std::string(i ? ", " : "") +
           "{\"dataset\": " + json_string(escape_text(samples[i].dataset)) +
           ", \"total\": " + std::to_string(samples[i].total) + ", \"indices\": [";
    for (size_t k = 0; k < samples[i].indices.size(); ++k)
      out += (k ? ", " : "") + std::to_string(samples[i].indices[k]);
    out += "]}";
  }
  out += "]";
  const RowSamples rows = row_samples(first);
  if (rows.extent == 0) return out + ", \"rows\": null}\n";
  // The report's words, without its "ovf: " and newline: what ovf.ranks prints.
  const std::string said = describe_row_samples(rows, first.batch);
  out += ", \"rows\": {\"text\": " + json_string(said.substr(5, said.size() - 6)) +
         ", \"extent\": " + std::to_string(rows.extent) +
         ", \"count\": " + std::to_string(rows.count) + ", \"first\": [";
  for (size_t k = 0; k < rows.rows.size(); ++k)
    out += (k ? ", " : "") + std::to_string(rows.rows[k]);
  out += "], \"mixed_by\": " +
         (rows.mixed_by.empty() ? std::string("null") : json_string(rows.mixed_by)) +
         ", \"dataset_indices\": [";
  for (size_t k = 0; k < rows.indices.size(); ++k)
    out += (k ? ", " : "") + std::to_string(rows.indices[k]);
  return out + "]}}\n";
}

std::string write_new_file(const std::string& dir, const std::string& name,
                           const std::string& text) {
  const std::string path = dir + "/" + name, partial = path + ".partial";
  const int fd = open(partial.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0644);
  if (fd < 0) return "cannot create " + partial + ": " + std::strerror(errno);
  size_t done = 0;
  while (done < text.size()) {
    const ssize_t n = write(fd, text.data() + done, text.size() - done);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) break;
    done += static_cast<size_t>(n);
  }
  const int saved = errno;
  close(fd);
  std::string error;
  if (done != text.size()) {
    error = "cannot write " + partial + ": " + std::strerror(saved);
  } else if (link(partial.c_str(), path.c_str()) != 0) {
    error = errno == EEXIST ? path + " exists already; not replaced"
                            : "cannot create " + path + ": " + std::strerror(errno);
  }
  unlink(partial.c_str());
  return error;
}

void write_event_summary(uint32_t events, uint64_t event_seq) {
  const std::string dir = event_summary_dir();
  if (dir.empty() || written.exchange(true)) return;
  const uint64_t seq = __atomic_load_n(&ovf_state.first_nonfinite_seq, __ATOMIC_ACQUIRE);
  const ovf_record* first = find_record(seq);
  if (first == nullptr) return;
  // The forward line a backward op names, else where the program was at the event.
  std::string line = first->location_id != OVF_NO_ID ? escape_text(interned(first->location_id))
                                                     : user_line_at(event_seq);
  if (line.empty()) line = user_line_at(first->seq);
  const std::string error =
      write_new_file(dir, file_name(), event_summary_json(*first, events, line));
  if (!error.empty()) std::fprintf(stderr, "ovf: no event summary: %s\n", error.c_str());
}

}  // namespace ovf
