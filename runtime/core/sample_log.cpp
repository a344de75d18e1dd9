// The sample log (sample_log.h): batches' indices wait in a short queue until a
// root forward claims them, then are published in the state's samples log
// (ring.h's ovf_samples_log), where the report and every reader find them.
#include "sample_log.h"

#include <algorithm>
#include <deque>
#include <map>
#include <mutex>
#include <set>

#include "report.h"
#include "ring_writer.h"

namespace ovf {
namespace {

struct Pending {
  uint64_t loader;
  std::string dataset;
  std::vector<int64_t> indices;  // the first kSamplesKept
  uint64_t total;
  bool one_late;  // handed out only once the next batch is fetched (sample_log.h)
};

std::mutex log_mutex;
std::deque<Pending> pending;  // returned by a loader, not yet claimed by a forward
// Loaders seen running ahead of the model: their batches are never attributed.
std::set<uint64_t> ahead;

// On the heap, like the snapshot: a debugger may read it at exit, and LLDB's
// save-core keeps the heap pages a process wrote.
ovf_samples_log& published() {
  static auto* log = [] {
    auto* l = new ovf_samples_log();
    l->magic = OVF_SAMPLES_MAGIC;
    l->version = OVF_SAMPLES_VERSION;
    l->size = sizeof(ovf_samples_log);
    return l;
  }();
  return *log;
}

// Entry k of the log, as readers take it. Under log_mutex.
void publish(uint64_t batch, const Pending& p) {
  ovf_samples_log& log = published();
  const uint64_t k = log.entries_written;
  ovf_samples_entry& e = log.entries[k % OVF_SAMPLES_ENTRIES];
  // A seqlock's writer: the fence keeps the fields' stores after the zero.
  __atomic_store_n(&e.number, uint64_t{0}, __ATOMIC_RELAXED);
  __atomic_thread_fence(__ATOMIC_RELEASE);
  e.batch = batch;
  e.total = p.total;
  e.dataset_id = intern(p.dataset);
  e.count = static_cast<uint32_t>(p.indices.size());
  std::copy(p.indices.begin(), p.indices.end(), e.indices);
  std::fill(e.indices + p.indices.size(), e.indices + OVF_SAMPLES_PER_ENTRY, 0);
  __atomic_store_n(&e.number, k + 1, __ATOMIC_RELEASE);
  __atomic_store_n(&log.entries_written, k + 1, __ATOMIC_RELEASE);
  __atomic_store_n(&ovf_state.samples_addr, reinterpret_cast<uint64_t>(&log), __ATOMIC_RELEASE);
}

}  // namespace

void record_batch_samples(uint64_t loader, const std::string& dataset, const int64_t* indices,
                          size_t count, bool one_late) {
  Pending p{loader, dataset, {indices, indices + std::min(count, kSamplesKept)}, count, one_late};
  std::lock_guard<std::mutex> lock(log_mutex);
  pending.push_back(std::move(p));
  // A loader iterated without a model claiming its batches keeps only the newest.
  while (pending.size() > OVF_SAMPLES_ENTRIES) pending.pop_front();
}

void claim_pending_samples(uint64_t batch) {
  std::lock_guard<std::mutex> lock(log_mutex);
  // Every root forward comes here: most find nothing new.
  if (pending.empty()) return;
  std::map<uint64_t, int> per_loader, late;
  for (const Pending& p : pending) {
    ++per_loader[p.loader];
    if (p.one_late) ++late[p.loader];
  }
  // Two batches of one loader fetched before the model ran, by a loop not known
  // to hand them out one late: which went into this batch cannot be told.
  for (const auto& [loader, count] : per_loader)
    if (count > 1 && late[loader] != count) ahead.insert(loader);
  std::deque<Pending> kept;
  std::map<uint64_t, int> seen;
  for (Pending& p : pending) {
    if (ahead.count(p.loader)) continue;
    if (p.one_late) {
      // A one-late loop hands out the batch before the newest it fetched: the
      // newest waits (a second forward of the same batch finds only it), and
      // older ones were handed out to no forward (a loop that skipped them).
      const int from_newest = per_loader[p.loader] - ++seen[p.loader];
      if (from_newest == 0) kept.push_back(std::move(p));
      if (from_newest != 1) continue;
    }
    publish(batch, p);
  }
  pending.swap(kept);
}

void release_late_samples(uint64_t loader) {
  std::lock_guard<std::mutex> lock(log_mutex);
  for (Pending& p : pending)
    if (p.loader == loader) p.one_late = false;
}

std::vector<BatchSamples> samples_of_batch(uint64_t batch) {
  std::lock_guard<std::mutex> lock(log_mutex);
  const ovf_samples_log& log = published();
  std::vector<BatchSamples> out;
  const uint64_t n = log.entries_written;
  for (uint64_t k = n > OVF_SAMPLES_ENTRIES ? n - OVF_SAMPLES_ENTRIES : 0; k < n; ++k) {
    const ovf_samples_entry& e = log.entries[k % OVF_SAMPLES_ENTRIES];
    if (e.batch != batch) continue;
    out.push_back({std::string(interned(e.dataset_id)),
                   std::vector<int64_t>(e.indices, e.indices + e.count), e.total});
  }
  return out;
}

std::string describe_batch_samples(uint64_t batch) {
  std::string out;
  for (const BatchSamples& e : samples_of_batch(batch)) {
    out += "ovf: batch " + std::to_string(batch) + " held dataset indices ";
    for (size_t i = 0; i < e.indices.size(); ++i)
      out += (i ? ", " : "") + std::to_string(e.indices[i]);
    out += " (" + escape_text(e.dataset) + ", " +
           (e.indices.size() == e.total ? std::to_string(e.total) + " of " + std::to_string(e.total)
                                        : "the first " + std::to_string(e.indices.size()) + " of " +
                                              std::to_string(e.total)) +
           ")\n";
  }
  return out;
}

void forget_sample_loader(uint64_t loader) {
  std::lock_guard<std::mutex> lock(log_mutex);
  ahead.erase(loader);
  // What it fetched and no forward claimed (a loop that broke early) is not the
  // next iterator's, whose id may be the same.
  pending.erase(std::remove_if(pending.begin(), pending.end(),
                               [&](const Pending& p) { return p.loader == loader; }),
                pending.end());
}

void clear_batch_samples() {
  std::lock_guard<std::mutex> lock(log_mutex);
  pending.clear();
  ahead.clear();
  ovf_samples_log& log = published();
  // A new session: readers see no entry of the last (numbers start again at 1).
  for (ovf_samples_entry& e : log.entries)
    __atomic_store_n(&e.number, uint64_t{0}, __ATOMIC_RELEASE);
  __atomic_store_n(&log.entries_written, uint64_t{0}, __ATOMIC_RELEASE);
}

}  // namespace ovf
