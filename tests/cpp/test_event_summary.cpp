// The event summary (event_summary.h): its JSON, character for character, and
// a file that is never replaced.
#include <gtest/gtest.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include "event_summary.h"
#include "hints.h"
#include "ring_writer.h"
#include "sample_log.h"

namespace {

std::string read_file(const std::string& path) {
  std::ifstream in(path);
  std::stringstream text;
  text << in.rdbuf();
  return text.str();
}

ovf_record op_output(const char* op, const char* module) {
  ovf_record r{};
  r.kind = OVF_KIND_OP_OUTPUT;
  r.flags = OVF_FLAG_HAS_STATS;
  r.seq = 42;
  r.batch = 17;
  r.timestamp_ns = 1795000000123456789ull;
  r.name_id = ovf::intern(op);
  r.context_id = ovf::intern(module);
  r.aux_id = OVF_NO_ID;
  r.location_id = OVF_NO_ID;
  r.diagnosis_id = OVF_NO_ID;
  r.verdict_id = OVF_NO_ID;
  return r;
}

TEST(EventSummary, AnOpThatProducedTheValue) {
  ovf_state.rank = 3;
  ovf_state.local_rank = 1;
  ovf_state.world_size = 8;
  ovf_record r = op_output("aten::exp", "blocks.1.amp");
  r.diagnosis_id = ovf::intern("aten::exp of 2 values above 88.7 (float32 overflow)");
  r.verdict_id =
      ovf::intern("finite in float64 (abs max 1.00e+39): float32's range or precision here");
  EXPECT_EQ(ovf::event_summary_json(r, OVF_STOP_INF, "model.py:88 in forward"),
            "{\"ovf_event_summary\": 1, \"rank\": 3, \"local_rank\": 1, \"world_size\": 8, "
            "\"host\": \"" +
                ovf::host_name() + "\", \"pid\": " + std::to_string(getpid()) +
                ", \"batch\": 17, \"seq\": 42, \"time_ns\": 1795000000123456789, \"events\": "
                "\"inf\", \"kind\": \"op\", \"role\": \"producer\", \"op\": \"aten::exp\", "
                "\"module\": \"blocks.1.amp\", \"line\": \"model.py:88 in forward\", \"what\": "
                "\"the first non-finite value was produced by aten::exp in blocks.1.amp (batch "
                "17)\", \"why\": \"aten::exp of 2 values above 88.7 (float32 overflow)\", "
                "\"verdict\": \"finite in float64 (abs max 1.00e+39): float32's range or precision "
                "here\", \"replay\": null, \"samples\": [], \"rows\": null}\n");
}

TEST(EventSummary, ACarriedValueAndAHostileModuleName) {
  ovf_state.rank = -1;
  ovf_state.local_rank = -1;
  ovf_state.world_size = 1;
  ovf_record r = op_output("aten::add", "a\"b\x01\\c");
  r.flags |= OVF_FLAG_CARRIER;
  const std::string json = ovf::event_summary_json(r, OVF_STOP_NAN | OVF_STOP_INF, "");
  // The name as ovf prints it (\x01 and \\ escaped), then as a JSON string.
  EXPECT_NE(json.find("\"module\": \"a\\\"b\\\\x01\\\\\\\\c\""), std::string::npos) << json;
  EXPECT_NE(json.find("\"events\": \"nan,inf\", \"kind\": \"op\", \"role\": \"carrier\""),
            std::string::npos)
      << json;
  EXPECT_NE(json.find("\"line\": null"), std::string::npos) << json;
  EXPECT_NE(json.find("\"why\": null, \"verdict\": null, \"replay\": null, \"samples\": [], "
                      "\"rows\": null}"),
            std::string::npos)
      << json;
  EXPECT_NE(json.find("\"rank\": -1, \"local_rank\": -1, \"world_size\": 1"), std::string::npos);
}

TEST(EventSummary, TheBatchsDatasetIndicesAreNamed) {
  ovf::clear_batch_samples();
  const int64_t indices[] = {90211, 4410};
  ovf::record_batch_samples(1, "Squares \"hard\"", indices, 2);
  EXPECT_EQ(ovf::describe_batch_samples(17), "");  // not claimed by a forward yet
  ovf::claim_pending_samples(17);
  const int64_t later[] = {5};
  ovf::record_batch_samples(1, "Squares", later, 1);
  ovf::claim_pending_samples(18);
  ovf_record r = op_output("aten::exp", "head");
  const std::string json = ovf::event_summary_json(r, OVF_STOP_NAN, "");
  EXPECT_NE(json.find(", \"samples\": [{\"dataset\": \"Squares \\\"hard\\\"\", \"total\": 2, "
                      "\"indices\": [90211, 4410]}], \"rows\": null}\n"),
            std::string::npos)
      << json;
  EXPECT_EQ(ovf::describe_batch_samples(17),
            "ovf: batch 17 held dataset indices 90211, 4410 (Squares \"hard\", 2 of 2)\n");
  EXPECT_EQ(ovf::describe_batch_samples(16), "");
  ovf::clear_batch_samples();
}

TEST(EventSummary, ALargeBatchKeepsItsFirstIndicesAndFewBatchesAreKept) {
  ovf::clear_batch_samples();
  std::vector<int64_t> many(100);
  for (size_t i = 0; i < many.size(); ++i) many[i] = static_cast<int64_t>(1000 + i);
  for (uint64_t b = 0; b < ovf::kSampleEntriesKept + 3; ++b) {
    ovf::record_batch_samples(2, "Big", many.data(), many.size());
    ovf::claim_pending_samples(b);
  }
  EXPECT_TRUE(ovf::samples_of_batch(2).empty());  // the oldest are gone
  const auto kept = ovf::samples_of_batch(ovf::kSampleEntriesKept + 2);
  ASSERT_EQ(kept.size(), 1u);
  EXPECT_EQ(kept[0].indices.size(), ovf::kSamplesKept);
  EXPECT_EQ(kept[0].total, 100u);
  const std::string text = ovf::describe_batch_samples(ovf::kSampleEntriesKept + 2);
  EXPECT_NE(text.find(", 1063 (Big, the first 64 of 100)\n"), std::string::npos) << text;
  ovf::clear_batch_samples();
}

TEST(EventSummary, ALoaderThatFetchesAheadIsNotAttributed) {
  ovf::clear_batch_samples();
  const int64_t a[] = {1}, b[] = {2}, c[] = {3}, d[] = {4};
  ovf::record_batch_samples(7, "Ahead", a, 1);  // batch 0 and 1 fetched before the model ran
  ovf::record_batch_samples(7, "Ahead", b, 1);
  ovf::record_batch_samples(8, "Lockstep", c, 1);
  ovf::claim_pending_samples(0);
  ovf::record_batch_samples(7, "Ahead", d, 1);  // one a step from now on: still unknown
  ovf::claim_pending_samples(1);
  EXPECT_EQ(ovf::describe_batch_samples(0),
            "ovf: batch 0 held dataset indices 3 (Lockstep, 1 of 1)\n");
  EXPECT_EQ(ovf::describe_batch_samples(1), "");
  ovf::clear_batch_samples();
}

TEST(EventSummary, AFileIsWrittenWholeAndNeverReplaced) {
  char dir_template[] = "/tmp/ovf-event-summary-XXXXXX";
  const std::string dir = mkdtemp(dir_template);
  EXPECT_EQ(ovf::write_new_file(dir, "one.json", "first\n"), "");
  EXPECT_EQ(read_file(dir + "/one.json"), "first\n");
  EXPECT_EQ(ovf::write_new_file(dir, "one.json", "second\n"),
            dir + "/one.json exists already; not replaced");
  EXPECT_EQ(read_file(dir + "/one.json"), "first\n");
  // Nothing partial is left behind, written or refused.
  EXPECT_NE(access((dir + "/one.json.partial").c_str(), F_OK), 0);
  EXPECT_EQ(ovf::write_new_file(dir + "/missing", "two.json", "x"),
            "cannot create " + dir + "/missing/two.json.partial: No such file or directory");
  std::remove((dir + "/one.json").c_str());
  rmdir(dir.c_str());
}

}  // namespace
