#include "device_batch.h"

#include <ATen/ATen.h>
#include <c10/core/impl/VirtualGuardImpl.h>
#include <torch/version.h>

#include <atomic>
#include <cstdio>
#include <cstdlib>
#include <mutex>

#include "cuda_backend.h"
#include "own_ops.h"
#include "portable_stats.h"
#include "torch_tensor.h"

namespace ovf {
namespace {

Stats failed(uint64_t numel) {
  Stats s;  // has_stats false: the line reads "no data"
  s.numel = numel;
  return s;
}

void note_capture(const at::Device& device) {
  static std::once_flag told;
  std::call_once(told, [&] {
    std::fprintf(stderr,
                 "ovf: note: a CUDA graph is being captured on %s: ovf does not measure the "
                 "tensors of captured work (their lines read \"no data\"); it measures them "
                 "again outside the capture\n",
                 device.str().c_str());
  });
}

}  // namespace

// Whether `device`'s current stream is capturing a CUDA graph. Nothing of
// ovf's may then be enqueued (its copies to pinned memory and event records
// cannot be captured, and a first-use allocation would invalidate the user's
// capture), and no event may be queried or waited for (torch's default,
// global capture mode forbids it from every thread).
bool device_capturing(const at::Device& device) {
  static const bool test_knob = std::getenv("OVF_TEST_CAPTURING") != nullptr;
  return test_knob || (device.is_cuda() && cuda_stream_capturing(device.index()));
}

TensorStatsBatch::~TensorStatsBatch() {
  // Copies may still write into host_rows: wait before they are freed (the
  // caching allocators keep device memory alive for the stream anyway).
  if (submitted_ && !arrived_) {
    try {
      wait();
    } catch (...) {
    }
  }
}

int TensorStatsBatch::add(const at::Tensor& t, ovf_dtype dtype) {
  entries_.push_back(
      {t, c10::weak_intrusive_ptr<c10::TensorImpl, c10::UndefinedTensorImpl>(t.getIntrusivePtr()),
       version_of(t), dtype, static_cast<uint64_t>(t.numel()), negates_infinities(t)});
  return static_cast<int>(entries_.size()) - 1;
}

void TensorStatsBatch::submit() {
  if (submitted_) return;
  submitted_ = true;
  for (size_t i = 0; i < entries_.size(); ++i) {
    Entry& e = entries_[i];
    if (e.numel == 0) continue;  // no work: empty_stats()
    const at::Device device = e.tensor.device();
    size_t g = 0;
    while (g < groups_.size() && groups_[g].device != device) ++g;
    if (g == groups_.size()) {
      groups_.emplace_back();
      groups_.back().device = device;
      if (device.is_cuda() && headroom_ == OVF_DTYPE_UNKNOWN) {  // null where not built
        groups_.back().cuda = make_cuda_group(device.index(), with_casts_);
      }
    }
    e.group = static_cast<int>(g);
    groups_[g].entries.push_back(static_cast<int>(i));
  }
  OwnOpsGuard guard;
  for (Group& group : groups_) submit_group(group);
  for (Entry& e : entries_) e.tensor = at::Tensor();  // the work holds what it needs
}

void TensorStatsBatch::submit_group(Group& group) {
  if (device_capturing(group.device)) {  // these lines read "no data"
    note_capture(group.device);
    for (int i : group.entries) entries_[i].group = -1;
    return;
  }
  try {
    if (!group.device.is_cpu()) {
      c10::impl::VirtualGuardImpl impl(group.device.type());
      group.stream = impl.getStream(group.device);
      // The work reads these tensors on this stream after their references
      // are dropped: the caching allocator must not hand their memory to
      // another stream's allocation (FSDP's all-gather stream, a user's side
      // stream) before it has run.
      for (int i : group.entries) {
        const at::Tensor& t = entries_[i].tensor;
        if (t.has_storage()) impl.recordDataPtrOnStream(t.storage().data_ptr(), group.stream);
      }
    }
    // The CUDA backend takes what it can read; the rest (and, while the
    // backend is on trial, everything again) goes through the portable ops.
    group.trial = group.cuda && cuda_needs_check(group.device.index());
    std::vector<at::Tensor> rows;
    for (int i : group.entries) {
      Entry& e = entries_[i];
      if (group.cuda && group.cuda->add(e.tensor, e.dtype)) {
        e.on_cuda_backend = true;
        e.position = static_cast<int>(group.cuda_entries.size());
        group.cuda_entries.push_back(i);
        if (!group.trial) continue;
      }
      if (!e.on_cuda_backend) e.position = static_cast<int>(rows.size());
      rows.push_back(portable_stats_row(e.tensor, e.dtype, headroom_, with_casts_));
    }
    if (group.cuda && !group.cuda_entries.empty()) group.cuda->submit();
    if (!rows.empty()) {
      __atomic_or_fetch(&ovf_state.device_backends, uint32_t{OVF_BACKEND_PORTABLE},
                        __ATOMIC_RELAXED);
      const at::Tensor device_rows = at::stack(rows);
      group.host_rows =
          at::empty(device_rows.sizes(),
                    at::TensorOptions().dtype(at::kDouble).pinned_memory(group.device.is_cuda()));
      group.host_rows.copy_(device_rows, /*non_blocking=*/!group.device.is_cpu());
    }
    if (!group.device.is_cpu()) {
      group.done.emplace(group.device.type());
      group.done->record(group.stream);
    }
  } catch (const std::exception&) {
    // Out of device memory, a device error: these lines read "no data".
    group.host_rows = at::Tensor();
    group.cuda.reset();
    group.cuda_entries.clear();
    group.done.reset();
    for (int i : group.entries) entries_[i].group = -1;
  }
}

void TensorStatsBatch::synchronize(Group& group) {
  group.done->synchronize();  // this frame's work only
}

bool TensorStatsBatch::ready() {
  if (arrived_) return true;
  if (!submitted_) return false;
  if (late_polls_ > 0) {
    --late_polls_;
    return false;
  }
  if (any_group_capturing()) return false;
  for (Group& group : groups_) {
    if (group.done && !group.done->query()) return false;
    if (group.cuda && !group.cuda_entries.empty() && !group.cuda->ready()) return false;
  }
  finish();
  return true;
}

bool TensorStatsBatch::any_group_capturing() const {
  for (const Group& group : groups_) {
    const bool has_work = group.done || (group.cuda && !group.cuda_entries.empty());
    if (has_work && device_capturing(group.device)) return true;
  }
  return false;
}

namespace {
std::atomic<uint64_t> g_waits{0};
std::atomic<uint64_t> g_row_reads{0};
}  // namespace

uint64_t TensorStatsBatch::waits() { return g_waits.load(std::memory_order_relaxed); }
uint64_t TensorStatsBatch::row_reads() { return g_row_reads.load(std::memory_order_relaxed); }

bool TensorStatsBatch::wait() {
  if (arrived_ || !submitted_) return true;
  if (any_group_capturing()) return false;
  g_waits.fetch_add(1, std::memory_order_relaxed);
  for (Group& group : groups_) {
    if (group.done) synchronize(group);
    if (group.cuda && !group.cuda_entries.empty()) group.cuda->wait();
  }
  finish();
  return true;
}

void TensorStatsBatch::finish() {
  arrived_ = true;
  for (Group& group : groups_) {
    if (!group.trial || !group.cuda || group.cuda_entries.empty() || !group.host_rows.defined()) {
      continue;
    }
    // The self-check: on a device's first frame both backends computed every
    // tensor the CUDA backend took; any difference rejects it for good.
    // (The rows are read by pointer: no ATen op here, which the op observer
    // and the user's dispatch modes would see.)
    const std::string failure = group.cuda->failure();
    bool same = failure.empty();
    const double* rows = group.host_rows.data_ptr<double>();
    int row = 0;
    for (int i : group.entries) {
      const Entry& e = entries_[i];
      const double* own_row = rows + static_cast<size_t>(row++) * kPortableColumns;
      if (!same || !e.on_cuda_backend) continue;
      same = same_stats(group.cuda->result(e.position),
                        stats_from_row(own_row, e.numel, e.swap_infinities, e.dtype, with_casts_));
    }
    cuda_record_check(group.device.index(), same, failure);
    if (!same) {
      // This frame's numbers come from the portable rows, as every later frame's.
      row = 0;
      for (int i : group.entries) {
        Entry& e = entries_[i];
        e.on_cuda_backend = false;
        e.position = row++;
      }
      group.cuda.reset();
    }
  }
}

Stats TensorStatsBatch::result(int index) {
  if (index < 0 || index >= static_cast<int>(entries_.size())) return Stats{};
  const Entry& e = entries_[index];
  if (e.numel == 0) return empty_stats();
  if (!arrived_ || e.group < 0) return failed(e.numel);
  Group& group = groups_[e.group];
  if (e.on_cuda_backend) return group.cuda ? group.cuda->result(e.position) : failed(e.numel);
  if (!group.host_rows.defined()) return failed(e.numel);
  const double* rows = group.host_rows.data_ptr<double>();
  return stats_from_row(rows + static_cast<size_t>(e.position) * kPortableColumns, e.numel,
                        e.swap_infinities, e.dtype, with_casts_);
}

uint64_t TensorStatsBatch::underflow(int index) {
  if (index < 0 || index >= static_cast<int>(entries_.size())) return 0;
  const Entry& e = entries_[index];
  if (e.numel == 0 || !arrived_ || e.group < 0 || e.on_cuda_backend) return 0;
  const Group& group = groups_[e.group];
  if (!group.host_rows.defined()) return 0;
  const double* rows = group.host_rows.data_ptr<double>();
  return static_cast<uint64_t>(
      rows[static_cast<size_t>(e.position) * kPortableColumns + kUnderflowCount]);
}

Rows TensorStatsBatch::rows(int index) {
  if (index < 0 || index >= static_cast<int>(entries_.size())) return {};
  const Entry& e = entries_[index];
  const at::Tensor t(e.weak.lock());
  // Gone, or written since: what it holds now is not what was measured. An
  // inference tensor keeps no version: trusted only in exact mode, which reads
  // statistics at the end of the frame (or of the outermost op: an op nested
  // after the one that made it may have written it, which its NaN/Inf count,
  // that must still agree, catches only in part).
  if (!t.defined()) return {};
  if (e.version ? version_of(t) != e.version : ovf_state.device_mode != OVF_DEVICE_MODE_EXACT)
    return {};
  g_row_reads.fetch_add(1, std::memory_order_relaxed);
  Rows found = tensor_rows(t);
  if (found.extent == 0 || found.nonfinite != result(index).nonfinite_count()) return {};
  return found;
}

}  // namespace ovf
