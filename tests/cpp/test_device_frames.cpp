// Fast and exact device mode in the core, with a device batch whose results a
// test hands over when it likes (no torch, no device): pending lines in the
// ring, frames judged in the order they ran, the batch boundary that bounds
// the delay, the late-event flag, and the first non-finite value kept exact
// while statistics were on their way.
#include <gtest/gtest.h>

#include <cmath>
#include <memory>
#include <vector>

#include "monitor.h"
#include "ring_writer.h"

namespace {

// Results set by the test; ready() says what `arrived` says.
class HandedBatch : public ovf::DeviceStatsBatch {
 public:
  explicit HandedBatch(std::vector<ovf::Stats> results) : results_(std::move(results)) {}
  void submit() override { submitted = true; }
  bool ready() override { return arrived; }
  bool wait() override {
    if (!can_wait) return false;
    arrived = true;
    ++waits;
    return true;
  }
  ovf::Stats result(int index) override { return results_.at(index); }
  uint64_t underflow(int) override { return 0; }
  ovf::Rows rows(int index) override {
    asked_rows.push_back(index);
    ovf::Rows r;
    r.extent = 8;
    r.count = 1;
    r.first[0] = 5;
    return r;
  }

  bool submitted = false;
  bool arrived = false;
  bool can_wait = true;  // false: as while a CUDA graph is being captured
  int waits = 0;
  std::vector<int> asked_rows;  // the results whose rows were read again

 private:
  std::vector<ovf::Stats> results_;
};

ovf::Stats values(double abs_max, uint64_t nans = 0) {
  ovf::Stats s;
  s.has_stats = true;
  s.numel = 4;
  s.nan_count = nans;
  s.abs_min = 0.5;
  s.abs_max = abs_max;
  s.abs_min_nonzero = 0.5;
  return s;
}

class DeviceFrames : public ::testing::Test {
 protected:
  void start(ovf_device_mode mode) {
    ovf::SessionOptions options;
    options.device_mode = mode;
    options.on_event = OVF_ON_EVENT_RAISE;
    ASSERT_EQ(monitor.start_session(options), "");
  }
  void TearDown() override { monitor.stop_session(); }

  // A frame of `module` whose output statistics come from a new batch.
  std::shared_ptr<HandedBatch> finish(const char* module, bool root, const ovf::Stats& output,
                                      ovf::Response* response) {
    auto batch = std::make_shared<HandedBatch>(std::vector<ovf::Stats>{output});
    frame.begin(ovf::intern(module), ovf::intern("Layer"), root);
    frame.add_pending(OVF_KIND_OUTPUT, ovf::intern("output"), OVF_DTYPE_FLOAT16, {1, 0}, 4, batch,
                      0);
    *response = monitor.finish_frame(frame);
    return batch;
  }

