// The sample log (sample_log.h): a short queue of the last batches' entries.
#include "sample_log.h"

#include <algorithm>
#include <deque>
#include <map>
#include <mutex>
#include <set>

#include "report.h"

namespace ovf {
namespace {

std::mutex log_mutex;
std::deque<BatchSamples> entries;
// Loaders seen running ahead of the model: their batches are never attributed.
std::set<uint64_t> ahead;

}  // namespace

void record_batch_samples(uint64_t loader, const std::string& dataset, const int64_t* indices,
                          size_t count) {
  BatchSamples entry;
  entry.loader = loader;
  entry.dataset = dataset;
  entry.indices.assign(indices, indices + std::min(count, kSamplesKept));
  entry.total = count;
  std::lock_guard<std::mutex> lock(log_mutex);
  entries.push_back(std::move(entry));
  while (entries.size() > kSampleEntriesKept) entries.pop_front();
}

void claim_pending_samples(uint64_t batch) {
  std::lock_guard<std::mutex> lock(log_mutex);
  // Every root forward comes here: most find nothing new (pending entries are the newest).
  if (entries.empty() || entries.back().batch != kPendingBatch) return;
  std::map<uint64_t, int> pending;  // loader -> its entries not claimed yet
  for (const BatchSamples& e : entries)
    if (e.batch == kPendingBatch) ++pending[e.loader];
  // Two batches of one loader fetched before the model ran (a loader that looks
  // one ahead, as accelerate's does): which went into this batch cannot be told.
  for (const auto& [loader, count] : pending)
    if (count > 1) ahead.insert(loader);
  for (BatchSamples& e : entries) {
    if (e.batch != kPendingBatch) continue;
    e.batch = ahead.count(e.loader) ? kUnattributed : batch;
  }
}

std::vector<BatchSamples> samples_of_batch(uint64_t batch) {
  std::lock_guard<std::mutex> lock(log_mutex);
  std::vector<BatchSamples> out;
  for (const BatchSamples& e : entries)
    if (e.batch == batch) out.push_back(e);
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
}

void clear_batch_samples() {
  std::lock_guard<std::mutex> lock(log_mutex);
  entries.clear();
  ahead.clear();
}

}  // namespace ovf
