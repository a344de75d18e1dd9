// Which rows hold the first NaN/Inf (row_scan.h) and which dataset samples they
// were (row_samples.h): exact rows on contiguous, strided and half tensors, and
// the report's line, word for word, with and without a module that mixes rows.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <limits>
#include <string>
#include <vector>

#include "ring_writer.h"
#include "row_samples.h"
#include "row_scan.h"
#include "sample_log.h"

namespace {

const float kNan = std::numeric_limits<float>::quiet_NaN();
const float kInf = std::numeric_limits<float>::infinity();

ovf::TensorView view_of(const void* data, ovf_dtype dtype, const std::vector<int64_t>& sizes,
                        const std::vector<int64_t>& strides) {
  ovf::TensorView v;
  v.data = data;
  v.dtype = dtype;
  v.ndim = static_cast<int>(sizes.size());
  v.sizes = sizes.data();
  v.strides = strides.data();
  return v;
}

std::vector<uint32_t> kept(const ovf::Rows& r) {
  return {r.first, r.first + std::min<uint32_t>(r.count, OVF_ROWS_KEPT)};
}

TEST(RowScan, TheRowsOfAMatrixThatHoldANanOrAnInf) {
  std::vector<float> x(8 * 4, 1.0f);
  x[5 * 4 + 3] = kNan;
  x[2 * 4 + 0] = -kInf;
  const std::vector<int64_t> sizes{8, 4}, strides{4, 1};
  const ovf::Rows r = ovf::find_rows(view_of(x.data(), OVF_DTYPE_FLOAT32, sizes, strides));
  EXPECT_EQ(r.extent, 8u);
  EXPECT_EQ(r.count, 2u);
  EXPECT_EQ(kept(r), (std::vector<uint32_t>{2, 5}));
}

TEST(RowScan, ATransposedViewReadsItsOwnRows) {
  // Memory holds a 4 x 8 matrix; the view is its transpose, 8 rows of 4.
  std::vector<float> x(4 * 8, 0.5f);
  x[1 * 8 + 6] = kInf;  // memory row 1, column 6: the view's row 6
  const std::vector<int64_t> sizes{8, 4}, strides{1, 8};
  const ovf::Rows r = ovf::find_rows(view_of(x.data(), OVF_DTYPE_FLOAT32, sizes, strides));
  EXPECT_EQ(r.count, 1u);
  EXPECT_EQ(kept(r), (std::vector<uint32_t>{6}));
}

TEST(RowScan, HalfPrecisionAndMoreRowsThanKept) {
  std::vector<uint16_t> x(10 * 3, 0x3c00);                        // 1.0 in float16
  for (int row : {0, 1, 3, 4, 6, 7, 9}) x[row * 3 + 1] = 0x7e00;  // NaN
  const std::vector<int64_t> sizes{10, 3}, strides{3, 1};
  const ovf::Rows r = ovf::find_rows(view_of(x.data(), OVF_DTYPE_FLOAT16, sizes, strides));
  EXPECT_EQ(r.extent, 10u);
  EXPECT_EQ(r.count, 7u);
  EXPECT_EQ(kept(r), (std::vector<uint32_t>{0, 1, 3, 4, 6, 7}));
}

TEST(RowScan, NoFirstDimensionOrTooManyRowsIsNotMeasured) {
  float scalar = kNan;
  const std::vector<int64_t> none;
  EXPECT_EQ(ovf::find_rows(view_of(&scalar, OVF_DTYPE_FLOAT32, none, none)).extent, 0u);
  std::vector<float> long_vector(ovf::kMaxRowsScanned + 1, 1.0f);
  long_vector.back() = kNan;
  const std::vector<int64_t> sizes{ovf::kMaxRowsScanned + 1}, strides{1};
  EXPECT_EQ(ovf::find_rows(view_of(long_vector.data(), OVF_DTYPE_FLOAT32, sizes, strides)).extent,
            0u);
}

// A batch's records as a forward writes them: `modules` frames (class names),
// then an output line whose rows hold the NaN; returns that line, as written.
const ovf_record* batch_with_nan_rows(uint64_t batch, const std::vector<const char*>& modules,
                                      uint32_t extent, std::vector<uint32_t> rows,
                                      ovf_record_kind kind = OVF_KIND_OUTPUT) {
  std::vector<ovf_record> records;
  for (const char* cls : modules) {
    ovf_record frame{};
    frame.kind = OVF_KIND_FRAME;
    frame.frame_seq = OVF_NO_SEQ;
    frame.name_id = ovf::intern(std::string("layer.") + cls);
    frame.label_id = ovf::intern(cls);
    frame.batch = batch;
    ovf::append_records(&frame, 1);
  }
  ovf_record line{};
  line.kind = kind;
  line.frame_seq = OVF_NO_SEQ;
  line.batch = batch;
  line.label_id = ovf::intern("output");
  line.row_extent = extent;
  line.row_count = static_cast<uint32_t>(rows.size());
  for (size_t i = 0; i < rows.size() && i < OVF_ROWS_KEPT; ++i) line.rows[i] = rows[i];
  return ovf::find_record(ovf::append_records(&line, 1));
}

void publish_batch(uint64_t batch, const std::vector<int64_t>& indices) {
  ovf::record_batch_samples(1, "Squares", indices.data(), indices.size());
  ovf::claim_pending_samples(batch);
}

const std::vector<int64_t> kBatch{40, 43, 12, 7, 61, 37, 2, 19};

TEST(RowSamples, TheRowsOfTheBatchAreItsDatasetIndices) {
  ovf::clear_batch_samples();
  publish_batch(3, kBatch);
  const ovf_record* line = batch_with_nan_rows(3, {"Linear"}, 8, {5});
  EXPECT_EQ(ovf::describe_row_samples(*line),
            "ovf: the first non-finite value (batch 3) is in row 5 of 8 along its first "
            "dimension: dataset index 37 (Squares)\n");
  line = batch_with_nan_rows(3, {"Linear"}, 8, {1, 5});
  EXPECT_EQ(ovf::describe_row_samples(*line),
            "ovf: the first non-finite value (batch 3) is in rows 1, 5 of 8 along its first "
            "dimension: dataset indices 43, 37 (Squares)\n");
  ovf::clear_batch_samples();
}

TEST(RowSamples, ABatchNormBeforeMixedTheRowsSoNoSampleIsNamed) {
  ovf::clear_batch_samples();
  publish_batch(4, kBatch);
  const ovf_record* line = batch_with_nan_rows(4, {"Conv2d", "BatchNorm2d", "ReLU"}, 8, {5});
  EXPECT_EQ(ovf::describe_row_samples(*line),
            "ovf: the first non-finite value (batch 4) is in row 5 of 8 along its first "
            "dimension; BatchNorm2d (layer.BatchNorm2d) mixed the batch's rows before it, so "
            "which samples it came from is not told\n");
  const ovf::RowSamples s = ovf::row_samples(*line);
  EXPECT_TRUE(s.indices.empty());
  // A frozen batch norm keeps fixed statistics: rows stay apart.
  line = batch_with_nan_rows(5, {"FrozenBatchNorm2d"}, 8, {5});
  publish_batch(5, kBatch);
  EXPECT_EQ(ovf::row_samples(*line).indices, (std::vector<int64_t>{37}));
  ovf::clear_batch_samples();
}

TEST(RowSamples, EveryRowOrADimensionThatIsNotTheBatchNamesNoSample) {
  ovf::clear_batch_samples();
  publish_batch(6, kBatch);
  const ovf_record* line = batch_with_nan_rows(6, {"Linear"}, 8, {0, 1, 2, 3, 4, 5, 6, 7});
  EXPECT_EQ(ovf::describe_row_samples(*line),
            "ovf: the first non-finite value (batch 6) is in all 8 rows along its first "
            "dimension\n");
  line = batch_with_nan_rows(6, {"Linear"}, 12, {3});  // sequence-first: 12 positions
  EXPECT_EQ(ovf::describe_row_samples(*line),
            "ovf: the first non-finite value (batch 6) is in row 3 of 12 along its first "
            "dimension\n");
  ovf_record unmeasured{};
  EXPECT_EQ(ovf::describe_row_samples(unmeasured), "");
  ovf::clear_batch_samples();
}

TEST(RowSamples, AWeightsRowsAreNoSamplesEvenWhenAsManyAsTheBatch) {
  // FSDP2's rank that received the NaN: its first non-finite line is a weight [8, 4].
  ovf::clear_batch_samples();
  publish_batch(8, kBatch);
  const ovf_record* line = batch_with_nan_rows(8, {"Linear"}, 8, {5}, OVF_KIND_WEIGHT);
  EXPECT_EQ(ovf::describe_row_samples(*line),
            "ovf: the first non-finite value (batch 8) is in row 5 of 8 along its first "
            "dimension\n");
  EXPECT_TRUE(ovf::row_samples(*line).indices.empty());
  line = batch_with_nan_rows(8, {"Linear"}, 8, {0, 1, 2, 3, 4, 5, 6, 7});
  EXPECT_TRUE(ovf::row_samples(*line).indices.empty());  // every row: none singled out
  ovf::clear_batch_samples();
}

TEST(RowSamples, MoreRowsThanKeptNameTheFirstSamples) {
  ovf::clear_batch_samples();
  std::vector<int64_t> batch(16);
  for (size_t i = 0; i < batch.size(); ++i) batch[i] = static_cast<int64_t>(100 + i);
  publish_batch(7, batch);
  const ovf_record* line = batch_with_nan_rows(7, {"Linear"}, 16, {1, 2, 3, 4, 5, 6, 9, 11});
  EXPECT_EQ(ovf::describe_row_samples(*line),
            "ovf: the first non-finite value (batch 7) is in rows 1, 2, 3, 4, 5, 6 and 2 more "
            "of 16 along its first dimension: dataset indices 101, 102, 103, 104, 105, 106 "
            "(Squares, of the first 6)\n");
  ovf::clear_batch_samples();
}

TEST(SamplesLog, PublishedEntriesAreNumberedAndTheOldestReused) {
  ovf::clear_batch_samples();
  for (uint64_t b = 0; b < OVF_SAMPLES_ENTRIES + 2; ++b) publish_batch(b, {int64_t(b)});
  const auto* log = reinterpret_cast<const ovf_samples_log*>(ovf_state.samples_addr);
  ASSERT_NE(log, nullptr);
  EXPECT_EQ(log->magic, OVF_SAMPLES_MAGIC);
  EXPECT_EQ(log->entries_written, OVF_SAMPLES_ENTRIES + 2);
  const ovf_samples_entry& newest = log->entries[(OVF_SAMPLES_ENTRIES + 1) % OVF_SAMPLES_ENTRIES];
  EXPECT_EQ(newest.number, OVF_SAMPLES_ENTRIES + 2);
  EXPECT_EQ(newest.batch, OVF_SAMPLES_ENTRIES + 1);
  EXPECT_EQ(newest.indices[0], int64_t(OVF_SAMPLES_ENTRIES + 1));
  EXPECT_TRUE(ovf::samples_of_batch(1).empty());  // reused by batch 17
  ovf::clear_batch_samples();
  EXPECT_EQ(log->entries_written, 0u);
}

// A loop that fetches one batch ahead (Accelerate's) hands out the oldest: each
// forward gets the batch before the newest, a second forward of the same batch
// nothing, the last batch its own once the loader says it has none left. The
// same pattern from a loop not known to do so is not followed at all.
TEST(SamplesLog, AOneLateLoopsBatchesGoToTheForwardsThatRunThem) {
  ovf::clear_batch_samples();
  const int64_t b0[] = {10, 11}, b1[] = {20, 21}, b2[] = {30, 31};
  auto indices = [](uint64_t batch) {
    const auto entries = ovf::samples_of_batch(batch);
    return entries.empty() ? std::vector<int64_t>{} : entries.front().indices;
  };
  ovf::record_batch_samples(1, "Squares", b0, 2, true);
  ovf::record_batch_samples(1, "Squares", b1, 2, true);
  ovf::claim_pending_samples(0);
  ovf::claim_pending_samples(0);  // a second forward of batch 0 (a GAN's)
  ovf::record_batch_samples(1, "Squares", b2, 2, true);
  ovf::claim_pending_samples(1);
  ovf::release_late_samples(1);
  ovf::claim_pending_samples(2);
  EXPECT_EQ(indices(0), (std::vector<int64_t>{10, 11}));
  EXPECT_EQ(ovf::samples_of_batch(0).size(), 1u);
  EXPECT_EQ(indices(1), (std::vector<int64_t>{20, 21}));
  EXPECT_EQ(indices(2), (std::vector<int64_t>{30, 31}));

  // A loop that skipped a batch (no forward): the one before the newest is the
  // forward's, the skipped one nobody's.
  ovf::clear_batch_samples();
  ovf::record_batch_samples(3, "Squares", b0, 2, true);
  ovf::record_batch_samples(3, "Squares", b1, 2, true);
  ovf::record_batch_samples(3, "Squares", b2, 2, true);
  ovf::claim_pending_samples(0);
  EXPECT_EQ(indices(0), (std::vector<int64_t>{20, 21}));
  // A loop that broke early leaves the batch it fetched ahead: the loader's next
  // pass (forget_sample_loader at its reset) does not inherit it.
  ovf::forget_sample_loader(3);
  ovf::record_batch_samples(3, "Squares", b0, 2, true);
  ovf::record_batch_samples(3, "Squares", b1, 2, true);
  ovf::claim_pending_samples(1);
  EXPECT_EQ(indices(1), (std::vector<int64_t>{10, 11}));

  ovf::clear_batch_samples();
  ovf::record_batch_samples(2, "Squares", b0, 2);
  ovf::record_batch_samples(2, "Squares", b1, 2);
  ovf::claim_pending_samples(0);
  ovf::record_batch_samples(2, "Squares", b2, 2);
  ovf::claim_pending_samples(1);
  EXPECT_TRUE(ovf::samples_of_batch(0).empty());
  EXPECT_TRUE(ovf::samples_of_batch(1).empty());
  ovf::clear_batch_samples();
}

}  // namespace