  ovf::Monitor& monitor = ovf::Monitor::instance();
  ovf::FrameBuilder frame;
};

TEST_F(DeviceFrames, FastModeJudgesAFrameWhenItsStatisticsArrive) {
  start(OVF_DEVICE_MODE_FAST);
  ovf::Response r;
  auto good = finish("a", false, values(2.0), &r);
  EXPECT_TRUE(good->submitted);
  EXPECT_EQ(r.action, ovf::Action::kNone);
  const uint64_t a_seq = ovf_state.write_seq - 2;  // FRAME, output
  const ovf_record* pending = ovf::find_record(a_seq + 1);
  ASSERT_NE(pending, nullptr);
  EXPECT_TRUE(pending->flags & OVF_FLAG_PENDING);
  EXPECT_FALSE(pending->flags & OVF_FLAG_HAS_STATS);
  EXPECT_EQ(ovf_state.pending_frames, 1u);

  auto bad = finish("b", false, values(0.0, 3), &r);
  const uint64_t b_seq = ovf_state.write_seq - 2;
  EXPECT_EQ(r.action, ovf::Action::kNone);  // nothing arrived: nothing judged
  // b's statistics arrive first; it waits behind a, which runs before it.
  bad->arrived = true;
  EXPECT_EQ(monitor.poll_device_frames(true).action, ovf::Action::kNone);
  EXPECT_EQ(ovf_state.first_nonfinite_seq, OVF_NO_SEQ);
  good->arrived = true;
  const ovf::Response late = monitor.poll_device_frames(true);
  EXPECT_EQ(late.action, ovf::Action::kRaise);
  EXPECT_EQ(late.events, static_cast<uint32_t>(OVF_STOP_NAN));
  EXPECT_EQ(ovf_state.first_nonfinite_seq, b_seq + 1);
  EXPECT_EQ(ovf_state.last_event_seq, b_seq);
  EXPECT_EQ(ovf_state.last_event_late, 1u);  // judged from another hook
  EXPECT_EQ(ovf_state.pending_frames, 0u);
  // The ring holds the arrived values under the same sequence numbers.
  const ovf_record* a_line = ovf::find_record(a_seq + 1);
  ASSERT_NE(a_line, nullptr);
  EXPECT_EQ(a_line->flags & (OVF_FLAG_PENDING | OVF_FLAG_HAS_STATS),
            static_cast<uint32_t>(OVF_FLAG_HAS_STATS));
  EXPECT_EQ(a_line->abs_max, 2.0);
  const ovf_record* b_frame = ovf::find_record(b_seq);
  ASSERT_NE(b_frame, nullptr);
  EXPECT_EQ(b_frame->flags & (OVF_FLAG_PENDING | OVF_FLAG_NONFINITE | OVF_FLAG_PRODUCER),
            static_cast<uint32_t>(OVF_FLAG_NONFINITE | OVF_FLAG_PRODUCER));
}

// A device returns statistics, not rows: the session's first non-finite line
// has its rows read again from the batch, once its statistics say so -- not an
// additive mask's input (-inf only), nor a line made in an expected region.
TEST_F(DeviceFrames, TheFirstNonFiniteLinesRowsAreAskedOfTheBatch) {
  start(OVF_DEVICE_MODE_EXACT);
  ovf::Stats mask = values(1.0);
  mask.neg_inf_count = 2;
  auto batch = std::make_shared<HandedBatch>(
      std::vector<ovf::Stats>{values(1.0), mask, values(0.0, 3), values(0.0, 1)});
  frame.begin(ovf::intern("b"), ovf::intern("Layer"), false);
  for (int i = 0; i < 2; ++i)
    frame.add_pending(OVF_KIND_INPUT, ovf::intern("input"), OVF_DTYPE_FLOAT16, {1, 0}, 4, batch, i);
  monitor.expect_nonfinite(true);
  frame.add_pending(OVF_KIND_OUTPUT, ovf::intern("probe"), OVF_DTYPE_FLOAT16, {1, 0}, 4, batch, 2);
  monitor.expect_nonfinite(false);
  frame.add_pending(OVF_KIND_OUTPUT, ovf::intern("output"), OVF_DTYPE_FLOAT16, {1, 0}, 4, batch, 3);
  EXPECT_EQ(monitor.finish_frame(frame).action, ovf::Action::kRaise);
  EXPECT_EQ(batch->asked_rows, std::vector<int>{3});
  const uint64_t last = ovf_state.write_seq - 1;  // the output, the frame's last line
  const ovf_record* output = ovf::find_record(last);
  ASSERT_NE(output, nullptr);
  EXPECT_EQ(output->row_extent, 8u);
  EXPECT_EQ(output->row_count, 1u);
  EXPECT_EQ(output->rows[0], 5u);
  EXPECT_EQ(ovf::find_record(last - 1)->row_extent, 0u);  // the probe
}

TEST_F(DeviceFrames, ExactModeWaitsOncePerFrameAndStopsInIt) {
  start(OVF_DEVICE_MODE_EXACT);
  ovf::Response r;
  auto bad = finish("b", false, values(0.0, 1), &r);
  EXPECT_EQ(bad->waits, 1);
  EXPECT_EQ(r.action, ovf::Action::kRaise);
  EXPECT_EQ(ovf_state.last_event_late, 0u);
  EXPECT_EQ(ovf_state.pending_frames, 0u);
}

// While a CUDA graph is being captured a batch may not be waited for: exact
// mode's frame then waits with the others, and is judged once it can be.
TEST_F(DeviceFrames, ExactModeDefersAFrameItMayNotWaitFor) {
  start(OVF_DEVICE_MODE_EXACT);
  auto batch = std::make_shared<HandedBatch>(std::vector<ovf::Stats>{values(0.0, 1)});
  batch->can_wait = false;
  frame.begin(ovf::intern("b"), ovf::intern("Layer"), false);
  frame.add_pending(OVF_KIND_OUTPUT, ovf::intern("output"), OVF_DTYPE_FLOAT16, {1, 0}, 4, batch, 0);
  EXPECT_EQ(monitor.finish_frame(frame).action, ovf::Action::kNone);
  EXPECT_EQ(batch->waits, 0);
  EXPECT_EQ(ovf_state.pending_frames, 1u);
  batch->can_wait = true;
  batch->arrived = true;
  EXPECT_EQ(monitor.poll_device_frames(true).action, ovf::Action::kRaise);
  EXPECT_EQ(ovf_state.last_event_late, 1u);
  EXPECT_EQ(ovf_state.pending_frames, 0u);
}

TEST_F(DeviceFrames, TheEndOfABatchWaitsForTheBatchBeforeIt) {
  start(OVF_DEVICE_MODE_FAST);
  ovf::Response r;
  auto batch0 = finish("", true, values(1.0, 1), &r);  // the root: batch 0 ends
  EXPECT_EQ(batch0->waits, 0);
  EXPECT_EQ(r.action, ovf::Action::kNone);
  auto batch1 = finish("", true, values(1.0), &r);  // batch 1 ends: batch 0 is waited for
  EXPECT_EQ(batch0->waits, 1);
  EXPECT_EQ(batch1->waits, 0);
  EXPECT_EQ(r.action, ovf::Action::kRaise);
  EXPECT_NE(r.text.find("Detected inf/nan during batch_number=1"), std::string::npos) << r.text;
}

TEST_F(DeviceFrames, AFlushJudgesWhatIsStillOnItsWay) {
  start(OVF_DEVICE_MODE_FAST);
  ovf::Response r;
  auto bad = finish("b", false, values(0.0, 2), &r);
  const ovf::Response flushed = monitor.flush_device_frames(/*can_raise=*/false);
  EXPECT_EQ(bad->waits, 1);
  EXPECT_NE(flushed.text.find("Detected inf/nan"), std::string::npos);
  EXPECT_EQ(flushed.action, ovf::Action::kNone);  // a raise cannot leave a flush
  EXPECT_EQ(ovf_state.pending_frames, 0u);
}

TEST_F(DeviceFrames, AFailedDeviceLineReadsNoData) {
  start(OVF_DEVICE_MODE_EXACT);
  ovf::Response r;
  finish("a", false, ovf::Stats{}, &r);  // has_stats false: the device failed
  const ovf_record* line = ovf::find_record(ovf_state.write_seq - 1);
  ASSERT_NE(line, nullptr);
  EXPECT_EQ(line->flags & (OVF_FLAG_NO_DATA | OVF_FLAG_HAS_STATS | OVF_FLAG_PENDING),
            static_cast<uint32_t>(OVF_FLAG_NO_DATA));
  EXPECT_EQ(line->numel, 4u);
  EXPECT_EQ(r.action, ovf::Action::kNone);
}

}  // namespace
