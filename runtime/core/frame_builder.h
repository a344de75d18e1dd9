// One module frame being assembled: its FRAME record, then its lines.
#ifndef OVF_FRAME_BUILDER_H
#define OVF_FRAME_BUILDER_H

#include <cstdint>
#include <memory>
#include <vector>

#include "device_stats.h"
#include "ovf/ring.h"
#include "record.h"
#include "stats.h"

namespace ovf {

// Lines beyond this many in one frame are dropped and the frame is flagged
// OVF_FLAG_TRUNCATED: a forward returning a list of 10^5 tensors must not flood the ring.
constexpr uint32_t kMaxLinesPerFrame = 512;

// Reused across calls so that steady-state hooks allocate nothing.
class FrameBuilder {
 public:
  // `forward_start` is write_seq when the module's forward began (its pre-hook),
  // OVF_NO_SEQ when unknown: it tells a producer from a parent of one.
  // `frame_flags` go on the FRAME record as they are (OVF_FLAG_COMPILED).
  void begin(uint32_t module_name_id, uint32_t class_name_id, bool is_root,
             uint64_t forward_start = OVF_NO_SEQ, uint32_t frame_flags = 0);
  // A tensor in host memory: the CPU engine's stats (or `known`, what it holds,
  // read already), and its headroom when asked. Returns the stats (none when the
  // frame is full).
  Stats add_tensor(ovf_record_kind kind, uint32_t label_id, const TensorView& view, DeviceId device,
                   const Stats* known = nullptr);
  // A line whose stats were computed elsewhere (weight cache, a device engine).
  void add_stats(ovf_record_kind kind, uint32_t label_id, const Stats& stats, ovf_dtype dtype,
                 DeviceId device, uint32_t extra_flags = 0);
  // A tensor whose statistics `batch` computes as result `index` (a device
  // tensor): a PENDING line until they arrive (Monitor::finish_frame). Every
  // pending line of a frame comes from the same batch.
  void add_pending(ovf_record_kind kind, uint32_t label_id, ovf_dtype dtype, DeviceId device,
                   uint64_t numel, const std::shared_ptr<DeviceStatsBatch>& batch, int index);
  PendingLines& pending() { return pending_; }
  // Sets the headroom fields of the line added last.
  void set_headroom(ovf_dtype against, uint64_t underflow);
  // A line without data (record.h: make_value_line).
  void add_value(ovf_record_kind what, uint32_t label_id, uint32_t flags = 0);
  // A line made by make_line / make_value_line; dropped (frame truncated) when full.
  void add_line(const ovf_record& line);
  bool full() const { return records_.size() > kMaxLinesPerFrame; }
  // Its inputs may be masks (monitor.cpp: flag_masks): set for ovf's own view
  // of a forward, not for the reference's, which flags every -inf input.
  void inputs_may_be_masks() { inputs_may_be_masks_ = true; }
  bool judges_masks() const { return inputs_may_be_masks_; }
  bool is_root() const { return is_root_; }
  uint64_t forward_start() const { return forward_start_; }
  std::vector<ovf_record>& records() { return records_; }

 private:
  std::vector<ovf_record> records_;
  PendingLines pending_;
  bool is_root_ = false;
  bool inputs_may_be_masks_ = false;
  uint64_t forward_start_ = OVF_NO_SEQ;
};

// control.headroom_dtype, when it names a floating dtype (else OVF_DTYPE_UNKNOWN).
ovf_dtype headroom_dtype();

// Whether lines count what casts would lose (control.observe has OVF_OBSERVE_CAST).
bool cast_counts_asked();

// The headroom count of `view` against `against`: finite non-zero values below
// its smallest normal (0 for non-floating tensors).
uint64_t headroom_underflow(const TensorView& view, ovf_dtype against);

}  // namespace ovf

#endif  // OVF_FRAME_BUILDER_H
