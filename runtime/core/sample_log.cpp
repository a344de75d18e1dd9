// The sample log (sample_log.h): a short queue of the last batches' entries.
#include "sample_log.h"

#include <algorithm>
#include <deque>
#include <mutex>

#include "report.h"

namespace ovf {
namespace {

std::mutex log_mutex;
std::deque<BatchSamples> entries;

}  // namespace

void record_batch_samples(const std::string& dataset, const int64_t* indices, size_t count) {
  BatchSamples entry;
  entry.dataset = dataset;
  entry.indices.assign(indices, indices + std::min(count, kSamplesKept));
  entry.total = count;
  std::lock_guard<std::mutex> lock(log_mutex);
  entries.push_back(std::move(entry));
  while (entries.size() > kSampleEntriesKept) entries.pop_front();
}

void claim_pending_samples(uint64_t batch) {
  std::lock_guard<std::mutex> lock(log_mutex);
  for (auto it = entries.rbegin(); it != entries.rend() && it->batch == kPendingBatch; ++it)
    it->batch = batch;
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

void clear_batch_samples() {
  std::lock_guard<std::mutex> lock(log_mutex);
  entries.clear();
}

}  // namespace ovf
