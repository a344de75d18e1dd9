// The event summary (event_summary.h): its JSON, character for character, and
// a file that is never replaced.
#include <gtest/gtest.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <sstream>
#include <string>

#include "event_summary.h"
#include "ring_writer.h"

namespace {

std::string host_name() {
  char host[256] = "";
  gethostname(host, sizeof host - 1);
  return host;
}

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
  return r;
}

TEST(EventSummary, AnOpThatProducedTheValue) {
  ovf_state.rank = 3;
  ovf_state.local_rank = 1;
  ovf_state.world_size = 8;
  ovf_record r = op_output("aten::exp", "blocks.1.amp");
  r.diagnosis_id = ovf::intern("aten::exp of 2 values above 88.7 (float32 overflow)");
  EXPECT_EQ(ovf::event_summary_json(r, OVF_STOP_INF, "model.py:88 in forward"),
            "{\"ovf_event_summary\": 1, \"rank\": 3, \"local_rank\": 1, \"world_size\": 8, "
            "\"host\": \"" +
                host_name() + "\", \"pid\": " + std::to_string(getpid()) +
                ", \"batch\": 17, \"seq\": 42, \"time_ns\": 1795000000123456789, \"events\": "
                "\"inf\", \"kind\": \"op\", \"role\": \"producer\", \"op\": \"aten::exp\", "
                "\"module\": \"blocks.1.amp\", \"line\": \"model.py:88 in forward\", \"what\": "
                "\"the first non-finite value was produced by aten::exp in blocks.1.amp (batch "
                "17)\", \"why\": \"aten::exp of 2 values above 88.7 (float32 overflow)\"}\n");
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
  EXPECT_NE(json.find("\"why\": null}"), std::string::npos) << json;
  EXPECT_NE(json.find("\"rank\": -1, \"local_rank\": -1, \"world_size\": 1"), std::string::npos);
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
