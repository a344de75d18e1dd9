#include "device_engine.h"

#include <cstdlib>

#include "device_batch.h"
#include "torch_tensor.h"

namespace ovf {
namespace {

// OVF_TEST_DEFER=N: -1 when unset (tests only; see device_engine.h).
int test_defer_polls() {
  static const int polls = [] {
    const char* text = std::getenv("OVF_TEST_DEFER");
    if (text == nullptr || *text == '\0') return -1;
    char* end = nullptr;
    const long n = std::strtol(text, &end, 10);
    return *end == '\0' && n >= 0 && n <= 1000000 ? static_cast<int>(n) : -1;
  }();
  return polls;
}

// The frame's batch, made at its first device tensor.
std::shared_ptr<DeviceStatsBatch> frame_batch(FrameBuilder& frame) {
  PendingLines& pending = frame.pending();
  if (!pending.batch) pending.batch = new_device_batch();
  return pending.batch;
}

}  // namespace

std::shared_ptr<TensorStatsBatch> new_device_batch() {
  return std::make_shared<TensorStatsBatch>(headroom_dtype(), cast_counts_asked(),
                                            std::max(test_defer_polls(), 0));
}

StatsRef request_stats(const at::Tensor& t, const TensorView& view,
                       std::shared_ptr<TensorStatsBatch>* batch, StatsUse use) {
  StatsRef ref;
  if (!uses_device_engine(t)) {
    ref.known = tensor_stats(t, view, use);
    return ref;
  }
  if (!*batch) *batch = new_device_batch();
  ref.batch = *batch;
  ref.index = (*batch)->add(t, view.dtype);
  return ref;
}

bool uses_device_engine(const at::Tensor& t) {
  if (!t.defined()) return false;
  return !t.device().is_cpu() || test_defer_polls() >= 0;
}

void add_device_line(FrameBuilder& frame, ovf_record_kind kind, uint32_t label,
                     const at::Tensor& t) {
  TensorView view;
  if (!device_view(t, &view)) {
    frame.add_value(kind, label, OVF_FLAG_NO_DATA);
    return;
  }
  if (frame.full()) {
    frame.add_value(kind, label);  // dropped, the frame flagged truncated
    return;
  }
  auto batch = frame_batch(frame);
  const int index = static_cast<TensorStatsBatch&>(*batch).add(t, view.dtype);
  frame.add_pending(kind, label, view.dtype, device_id_of(t), static_cast<uint64_t>(t.numel()),
                    batch, index);
}

Stats device_stats_now(const at::Tensor& t, ovf_dtype dtype, bool with_casts) {
  TensorStatsBatch batch(headroom_dtype(), with_casts);
  const int index = batch.add(t, dtype);
  batch.submit();
  batch.wait();
  return batch.result(index);
}

}  // namespace ovf
