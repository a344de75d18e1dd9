// One frame's tensors whose statistics are computed on their own devices
// (device_stats.h's DeviceStatsBatch for torch tensors). The tensors are
// grouped by device at submit(); each group runs on one backend:
//   - CUDA (cuda_backend.h), where it was built, for CUDA tensors;
//   - portable (portable_stats.h) everywhere else, and for CUDA where the
//     first-use self-check rejected the CUDA backend.
// Each group copies its results to host memory (pinned for CUDA) with one
// asynchronous copy and records a device event; ready() queries the events,
// wait() synchronises on them.
#ifndef OVF_DEVICE_BATCH_H
#define OVF_DEVICE_BATCH_H

#include <ATen/core/Tensor.h>
#include <c10/core/Event.h>

#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "device_stats.h"

namespace ovf {

// The CUDA backend's part of a batch (cuda_backend.cpp builds it; absent
// where it was not built).
class DeviceGroupBackend {
 public:
  virtual ~DeviceGroupBackend() = default;
  // Returns false to leave this tensor to the portable backend.
  virtual bool add(const at::Tensor& tensor, ovf_dtype dtype) = 0;
  virtual void submit() = 0;
  virtual bool ready() = 0;
  virtual void wait() = 0;  // (never while a capture is under way: the batch asks first)
  virtual Stats result(int index) = 0;  // in the order add() accepted them
  // Once ready() or wait() said so: what failed ("" where it ran), for the
  // self-check to say instead of "disagreed".
  virtual std::string failure() = 0;
};

// Whether `device`'s current stream is capturing a CUDA graph: nothing of ovf's
// may then be enqueued or waited for there (device_batch.cpp says why).
// OVF_TEST_CAPTURING makes every device seem so.
bool device_capturing(const at::Device& device);

class TensorStatsBatch : public DeviceStatsBatch {
 public:
  // `late_polls`: ready() says no this many times before it asks the device
  // (OVF_TEST_DEFER: tests make statistics arrive late on purpose).
  // `with_casts`: real floating tensors count what casts would lose (portable
  // backend only: the CUDA kernels do not count them, nor headroom).
  TensorStatsBatch(ovf_dtype headroom, bool with_casts, int late_polls = 0)
      : headroom_(headroom), with_casts_(with_casts), late_polls_(late_polls) {}
  ~TensorStatsBatch() override;

  // The tensor's result index. The tensor is kept until submit().
  int add(const at::Tensor& tensor, ovf_dtype dtype);

  void submit() override;
  bool ready() override;
  bool wait() override;
  Stats result(int index) override;
  uint64_t underflow(int index) override;
  Rows rows(int index) override;
  bool arrived() const { return arrived_; }  // ready() or wait() said so
  // Waits for statistics not arrived yet, in this process so far (tests).
  static uint64_t waits();
  // Tensors whose rows() were read, in this process so far (tests: at the event only).
  static uint64_t row_reads();

 private:
  struct Entry {
    at::Tensor tensor;  // until submit()
    // For rows(): the tensor without keeping its memory, and its version then.
    c10::weak_intrusive_ptr<c10::TensorImpl, c10::UndefinedTensorImpl> weak;
    c10::optional<uint32_t> version;
    ovf_dtype dtype;
    uint64_t numel;
    bool swap_infinities = false;  // portable rows of a negated real tensor
    int group = -1;                // the group that computes it
    int position = -1;             // its index inside the group's results
    bool on_cuda_backend = false;
  };
  struct Group {
    at::Device device{at::kCPU};
    std::vector<int> entries;
    at::Tensor host_rows;  // [n, kPortableColumns] float64, pinned for CUDA
    std::optional<c10::Event> done;
    c10::Stream stream{c10::Stream::DEFAULT, at::Device(at::kCPU)};
    std::unique_ptr<DeviceGroupBackend> cuda;  // null: portable only
    bool trial = false;                        // the device's first frame: both backends, compared
    std::vector<int> cuda_entries;
  };
  void submit_group(Group& group);
  // Whether a group with work in flight is on a stream capturing a CUDA graph:
  // its event may not be queried or waited for until the capture ends.
  bool any_group_capturing() const;
  void synchronize(Group& group);
  void finish();  // once ready or waited: the self-check, the tensors let go

  ovf_dtype headroom_;
  bool with_casts_;
  int late_polls_;
  std::vector<Entry> entries_;
  std::vector<Group> groups_;
  bool submitted_ = false;
  bool arrived_ = false;
};

}  // namespace ovf

#endif  // OVF_DEVICE_BATCH_H
