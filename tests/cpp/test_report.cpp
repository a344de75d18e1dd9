// The reference report, character for character, from frames the monitor
// writes into the ring. Expected strings are what transformers.debug_utils'
// f-strings produce for the same values.
#include <gtest/gtest.h>

#include <cmath>
#include <limits>

#include "monitor.h"
#include "report.h"
#include "ring_writer.h"

namespace {

const std::string kPrefix(17, ' ');

// A one-dimensional float32 view of `data` (`size` and `stride` outlive it).
ovf::TensorView float_view(const float* data, const int64_t* size, const int64_t* stride) {
  ovf::TensorView v;
  v.data = data;
  v.dtype = OVF_DTYPE_FLOAT32;
  v.ndim = 1;
  v.sizes = size;
  v.strides = stride;
  return v;
}

ovf_record line_with(uint64_t numel, uint64_t nan, uint64_t pinf, uint64_t ninf, double mn,
                     double mx) {
  ovf_record r{};
  r.kind = OVF_KIND_OUTPUT;
  r.flags = OVF_FLAG_HAS_STATS;
  r.numel = numel;
  r.nan_count = nan;
  r.pos_inf_count = pinf;
  r.neg_inf_count = ninf;
  r.abs_min = mn;
  r.abs_max = mx;
  r.label_id = ovf::intern("output");
  return r;
}

TEST(Format, EightTwoEMatchesPython) {
  EXPECT_EQ(ovf::format_8_2e(0.0), "0.00e+00");
  EXPECT_EQ(ovf::format_8_2e(-0.0), "-0.00e+00");
  EXPECT_EQ(ovf::format_8_2e(62700.0), "6.27e+04");
  EXPECT_EQ(ovf::format_8_2e(1e100), "1.00e+100");
  EXPECT_EQ(ovf::format_8_2e(4.9406564584124654e-324), "4.94e-324");
  EXPECT_EQ(ovf::format_8_2e(std::numeric_limits<double>::infinity()), "     inf");
  EXPECT_EQ(ovf::format_8_2e(-std::numeric_limits<double>::infinity()), "    -inf");
  EXPECT_EQ(ovf::format_8_2e(-std::numeric_limits<double>::quiet_NaN()),
            "     nan");                           // never "-nan"
  EXPECT_EQ(ovf::format_8_2e(0.125), "1.25e-01");  // exact tie: round half to even, as Python
  EXPECT_EQ(ovf::format_8_2e(0.375), "3.75e-01");
}

TEST(Format, ReferenceMinMaxFollowsTorchReductions) {
  // torch.abs(x).min()/.max() propagate NaN and see infinities.
  auto mm = ovf::reference_min_max(line_with(4, 1, 1, 0, 1.0, 2.0));
  EXPECT_TRUE(std::isnan(mm.min) && std::isnan(mm.max));
  mm = ovf::reference_min_max(line_with(4, 0, 1, 1, 1.0, 2.0));
  EXPECT_EQ(mm.min, 1.0);
  EXPECT_TRUE(std::isinf(mm.max));
  mm = ovf::reference_min_max(line_with(2, 0, 1, 1, INFINITY, 0.0));  // only infinities
  EXPECT_TRUE(std::isinf(mm.min) && std::isinf(mm.max));
}

TEST(Format, LinesLookLikeTheReference) {
  EXPECT_EQ(ovf::format_record(line_with(3, 0, 0, 0, 3.18e-4, 62700)), "3.18e-04 6.27e+04 output");
  EXPECT_EQ(ovf::format_record(line_with(3, 0, 1, 0, 0, 9.74e3)), "0.00e+00      inf output");
  ovf_record none{};
  none.kind = OVF_KIND_NONE;
  none.label_id = ovf::intern("output[1]");
  EXPECT_EQ(ovf::format_record(none), "             None output[1]");
  ovf_record other{};
  other.kind = OVF_KIND_NOT_TENSOR;
  other.label_id = ovf::intern("output");
  EXPECT_EQ(ovf::format_record(other), "     not a tensor output");
  ovf_record empty = line_with(0, 0, 0, 0, INFINITY, 0);
  EXPECT_EQ(ovf::format_record(empty), "            empty output");
}

TEST(Format, HostileNamesAreEscaped) {
  ovf_record frame{};
  frame.kind = OVF_KIND_FRAME;
  frame.name_id = ovf::intern("enc\x1b[2Jx\nblock\\0");
  frame.label_id = ovf::intern("Linear");
  EXPECT_EQ(ovf::format_record(frame), kPrefix + " enc\\x1b[2Jx\\x0ablock\\\\0 Linear");
}

TEST(Format, BidiControlsAreEscapedAndOtherTextPasses) {
  // U+202E RIGHT-TO-LEFT OVERRIDE would print "exp" as "pxe"; U+2067 an isolate.
  EXPECT_EQ(ovf::escape_text("a\u202e\u2067exp"), "a\\xe2\\x80\\xae\\xe2\\x81\\xa7exp");
  EXPECT_EQ(ovf::escape_text("caf\u00e9 \u4e2d"), "caf\u00e9 \u4e2d");
}

// A session through the monitor: batch 0 finite, first frame of batch 1 has an Inf.
TEST(Monitor, DetectionReportMatchesReferenceAcrossBatchBoundary) {
  ovf::Monitor& monitor = ovf::Monitor::instance();
  ovf::SessionOptions options;
  options.max_frames_to_save = 3;
  ASSERT_EQ(monitor.start_session(options), "");
  const uint32_t a = ovf::intern("a"), root = ovf::intern(""), lin = ovf::intern("Linear"),
                 model = ovf::intern("Model"), input0 = ovf::intern("input[0]"),
                 output = ovf::intern("output");
  const float finite[] = {0.5f, -2.0f};
  const float overflowed[] = {0.5f, INFINITY};
  const int64_t size = 2, stride = 1;
  auto view = [&](const float* data) { return float_view(data, &size, &stride); };
  ovf::FrameBuilder frame;
  frame.begin(a, lin, false);
  frame.add_tensor(OVF_KIND_INPUT, input0, view(finite), {});
  frame.add_tensor(OVF_KIND_OUTPUT, output, view(finite), {});
  EXPECT_EQ(monitor.finish_frame(frame).action, ovf::Action::kNone);
  frame.begin(root, model, true);
  frame.add_value(OVF_KIND_NOT_TENSOR, output);
  EXPECT_EQ(monitor.finish_frame(frame).action, ovf::Action::kNone);
  frame.begin(a, lin, false);
  frame.add_tensor(OVF_KIND_INPUT, input0, view(finite), {});
  frame.add_tensor(OVF_KIND_OUTPUT, output, view(overflowed), {});
  const ovf::Response out = monitor.finish_frame(frame);
  monitor.stop_session();

  EXPECT_EQ(out.action, ovf::Action::kRaise);
  EXPECT_EQ(out.events, static_cast<uint32_t>(OVF_STOP_INF));
  const std::string start0 =
      "\n\n" + kPrefix + " *** Starting batch number=0 ***\nabs min  abs max  metadata\n";
  const std::string start1 =
      "\n\n" + kPrefix + " *** Starting batch number=1 ***\nabs min  abs max  metadata\n";
  const std::string expected =
      "output has infs\n"
      "\nDetected inf/nan during batch_number=1\n"
      "Last 3 forward frames:\n"
      "abs min  abs max  metadata\n" +
      start0 + kPrefix + " a Linear\n5.00e-01 2.00e+00 input[0]\n5.00e-01 2.00e+00 output\n" +
      kPrefix + "  Model\n     not a tensor output\n" + start1 + kPrefix +
      " a Linear\n5.00e-01 2.00e+00 input[0]\n5.00e-01      inf output\n" + "\n\n\n";
  EXPECT_EQ(out.text, expected);
  EXPECT_EQ(out.message.rfind("DebugUnderflowOverflow: inf/nan detected, aborting", 0), 0u);
}

// Frames from a torch.compile'd graph: the report says once what ovf did not see there;
// an eager run's report stays the reference's.
TEST(Monitor, EventReportSaysOnceWhatCompiledCodeHides) {
  ovf::Monitor& monitor = ovf::Monitor::instance();
  const uint32_t a = ovf::intern("a"), lin = ovf::intern("Linear"), output = ovf::intern("output");
  const float overflowed[] = {0.5f, INFINITY};
  const int64_t size = 2, stride = 1;
  const ovf::TensorView v = float_view(overflowed, &size, &stride);
  auto report = [&](uint32_t flags) {
    ovf::SessionOptions options;
    options.max_frames_to_save = 3;
    EXPECT_EQ(monitor.start_session(options), "");
    ovf::FrameBuilder frame;
    frame.begin(a, lin, false, OVF_NO_SEQ, flags);
    frame.add_tensor(OVF_KIND_OUTPUT, output, v, {});
    const ovf::Response out = monitor.finish_frame(frame);
    monitor.stop_session();
    EXPECT_EQ(out.action, ovf::Action::kRaise);
    return out.text;
  };
  const std::string compiled = report(OVF_FLAG_COMPILED);
  const std::string line =
      "ovf: 1 of 1 frame listed ran in torch.compile'd graphs: module frames are recorded "
      "there; the ATen ops Inductor fuses into its kernels are not seen without --ops "
      "(its checks enter the graphs)\n";
  ASSERT_NE(compiled.find("\n\n\n\n" + line), std::string::npos) << compiled;
  EXPECT_EQ(compiled.find("torch.compile"), compiled.rfind("torch.compile"));
  EXPECT_EQ(report(0).find("torch.compile"), std::string::npos);
}

}  // namespace
