// The ring's write protocol: sequence numbers, frame grouping, overwrite
// detection and the string table.
#include <gtest/gtest.h>

#include <cstring>
#include <string>
#include <vector>

#include "record.h"
#include "ring_writer.h"

namespace {

ovf_record blank(ovf_record_kind kind) {
  ovf_record r;
  std::memset(&r, 0, sizeof r);
  r.kind = kind;
  r.frame_seq = OVF_NO_SEQ;
  return r;
}

TEST(Ring, HeaderIsInitialisedAtLoad) {
  EXPECT_EQ(ovf_state.magic, OVF_MAGIC);
  EXPECT_EQ(ovf_state.layout_version, OVF_LAYOUT_VERSION);
  EXPECT_EQ(ovf_state.header_size, sizeof(ovf_state_t));
  EXPECT_EQ(ovf_state.record_size, sizeof(ovf_record));
  EXPECT_GE(ovf_state.record_capacity, 65536u);
  EXPECT_EQ(ovf_state.record_capacity & (ovf_state.record_capacity - 1), 0u);
  EXPECT_NE(ovf_state.pid, 0);
}

TEST(Ring, AppendGroupsAFrameUnderItsFirstSeq) {
  ovf_record run[3] = {blank(OVF_KIND_FRAME), blank(OVF_KIND_INPUT), blank(OVF_KIND_OUTPUT)};
  const uint64_t first = ovf::append_records(run, 3);
  for (uint64_t i = 0; i < 3; ++i) {
    const ovf_record* r = ovf::find_record(first + i);
    ASSERT_NE(r, nullptr);
    EXPECT_EQ(r->seq, first + i);
    EXPECT_EQ(r->frame_seq, first);
  }
  EXPECT_EQ(ovf::find_record(first + 3), nullptr);  // not written yet
}

// The header names the process's GPU from the first record made on one
// (ovf status printed "cpu" for every CUDA run before); later ones leave it.
TEST(Ring, TheFirstCudaRecordNamesTheProcesssDevice) {
  ASSERT_EQ(ovf_state.device_index, -1);
  ovf_record cpu = blank(OVF_KIND_OUTPUT);
  cpu.device_index = -1;
  ovf::append_records(&cpu, 1);
  EXPECT_EQ(ovf_state.device_index, -1);
  ovf_record gpu = blank(OVF_KIND_OUTPUT);
  gpu.device_type = ovf::kCudaDeviceType;
  gpu.device_index = 3;
  ovf::append_records(&gpu, 1);
  EXPECT_EQ(ovf_state.device_index, 3);
  gpu.device_index = 1;
  ovf::append_records(&gpu, 1);
  EXPECT_EQ(ovf_state.device_index, 3);
}

TEST(Ring, OverwrittenSlotsAreNotFound) {
  ovf_record r = blank(OVF_KIND_CHECKPOINT);
  const uint64_t old = ovf::append_records(&r, 1);
  for (uint32_t i = 0; i < ovf_state.record_capacity; ++i) ovf::append_records(&r, 1);
  EXPECT_EQ(ovf::find_record(old), nullptr);
  EXPECT_NE(ovf::find_record(old + ovf_state.record_capacity), nullptr);
}

TEST(Ring, CapacityCannotChangeOnceRecordsExist) {
  ovf_record r = blank(OVF_KIND_CHECKPOINT);
  ovf::append_records(&r, 1);
  ovf::RingConfig config;
  config.record_capacity = 128;
  EXPECT_NE(ovf::ring_configure(config), "");
}

TEST(Ring, InternReturnsStableIdsAndText) {
  const uint32_t id = ovf::intern("encoder.block.0.layer.1.DenseReluDense.wo");
  EXPECT_EQ(ovf::intern("encoder.block.0.layer.1.DenseReluDense.wo"), id);
  EXPECT_EQ(ovf::interned(id), "encoder.block.0.layer.1.DenseReluDense.wo");
  EXPECT_EQ(ovf::interned(ovf::kNameTableFull), "<string table full>");
  EXPECT_EQ(ovf::interned(0xffffffffu), "");
}

TEST(Ring, StopHookIsCallable) {
  ovf_stop_event(nullptr, 0);  // a no-op that must exist with C linkage
  SUCCEED();
}

}  // namespace

// Long runs with dynamic labels keep their names: the table grows past its
// initial 32768 entries (kDefaultNamesCapacity) and every id reads back.
TEST(Ring, TheStringTableGrows) {
  std::vector<uint32_t> ids;
  for (int i = 0; i < 70000; ++i) ids.push_back(ovf::intern("dynamic label " + std::to_string(i)));
  for (int i = 0; i < 70000; i += 997) {
    ASSERT_NE(ids[i], ovf::kNameTableFull);
    EXPECT_EQ(ovf::interned(ids[i]), "dynamic label " + std::to_string(i));
  }
  EXPECT_GE(ovf_state.names_capacity, 70000u);
}
