// Statistics a device computes after the hook that asked for them returned.
// The torch layer makes one batch per frame (the frame's tensors that live on
// a device); the core submits it when the frame is finished and, in fast device
// mode, judges the frame only once the batch says its results arrived.
#ifndef OVF_DEVICE_STATS_H
#define OVF_DEVICE_STATS_H

#include <cstdint>
#include <memory>
#include <vector>

#include "ovf/ring.h"
#include "row_scan.h"
#include "stats.h"

namespace ovf {

class DeviceStatsBatch {
 public:
  virtual ~DeviceStatsBatch() = default;
  // Every tensor was added: start the device's work. Never waits for it.
  virtual void submit() = 0;
  // Whether the results arrived. Never blocks.
  virtual bool ready() = 0;
  // Blocks until they did (one host synchronisation) and returns true; or
  // returns false at once where the device may not be waited for now (a CUDA
  // graph is being captured: a wait would break the capture): ask again later.
  virtual bool wait() = 0;
  // Tensor `index`'s statistics once ready() or wait() said so; has_stats is
  // false where the device failed (the line then reads "no data").
  virtual Stats result(int index) = 0;
  // Its finite non-zero values below the headroom dtype's smallest normal.
  virtual uint64_t underflow(int index) = 0;
  // Its rows holding NaN/Inf (row_scan.h), read again from the tensor where it
  // is still alive and unchanged since it was added; extent 0 otherwise. Called
  // after result(index), for the non-finite lines that arrive before the
  // session's first non-finite value is set (those of the event's frame or op).
  virtual Rows rows(int /*index*/) { return {}; }
};

// A frame's lines whose statistics a batch will deliver: which record, which
// result.
struct PendingLines {
  struct Line {
    uint32_t record;  // its index in the frame
    int result;       // its index in the batch
    bool expecting;   // made inside an expected region (monitor.h)
  };
  std::shared_ptr<DeviceStatsBatch> batch;
  std::vector<Line> lines;

  bool empty() const { return lines.empty(); }
  void clear() {
    batch.reset();
    lines.clear();
  }
  // Writes the arrived statistics into `records` (records[0] is the FRAME),
  // as make_line would have (with the rows of the session's first non-finite
  // line), and clears the PENDING flags.
  void fill(ovf_record* records) const;
};

}  // namespace ovf

#endif  // OVF_DEVICE_STATS_H
