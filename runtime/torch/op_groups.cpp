#include "op_groups.h"

#include <atomic>
#include <deque>
#include <memory>
#include <mutex>
#include <vector>

#include "device_engine.h"
#include "monitor.h"
#include "record.h"
#include "torch_tensor.h"

namespace ovf {
namespace op_detail {
namespace {

// A line of its own (queue_tensor_line).
struct TensorLine {
  ovf_record record;
  StatsRef stats;
  ovf_dtype dtype;
  DeviceId device;
  uint64_t batch;
  bool late = false;
};

// An outermost op and the ops nested in it, in the order they ended (the
// outermost last), or a line of its own, with the device batches their
// statistics come in.
struct OpGroup {
  std::shared_ptr<TensorStatsBatch> open;  // takes tensors until submitted
  std::vector<std::shared_ptr<TensorStatsBatch>> batches;
  std::vector<EndedOp> ops;  // [0, used) are this group's; the rest are kept for reuse
  size_t used = 0;
  std::vector<TensorLine> lines;

  void submit_open() {
    if (!open) return;
    open->submit();
    batches.push_back(std::move(open));
    open.reset();
  }
  bool arrived() {
    for (const auto& batch : batches) {
      if (!batch->ready()) return false;
    }
    return true;
  }
  // Returns whether it had to wait.
  bool wait() {
    bool waited = false;
    for (const auto& batch : batches) {
      waited = waited || !batch->arrived();
      batch->wait();
    }
    return waited;
  }
};

thread_local OpGroup t_open;

struct Queue {
  std::mutex mutex;    // guards groups
  std::mutex judging;  // one thread judges at a time, so groups commit in order
  std::deque<OpGroup> groups;
  std::atomic<size_t> size{0};
  std::atomic<uint64_t> waits{0};
  std::atomic<uint64_t> device_groups{0};  // groups with device statistics
};

Queue& queue() {
  static auto* q = new Queue();  // never destroyed: ops may run during exit
  return *q;
}

// Judges a group's ops in the order they ended; each hands what it made to the
// op it ran inside, which ended after it in the same group.
void judge_group(OpGroup& group) {
  for (size_t i = 0; i < group.used; ++i) {
    EndedOp& op = group.ops[i];
    EndedOp* parent = nullptr;
    for (size_t j = i + 1; op.parent != 0 && j < group.used; ++j) {
      if (group.ops[j].op.handle == op.parent) {
        parent = &group.ops[j];
        break;
      }
    }
    judge_op(op, parent);
  }
  for (TensorLine& line : group.lines) {
    const Stats s = line.stats.get();
    if (!s.has_stats) continue;
    ovf_record r = make_line(static_cast<ovf_record_kind>(line.record.kind), line.record.label_id,
                             s, line.dtype, line.device, line.record.flags);
    r.name_id = line.record.name_id;
    r.context_id = line.record.context_id;
    Monitor::instance().commit_line(r, line.batch, line.late);
  }
}

enum class Drain { kArrived, kOldestOverWindow, kAll };

// Judges queued groups from the front, in order, while their statistics are
// there (kArrived), waiting for the front while too many are queued
// (kOldestOverWindow), or waiting for each (kAll).
void drain(Drain how) {
  Queue& q = queue();
  if (q.size.load(std::memory_order_acquire) == 0) return;
  std::unique_lock<std::mutex> judging(q.judging, std::defer_lock);
  if (how == Drain::kAll) {
    judging.lock();
  } else if (!judging.try_lock()) {
    return;  // another thread judges them, in order
  }
  for (;;) {
    OpGroup group;
    {
      std::lock_guard<std::mutex> lock(q.mutex);
      if (q.groups.empty()) break;
      OpGroup& front = q.groups.front();
      const bool wait = how == Drain::kAll ||
                        (how == Drain::kOldestOverWindow && q.groups.size() > kMaxGroupsInFlight);
      if (wait) {
        if (front.wait()) q.waits.fetch_add(1, std::memory_order_relaxed);
      } else if (!front.arrived()) {
        break;
      }
      group = std::move(front);
      q.groups.pop_front();
      q.size.store(q.groups.size(), std::memory_order_release);
    }
    judge_group(group);
  }
  judging.unlock();
  deliver_op_events();
}

}  // namespace

StatsRef stats_as_of_now(const at::Tensor& t, const TensorView& view, StatsUse use,
                         bool submit_now) {
  StatsRef ref = request_stats(t, view, &t_open.open, use);
  if (submit_now && ref.batch) t_open.submit_open();
  return ref;
}

EndedOp& next_ended_op() {
  if (t_open.used == t_open.ops.size()) t_open.ops.emplace_back();
  EndedOp& e = t_open.ops[t_open.used++];
  e.clear();
  return e;
}

void drop_ended_op() { --t_open.used; }

// A group is complete: judged now (its statistics known, or waited for in
// exact mode, and nothing queued before it), else queued. Returns whether it
// was judged now (`group` is then left as it was, for reuse).
bool end_group(OpGroup& group) {
  group.submit_open();
  if (group.used == 0 && group.lines.empty()) return true;  // its ops threw: batches let go
  Queue& q = queue();
  if (!group.batches.empty()) q.device_groups.fetch_add(1, std::memory_order_relaxed);
  const bool queued_before = q.size.load(std::memory_order_acquire) > 0;
  if (!group.batches.empty() && ovf_state.device_mode == OVF_DEVICE_MODE_EXACT) {
    if (group.wait()) q.waits.fetch_add(1, std::memory_order_relaxed);
  }
  if (!queued_before && (group.batches.empty() || group.arrived())) {
    judge_group(group);  // known now, and nothing before it waits
    deliver_op_events();
    return true;
  }
  // Judged later: its forward ops keep the line that ran them.
  const bool forward = group.used > 0 && !group.ops[group.used - 1].backward;
  const uint32_t location = forward ? program_location() : OVF_NO_ID;
  for (size_t i = 0; i < group.used; ++i) {
    EndedOp& op = group.ops[i];
    op.late = true;
    if (!op.backward) op.location_id = location;
  }
  for (TensorLine& line : group.lines) line.late = true;
  group.ops.resize(group.used);
  {
    std::lock_guard<std::mutex> lock(q.mutex);
    q.groups.push_back(std::move(group));
    q.size.store(q.groups.size(), std::memory_order_release);
  }
  group = OpGroup();
  drain(Drain::kOldestOverWindow);
  return false;
}

void end_outermost_op() {
  if (end_group(t_open)) {  // judged: its EndedOps are kept for the next group
    for (size_t i = 0; i < t_open.used; ++i) t_open.ops[i].clear();  // let the tensors go
    t_open.used = 0;
    t_open.batches.clear();
  }
}

}  // namespace op_detail

void queue_tensor_line(const ovf_record& line, const at::Tensor& t) {
  using namespace op_detail;  // NOLINT(google-build-using-namespace): the group's parts
  TensorView view;
  if (!stats_view(t, &view)) return;
  OpGroup group;
  group.lines.push_back({line, request_stats(t, view, &group.open, StatsUse::kLine), view.dtype,
                         device_id_of(t), Monitor::instance().record_batch()});
  end_group(group);
}

void poll_op_groups() { op_detail::drain(op_detail::Drain::kArrived); }

void flush_op_groups() { op_detail::drain(op_detail::Drain::kAll); }

OpGroupCounts op_group_counts() {
  const op_detail::Queue& q = op_detail::queue();
  return {q.waits.load(std::memory_order_relaxed), q.device_groups.load(std::memory_order_relaxed)};
}

}  // namespace ovf
