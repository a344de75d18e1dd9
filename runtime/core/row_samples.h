// Which samples a non-finite line's rows were (issue: "which input did it"):
// the rows of the first non-finite line (row_scan.h) read as rows of the batch
// when its first dimension is as long as the batch the DataLoader gave
// (sample_log.h), and no module or op before it in the batch mixed the rows (a
// batch norm in training: a value of one row then depends on every row).
#ifndef OVF_ROW_SAMPLES_H
#define OVF_ROW_SAMPLES_H

#include <cstdint>
#include <string>
#include <vector>

#include "ovf/ring.h"

namespace ovf {

struct RowSamples {
  std::vector<uint32_t> rows;    // the rows kept in the record (at most OVF_ROWS_KEPT)
  uint32_t count = 0;            // rows holding a NaN/Inf in all
  uint32_t extent = 0;           // the first dimension's size; 0: rows not measured
  std::string mixed_by;          // "BatchNorm2d (layer1.0.bn1)": mixed the rows before; "" none
  std::string dataset;           // the batch's dataset, where the rows are its samples
  std::vector<int64_t> indices;  // the dataset indices of `rows` (those kept), same order
};

// What `first`'s rows say; extent 0 where they were not measured. Samples are
// named only for a value computed from the batch (a module's input or output, a
// forward op's output, a checkpoint, a module output's gradient), never a
// weight's or a buffer's rows, and not where every row holds a NaN/Inf.
RowSamples row_samples(const ovf_record& first);

// "ovf: the first non-finite value (batch 4) is in row 5 of 8 along its first
// dimension: dataset index 37 (Squares)\n", or "" where the rows were not measured.
std::string describe_row_samples(const ovf_record& first);

// The same words for rows already read (`batch`: the record's).
std::string describe_row_samples(const RowSamples& rows, uint64_t batch);

}  // namespace ovf

#endif  // OVF_ROW_SAMPLES_H
