// Which dataset samples each batch held: the indices a DataLoader's sampler gave
// for the batches of the last few steps, published in the state's samples log
// (ring.h) so that the event's report and summary, `ovf samples` and a core name
// the samples behind a NaN ("batch 412 held dataset indices 90211, 4410, ...").
// No data is copied: indices only, a bounded number.
#ifndef OVF_SAMPLE_LOG_H
#define OVF_SAMPLE_LOG_H

#include <cstdint>
#include <string>
#include <vector>

#include "ovf/ring.h"

namespace ovf {

// At most this many indices are kept of one batch, and this many batches' entries.
constexpr size_t kSamplesKept = OVF_SAMPLES_PER_ENTRY;
constexpr size_t kSampleEntriesKept = OVF_SAMPLES_ENTRIES;

struct BatchSamples {
  std::string dataset;           // the dataset's class name
  std::vector<int64_t> indices;  // the first kSamplesKept of the batch, in its order
  uint64_t total = 0;            // how many the batch held
};

// Notes that `loader` returned `dataset`'s samples `indices` (`count` of them)
// for the next batch: a loop fetches its data before it calls its model, while
// the batch counter still names the batch before. `one_late`: the loop that
// asked is known to fetch one batch ahead of the one it hands out (Accelerate's
// loaders): the model runs on the batch before. Thread-safe.
void record_batch_samples(uint64_t loader, const std::string& dataset, const int64_t* indices,
                          size_t count, bool one_late = false);

// `loader` has no batch left: a one-late loop hands out the last it fetched.
void release_late_samples(uint64_t loader);

// A root module's forward begins `batch`: the samples each loader returned since
// are its own -- unless a loader returned two batches or more before a forward
// (it fetches ahead of the model): from then on that loader's batches are not
// attributed at all, rather than to the wrong batch. A one-late loader's batch
// before the newest it fetched is the forward's (the newest waits, older ones a
// loop skipped are dropped); its last, once it has none left.
void claim_pending_samples(uint64_t batch);

// The entries kept of `batch` (several where several loaders fed it), oldest first.
std::vector<BatchSamples> samples_of_batch(uint64_t batch);

// "ovf: batch 2 held dataset indices 37, 5 (Squares, 2 of 2)\n" for each entry of
// `batch`, or "" when none is kept.
std::string describe_batch_samples(uint64_t batch);

// `loader` is gone, or starts a new pass: what it fetched and no forward
// claimed is dropped, and it is followed afresh (its id may name another one).
void forget_sample_loader(uint64_t loader);

// Forgets every entry, published ones too (a new session).
void clear_batch_samples();

}  // namespace ovf

#endif  // OVF_SAMPLE_LOG_H
