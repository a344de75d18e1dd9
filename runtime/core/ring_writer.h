// Writing side of the ring: initialisation, record appends, interned strings.
#ifndef OVF_RING_WRITER_H
#define OVF_RING_WRITER_H

#include <cstdint>
#include <string>
#include <string_view>

#include "ovf/ring.h"

namespace ovf {

constexpr uint32_t kDefaultRecordCapacity = 1u << 16;
constexpr uint32_t kDefaultNamesCapacity = 1u << 15;
constexpr uint32_t kDefaultNamesArenaBytes = 2u << 20;
// The string table grows by doubling up to these bounds (a run with dynamic
// labels keeps its names), then hands out this id, which reads "<string table full>".
constexpr uint32_t kMaxNames = 1u << 21;
constexpr uint32_t kMaxNamesArenaBytes = 128u << 20;
constexpr uint32_t kNameTableFull = 0;

struct RingConfig {
  uint32_t record_capacity = kDefaultRecordCapacity;  // rounded up to a power of two
  uint32_t names_capacity = kDefaultNamesCapacity;
  uint32_t names_arena_bytes = kDefaultNamesArenaBytes;
};

// Why a ring of `capacity` records (rounded up to a power of two) is refused,
// or "" when it fits in half of this machine's memory: the ring's pages are
// touched only as records are written, but a long run writes every one.
// The text follows the capacity: "would take 24.0 GiB (...); at most N ...".
std::string ring_capacity_refusal(uint32_t capacity);

// Why the library's load did not take OVF_RING_CAPACITY ("" if it did, or
// once it was taken): the first session says it.
std::string take_load_refusal();

// Allocates the ring as configured (OVF_RING_CAPACITY overrides the record
// capacity) and fills the header. Done at library load; calling it again with a
// different capacity works only while no record has been written.
// Returns an empty string on success, else why it was refused.
std::string ring_configure(const RingConfig& config);

// The id of `text` in the string table, adding it once. Thread-safe.
uint32_t intern(std::string_view text);

// The text of an interned id ("" for an unknown id).
std::string_view interned(uint32_t id);

// Appends `count` records as one contiguous run of sequence numbers and returns
// the first. Each record's seq is filled in; frame_seq fields equal to
// OVF_NO_SEQ are set to the run's first seq (the frame record). Thread-safe.
uint64_t append_records(ovf_record* records, uint32_t count);

// Writes `record` again into the slot of its seq (statistics that arrived after
// it was appended), as append_records writes: torn-marked while it changes.
// Returns false, writing nothing, when the slot holds a newer record already.
bool rewrite_record(const ovf_record& record);

// The slot a sequence number lives in, or nullptr when it was overwritten or
// not yet written.
const ovf_record* find_record(uint64_t seq);

// Nanoseconds of CLOCK_REALTIME.
uint64_t now_ns();

}  // namespace ovf

#endif  // OVF_RING_WRITER_H
