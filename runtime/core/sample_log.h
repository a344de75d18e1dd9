// Which dataset samples each batch held: the indices a DataLoader's sampler gave
// for the batches of the last few steps, kept in the runtime so that the event's
// report and summary can name the samples behind a NaN ("batch 412 held dataset
// indices 90211, 4410, ..."). No data is copied: indices only, a bounded number.
#ifndef OVF_SAMPLE_LOG_H
#define OVF_SAMPLE_LOG_H

#include <cstdint>
#include <string>
#include <vector>

namespace ovf {

// At most this many indices are kept of one batch, and this many batches' entries.
constexpr size_t kSamplesKept = 64;
constexpr size_t kSampleEntriesKept = 16;
constexpr uint64_t kPendingBatch = UINT64_MAX;
constexpr uint64_t kUnattributed = UINT64_MAX - 1;  // its loader ran ahead of the model

struct BatchSamples {
  uint64_t loader = 0;             // which loader's iterator (its Python id)
  uint64_t batch = kPendingBatch;  // the batch the samples went into, once known
  std::string dataset;             // the dataset's class name
  std::vector<int64_t> indices;    // the first kSamplesKept of the batch, in its order
  uint64_t total = 0;              // how many the batch held
};

// Notes that `loader` returned `dataset`'s samples `indices` (`count` of them)
// for the next batch: a loop fetches its data before it calls its model, while
// the batch counter still names the batch before. Thread-safe.
void record_batch_samples(uint64_t loader, const std::string& dataset, const int64_t* indices,
                          size_t count);

// A root module's forward begins `batch`: the samples each loader returned since
// are its own -- unless a loader returned two batches or more before a forward
// (it fetches ahead of the model): from then on that loader's batches are not
// attributed at all, rather than to the wrong batch.
void claim_pending_samples(uint64_t batch);

// The entries kept of `batch` (several where several loaders fed it), oldest first.
std::vector<BatchSamples> samples_of_batch(uint64_t batch);

// "ovf: batch 2 held dataset indices 37, 5 (Squares, 2 of 2)\n" for each entry of
// `batch`, or "" when none is kept.
std::string describe_batch_samples(uint64_t batch);

// `loader` is gone (its id may name another one from now on).
void forget_sample_loader(uint64_t loader);

// Forgets every entry (a new session).
void clear_batch_samples();

}  // namespace ovf

#endif  // OVF_SAMPLE_LOG_H
