// The exported state and everything that writes the ring.
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <time.h>
#include <unistd.h>

#include <cstdio>
#include <mutex>
#include <unordered_map>
#include <utility>

#include "ring_writer.h"

#include "record.h"
#include "version.h"

// The one exported symbol readers look for. Zero until initialised, so a reader
// that finds no magic knows the runtime is loaded but not set up.
extern "C" __attribute__((visibility("default"))) ovf_state_t ovf_state;
ovf_state_t ovf_state;

namespace ovf {
namespace {

std::mutex g_names_mutex;
std::unordered_map<std::string, uint32_t>& name_ids() {
  static auto* ids =
      new std::unordered_map<std::string, uint32_t>();  // never destroyed: hooks may run at exit
  return *ids;
}

uint32_t round_up_pow2(uint32_t x) {
  uint32_t p = 1;
  while (p < x && p < (1u << 30)) p <<= 1;
  return p;
}

int env_int(const char* name, int fallback) {
  const char* value = getenv(name);
  if (value == nullptr || *value == '\0') return fallback;
  char* end = nullptr;
  const long parsed = strtol(value, &end, 10);
  return (end != nullptr && *end == '\0') ? static_cast<int>(parsed) : fallback;
}

// C++17 has no atomic_ref; the GCC builtins give the same on plain fields of a C struct.
uint64_t load_write_seq() { return __atomic_load_n(&ovf_state.write_seq, __ATOMIC_ACQUIRE); }

void add_string_locked(std::string_view text) {
  auto* index = reinterpret_cast<uint32_t*>(ovf_state.names_index_addr);
  auto* arena = reinterpret_cast<char*>(ovf_state.names_arena_addr);
  const uint32_t id = ovf_state.names_count;
  memcpy(arena + ovf_state.names_arena_used, text.data(), text.size());
  index[2 * id] = ovf_state.names_arena_used;
  index[2 * id + 1] = static_cast<uint32_t>(text.size());
  ovf_state.names_arena_used += static_cast<uint32_t>(text.size());
  // Publish the entry only after its bytes are in place.
  __atomic_store_n(&ovf_state.names_count, id + 1, __ATOMIC_RELEASE);
  name_ids().emplace(std::string(text), id);
}

// A forked child (a DataLoader worker) is another process: its ring says so.
void refresh_identity_after_fork() { ovf_state.pid = static_cast<int32_t>(getpid()); }

std::string& load_refusal() {
  static auto* text = new std::string();  // never destroyed: read at any session start
  return *text;
}

__attribute__((constructor)) void initialise_at_load() {
  pthread_atfork(nullptr, nullptr, &refresh_identity_after_fork);
  RingConfig config;
  const int capacity = env_int("OVF_RING_CAPACITY", 0);
  if (capacity > 0) config.record_capacity = static_cast<uint32_t>(capacity);
  if (config.record_capacity != kDefaultRecordCapacity) {
    const std::string why = ring_configure(config);
    if (why.empty()) return;
    // Said when a session starts (take_load_refusal): Python's options refuse
    // the variable themselves before one does, in one line of their own.
    load_refusal() = "ovf: OVF_RING_CAPACITY=" + std::to_string(capacity) + ": " + why +
                     "; the ring keeps " + std::to_string(kDefaultRecordCapacity) + " records";
  }
  ring_configure(RingConfig{});
}

std::string gib(double bytes) {
  char text[32];
  std::snprintf(text, sizeof text, "%.1f GiB", bytes / double(1ull << 30));
  return text;
}

// Anonymous memory the kernel fills with zeros on first touch: a ring costs
// only the records written, not its capacity, until it wraps.
void* map_zeroed(size_t bytes) {
  void* p = mmap(nullptr, bytes, PROT_READ | PROT_WRITE,
                 MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
  return p == MAP_FAILED ? nullptr : p;
}

}  // namespace

uint64_t now_ns() {
  timespec ts;
  clock_gettime(CLOCK_REALTIME, &ts);
  return static_cast<uint64_t>(ts.tv_sec) * 1000000000ull + static_cast<uint64_t>(ts.tv_nsec);
}

std::string take_load_refusal() {
  std::lock_guard<std::mutex> lock(g_names_mutex);
  return std::exchange(load_refusal(), std::string());
}

namespace {

// What this process may use: the machine's memory, or its cgroup's limit
// (a container's, a batch job's) where that is lower.
double usable_memory() {
  double memory = double(sysconf(_SC_PHYS_PAGES)) * double(sysconf(_SC_PAGESIZE));
  for (const char* path :
       {"/sys/fs/cgroup/memory.max", "/sys/fs/cgroup/memory/memory.limit_in_bytes"}) {
    FILE* f = std::fopen(path, "r");
    if (f == nullptr) continue;
    unsigned long long limit = 0;
    if (std::fscanf(f, "%llu", &limit) == 1 && limit > 0 && double(limit) < memory)
      memory = double(limit);  // "max" (no limit) reads as no number
    std::fclose(f);
  }
  return memory;
}

}  // namespace

std::string ring_capacity_refusal(uint32_t capacity) {
  const uint64_t records = round_up_pow2(capacity < 64 ? 64 : capacity);
  const double memory = usable_memory();
  const double bytes = double(records) * OVF_RECORD_SIZE;
  if (memory <= 0 || bytes <= memory / 2) return "";
  uint64_t fits = 64;
  while (double(fits * 2) * OVF_RECORD_SIZE <= memory / 2 && fits < (1u << 30)) fits *= 2;
  return "would take " + gib(bytes) + " (" + std::to_string(records) + " records of " +
         std::to_string(OVF_RECORD_SIZE) + " bytes); at most " + std::to_string(fits) +
         " records fit in half of the " + gib(memory) +
         " of memory this process may use (each process's ring counts alone)";
}

std::string ring_configure(const RingConfig& config) {
  std::lock_guard<std::mutex> lock(g_names_mutex);
  const uint32_t capacity =
      round_up_pow2(config.record_capacity < 64 ? 64 : config.record_capacity);
  if (ovf_state.magic == OVF_MAGIC && capacity == ovf_state.record_capacity) return "";
  const std::string refusal = ring_capacity_refusal(capacity);
  if (!refusal.empty()) return "a ring of " + std::to_string(capacity) + " records " + refusal;
  if (ovf_state.magic == OVF_MAGIC) {
    if (load_write_seq() != 0) {
      return "the ring already holds records; set its capacity before the first hook runs "
             "(environment variable OVF_RING_CAPACITY)";
    }
    munmap(reinterpret_cast<void*>(ovf_state.records_addr),
           static_cast<size_t>(ovf_state.record_capacity) * OVF_RECORD_SIZE);
    ovf_state.records_addr = 0;
  }
  void* records = map_zeroed(static_cast<size_t>(capacity) * OVF_RECORD_SIZE);
  if (records == nullptr)
    return "cannot allocate the ring (" + std::to_string(capacity) + " records)";
  ovf_state.records_addr = reinterpret_cast<uint64_t>(records);
  ovf_state.record_capacity = capacity;
  if (ovf_state.magic == OVF_MAGIC) return "";  // names and identity were set up already

  auto* index = static_cast<uint32_t*>(calloc(config.names_capacity, 2 * sizeof(uint32_t)));
  auto* arena = static_cast<char*>(calloc(config.names_arena_bytes, 1));
  if (index == nullptr || arena == nullptr) return "cannot allocate the string table";
  ovf_state.names_index_addr = reinterpret_cast<uint64_t>(index);
  ovf_state.names_arena_addr = reinterpret_cast<uint64_t>(arena);
  ovf_state.names_capacity = config.names_capacity;
  ovf_state.names_arena_size = config.names_arena_bytes;

  ovf_state.layout_version = OVF_LAYOUT_VERSION;
  ovf_state.header_size = OVF_HEADER_SIZE;
  ovf_state.record_size = OVF_RECORD_SIZE;
  ovf_state.first_nonfinite_seq = OVF_NO_SEQ;
  ovf_state.last_event_seq = OVF_NO_SEQ;
  ovf_state.pid = static_cast<int32_t>(getpid());
  ovf_state.rank = env_int("RANK", -1);
  ovf_state.local_rank = env_int("LOCAL_RANK", -1);
  ovf_state.world_size = env_int("WORLD_SIZE", 1);
  ovf_state.device_index = -1;
  ovf_state.runtime_version = OVF_VERSION_MAJOR << 16 | OVF_VERSION_MINOR << 8 | OVF_VERSION_PATCH;
  ovf_state.max_frames_to_save = 21;
  ovf_state.start_time_ns = now_ns();
  ovf_state.root_class_id = OVF_NO_ID;

  ovf_control& c = ovf_state.control;
  c.enabled = 1;
  c.stop_mask = OVF_STOP_NAN | OVF_STOP_INF;
  c.on_event = OVF_ON_EVENT_RAISE;
  ovf_state.own_on_event = OVF_ON_EVENT_RAISE;
  c.above = __builtin_inf();
  c.below = 0;
  c.after_batch = 0;
  c.abort_after_batch = -1;
  c.cast_overflow_max = c.cast_flush_max = c.cast_subnormal_max = -1;  // off

  // Id 0 is what a full table hands out, so it must read as such.
  add_string_locked("<string table full>");
  __atomic_store_n(&ovf_state.magic, OVF_MAGIC, __ATOMIC_RELEASE);
  return "";
}

namespace {

// Doubles the string table (index and arena) until `text` fits, up to
// kMaxNames entries and kMaxNamesArenaBytes. The old arrays are never freed:
// a thread in interned(), or a debugger, may still read them; the growth is
// geometric, so they add up to less than the new ones.
bool grow_names_locked(size_t text_size) {
  uint64_t capacity = ovf_state.names_capacity, arena_size = ovf_state.names_arena_size;
  while (ovf_state.names_count >= capacity || text_size > arena_size - ovf_state.names_arena_used) {
    capacity = ovf_state.names_count >= capacity ? capacity * 2 : capacity;
    arena_size = text_size > arena_size - ovf_state.names_arena_used ? arena_size * 2 : arena_size;
    if (capacity > kMaxNames || arena_size > kMaxNamesArenaBytes) return false;
  }
  auto* index = static_cast<uint32_t*>(calloc(capacity, 2 * sizeof(uint32_t)));
  auto* arena = static_cast<char*>(calloc(arena_size, 1));
  if (index == nullptr || arena == nullptr) {
    free(index);
    free(arena);
    return false;
  }
  memcpy(index, reinterpret_cast<const void*>(ovf_state.names_index_addr),
         static_cast<size_t>(ovf_state.names_count) * 2 * sizeof(uint32_t));
  memcpy(arena, reinterpret_cast<const void*>(ovf_state.names_arena_addr),
         ovf_state.names_arena_used);
  // New addresses first, then the sizes that let a reader use them.
  __atomic_store_n(&ovf_state.names_index_addr, reinterpret_cast<uint64_t>(index),
                   __ATOMIC_RELEASE);
  __atomic_store_n(&ovf_state.names_arena_addr, reinterpret_cast<uint64_t>(arena),
                   __ATOMIC_RELEASE);
  __atomic_store_n(&ovf_state.names_capacity, static_cast<uint32_t>(capacity), __ATOMIC_RELEASE);
  __atomic_store_n(&ovf_state.names_arena_size, static_cast<uint32_t>(arena_size),
                   __ATOMIC_RELEASE);
  return true;
}

}  // namespace

uint32_t intern(std::string_view text) {
  std::lock_guard<std::mutex> lock(g_names_mutex);
  auto& ids = name_ids();
  if (auto it = ids.find(std::string(text)); it != ids.end()) return it->second;
  if ((ovf_state.names_count >= ovf_state.names_capacity ||
       text.size() > ovf_state.names_arena_size - ovf_state.names_arena_used) &&
      !grow_names_locked(text.size())) {
    return kNameTableFull;
  }
  add_string_locked(text);
  return ovf_state.names_count - 1;
}

std::string_view interned(uint32_t id) {
  if (id >= __atomic_load_n(&ovf_state.names_count, __ATOMIC_ACQUIRE)) return {};
  const auto* index = reinterpret_cast<const uint32_t*>(
      __atomic_load_n(&ovf_state.names_index_addr, __ATOMIC_ACQUIRE));
  const auto* arena =
      reinterpret_cast<const char*>(__atomic_load_n(&ovf_state.names_arena_addr, __ATOMIC_ACQUIRE));
  return std::string_view(arena + index[2 * id], index[2 * id + 1]);
}

uint64_t append_records(ovf_record* records, uint32_t count) {
  const uint64_t first = __atomic_fetch_add(&ovf_state.write_seq, count, __ATOMIC_RELAXED);
  const uint64_t mask = ovf_state.record_capacity - 1;
  auto* slots = reinterpret_cast<ovf_record*>(ovf_state.records_addr);
  for (uint32_t i = 0; i < count; ++i) {
    ovf_record& slot = slots[(first + i) & mask];
    // Mark the slot torn while it is rewritten: a reader (or a core written now)
    // sees OVF_NO_SEQ, never a mix of two records under a valid number.
    __atomic_store_n(&slot.seq, OVF_NO_SEQ, __ATOMIC_RELAXED);
    __atomic_thread_fence(__ATOMIC_RELEASE);
    ovf_record& r = records[i];
    // The header names the process's GPU (ovf status, ovf.ranks): the first
    // CUDA device a record was made on; it stays -1 (cpu) for a CPU-only run.
    if (r.device_type == kCudaDeviceType && ovf_state.device_index < 0) {
      __atomic_store_n(&ovf_state.device_index, int32_t{r.device_index}, __ATOMIC_RELAXED);
    }
    r.seq = first + i;
    if (r.frame_seq == OVF_NO_SEQ) r.frame_seq = first;
    memcpy(reinterpret_cast<char*>(&slot) + sizeof slot.seq,
           reinterpret_cast<const char*>(&r) + sizeof r.seq, sizeof r - sizeof r.seq);
    __atomic_store_n(&slot.seq, r.seq, __ATOMIC_RELEASE);
  }
  return first;
}

bool rewrite_record(const ovf_record& r) {
  const uint64_t mask = ovf_state.record_capacity - 1;
  auto* slots = reinterpret_cast<ovf_record*>(ovf_state.records_addr);
  ovf_record& slot = slots[r.seq & mask];
  uint64_t expected = r.seq;
  if (!__atomic_compare_exchange_n(&slot.seq, &expected, OVF_NO_SEQ, false, __ATOMIC_RELAXED,
                                   __ATOMIC_RELAXED)) {
    return false;  // overwritten: the ring went round while the statistics were on their way
  }
  __atomic_thread_fence(__ATOMIC_RELEASE);
  memcpy(reinterpret_cast<char*>(&slot) + sizeof slot.seq,
         reinterpret_cast<const char*>(&r) + sizeof r.seq, sizeof r - sizeof r.seq);
  __atomic_store_n(&slot.seq, r.seq, __ATOMIC_RELEASE);
  return true;
}

const ovf_record* find_record(uint64_t seq) {
  if (seq == OVF_NO_SEQ || seq >= load_write_seq()) return nullptr;
  const auto* slots = reinterpret_cast<const ovf_record*>(ovf_state.records_addr);
  const ovf_record& slot = slots[seq & (ovf_state.record_capacity - 1)];
  if (__atomic_load_n(&slot.seq, __ATOMIC_ACQUIRE) != seq) return nullptr;
  return &slot;
}

}  // namespace ovf

// The stop hook: a debugger's breakpoint sits here. noinline plus the empty asm
// keep the call and the function body from being optimised away.
extern "C" __attribute__((visibility("default"), noinline)) void ovf_stop_event(
    const ovf_record* record, uint32_t event) {
  __asm__ volatile("" : : "r"(record), "r"(event) : "memory");
}
