#include "row_samples.h"

#include <algorithm>

#include "report.h"
#include "ring_writer.h"
#include "sample_log.h"

namespace ovf {
namespace {

// Records read back at most, looking for a module that mixed the batch's rows.
constexpr uint64_t kMixerSearch = 1 << 20;

// Whether a module of this class, or this op, makes each row depend on the
// others: a batch norm (training mode; ovf cannot tell the mode from a record,
// so it says "may have"). FrozenBatchNorm2d keeps fixed statistics.
bool mixes_rows(const ovf_record& r) {
  if (r.kind == OVF_KIND_FRAME) {
    const std::string_view cls = interned(r.label_id);
    return cls.find("BatchNorm") != std::string_view::npos &&
           cls.find("Frozen") == std::string_view::npos;
  }
  if (r.kind == OVF_KIND_OP_OUTPUT && !(r.flags & OVF_FLAG_BACKWARD))
    return interned(r.name_id).find("batch_norm") != std::string_view::npos;
  return false;
}

// The newest record of `first`'s batch, before it or its own frame, that mixed rows.
std::string mixer_before(const ovf_record& first) {
  const uint64_t stop = first.seq > kMixerSearch ? first.seq - kMixerSearch : 0;
  for (uint64_t seq = first.seq; seq-- > stop;) {
    const ovf_record* r = find_record(seq);
    if (r == nullptr || r->batch != first.batch) break;
    if (!mixes_rows(*r)) continue;
    if (r->kind == OVF_KIND_FRAME)
      return escape_text(interned(r->label_id)) + " (" + module_name(r->name_id, "no module") + ")";
    return escape_text(interned(r->name_id)) + " in " + module_name(r->context_id, "no module");
  }
  return "";
}

bool holds_batch_rows(const ovf_record& r) {
  switch (r.kind) {
    case OVF_KIND_INPUT:
    case OVF_KIND_OUTPUT:
    case OVF_KIND_GRAD:
    case OVF_KIND_CHECKPOINT: return true;
    case OVF_KIND_OP_OUTPUT: return !(r.flags & OVF_FLAG_BACKWARD);
    default: return false;
  }
}

template <typename Values>
std::string joined(const Values& values) {
  std::string out;
  for (size_t i = 0; i < values.size(); ++i) out += (i ? ", " : "") + std::to_string(values[i]);
  return out;
}

}  // namespace

RowSamples row_samples(const ovf_record& first) {
  RowSamples out;
  if (first.row_extent == 0 || first.row_count == 0) return out;  // not measured (or torn)
  out.extent = first.row_extent;
  out.count = first.row_count;
  out.rows.assign(first.rows, first.rows + std::min<uint32_t>(first.row_count, OVF_ROWS_KEPT));
  // Only a value computed from the batch has the batch's rows (a weight's, a
  // buffer's, a gradient of the backward pass have none); every row: none singled out.
  if (!holds_batch_rows(first) || out.count == out.extent) return out;
  // The batch's samples, where exactly one loader's batch is as long as the rows.
  const BatchSamples* batch = nullptr;
  const auto samples = samples_of_batch(first.batch);
  for (const BatchSamples& s : samples) {
    if (s.total != first.row_extent) continue;
    if (batch != nullptr) return out;  // two loaders' batches of that size: which is not told
    batch = &s;
  }
  if (batch == nullptr) return out;
  out.mixed_by = mixer_before(first);
  if (!out.mixed_by.empty()) return out;
  out.dataset = batch->dataset;
  for (uint32_t row : out.rows)
    if (row < batch->indices.size()) out.indices.push_back(batch->indices[row]);
  return out;
}

std::string describe_row_samples(const ovf_record& first) {
  return describe_row_samples(row_samples(first), first.batch);
}

std::string describe_row_samples(const RowSamples& s, uint64_t batch) {
  if (s.extent == 0) return "";
  const std::string extent = std::to_string(s.extent);
  std::string text = "ovf: the first non-finite value (batch " + std::to_string(batch) + ")";
  if (s.count == s.extent && s.extent > 1) {
    text += " is in all " + extent + " rows along its first dimension";
  } else {
    text += std::string(" is in row") + (s.count == 1 ? " " : "s ") + joined(s.rows) +
            (s.count > s.rows.size() ? " and " + std::to_string(s.count - s.rows.size()) + " more"
                                     : "") +
            " of " + extent + " along its first dimension";
  }
  if (!s.mixed_by.empty()) {
    text += "; " + s.mixed_by +
            " mixed the batch's rows before it, so which samples it came from is not told";
  } else if (!s.indices.empty()) {
    text += std::string(": dataset ") + (s.indices.size() == 1 ? "index " : "indices ") +
            joined(s.indices) + " (" + escape_text(s.dataset) +
            (s.indices.size() < s.count ? ", of the first " + std::to_string(s.indices.size()) + ")"
                                        : ")");
  }
  return text + "\n";
}

}  // namespace ovf
