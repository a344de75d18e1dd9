// The CUDA statistics backend on a GPU: FrameStats (one fused launch per frame)
// against the CPU engine on the same bytes, every dtype, unaligned starts,
// strided, broadcast and flipped views, tensors of many blocks, frames reused.
// Every test skips, saying why, where no CUDA device can be used.
#include <cuda_runtime_api.h>
#include <gtest/gtest.h>

#include <memory>
#include <string>
#include <vector>

#include "cuda_test_data.h"
#include "frame_stats.h"

namespace {

using ovf::cuda::FrameStats;
using ovf_test::Fill;

// Device memory holding a copy of a host buffer, freed with the object.
class DeviceBuffer {
 public:
  explicit DeviceBuffer(const std::vector<unsigned char>& host) : bytes_(host.size()) {
    if (bytes_ == 0) return;
    EXPECT_EQ(cudaMalloc(&ptr_, bytes_), cudaSuccess);
    EXPECT_EQ(cudaMemcpy(ptr_, host.data(), bytes_, cudaMemcpyHostToDevice), cudaSuccess);
  }
  ~DeviceBuffer() {
    if (ptr_ != nullptr) cudaFree(ptr_);
  }
  DeviceBuffer(const DeviceBuffer&) = delete;
  DeviceBuffer& operator=(const DeviceBuffer&) = delete;
  unsigned char* get() const { return static_cast<unsigned char*>(ptr_); }

 private:
  void* ptr_ = nullptr;
  size_t bytes_;
};

// One tensor of a test frame: host bytes for the CPU engine, the same bytes on
// the device for FrameStats, and its layout.
struct GpuTensor {
  std::vector<unsigned char> host;
  std::unique_ptr<DeviceBuffer> device;
  std::vector<int64_t> sizes, strides, cpu_strides;
  size_t offset = 0, cpu_offset = 0;  // elements; the CPU view has positive strides
  ovf_dtype dtype = OVF_DTYPE_UNKNOWN;
  bool negated = false;
  std::string what;

  ovf::TensorView view(const unsigned char* base, size_t at, const std::vector<int64_t>& st) const {
    ovf::TensorView v;
    v.data = base == nullptr ? nullptr : base + at * ovf::cuda::element_size(dtype);
    v.dtype = dtype;
    v.ndim = static_cast<int>(sizes.size());
    v.sizes = sizes.data();
    v.strides = st.data();
    v.negated = negated;
    return v;
  }
  ovf::TensorView device_view() const { return view(device->get(), offset, strides); }
  ovf::TensorView cpu_view() const { return view(host.data(), cpu_offset, cpu_strides); }
};

class CudaStatsGpu : public ::testing::Test {
 protected:
  void SetUp() override {
    int count = 0;
    const cudaError_t err = cudaGetDeviceCount(&count);
    if (err != cudaSuccess) {
      GTEST_SKIP() << "no CUDA device: cudaGetDeviceCount failed (" << cudaGetErrorName(err) << ": "
                   << cudaGetErrorString(err) << "); the CUDA backend was not run";
    }
    if (count == 0) GTEST_SKIP() << "no CUDA device (cudaGetDeviceCount = 0): not run";
    ASSERT_EQ(cudaSetDevice(0), cudaSuccess);
    ASSERT_EQ(cudaStreamCreate(&stream_), cudaSuccess);
  }
  void TearDown() override {
    if (stream_ != nullptr) cudaStreamDestroy(stream_);
  }

  GpuTensor& add(ovf_dtype dtype, size_t elements, size_t offset, std::vector<int64_t> sizes,
                 std::vector<int64_t> strides, Fill fill, const std::string& what) {
    auto t = std::make_unique<GpuTensor>();
    t->host = ovf_test::make_elements(dtype, elements, seed_++, fill);
    t->device = std::make_unique<DeviceBuffer>(t->host);
    t->dtype = dtype;
    t->offset = t->cpu_offset = offset;
    t->sizes = std::move(sizes);
    t->strides = t->cpu_strides = std::move(strides);
    for (size_t d = 0; d < t->sizes.size(); ++d) {
      if (t->strides[d] < 0) {
        t->cpu_offset -= static_cast<size_t>((t->sizes[d] - 1) * -t->strides[d]);
        t->cpu_strides[d] = -t->strides[d];
      }
    }
    t->what = ovf_test::dtype_label(dtype) + " " + what;
    tensors_.push_back(std::move(t));
    return *tensors_.back();
  }

  // All tensors added so far in one frame: one launch, then each compared
  // (with_casts: the cast losses too).
  void run_frame_and_compare(bool with_casts = false) {
    FrameStats frame;
    frame.clear(with_casts);
    for (const auto& t : tensors_) ASSERT_GE(frame.add(t->device_view()), 0) << t->what;
    ASSERT_EQ(frame.enqueue(stream_), cudaSuccess);
    ASSERT_EQ(frame.wait(), cudaSuccess);
    for (size_t i = 0; i < tensors_.size(); ++i) {
      SCOPED_TRACE(tensors_[i]->what);
      ovf_test::expect_same_stats(frame.result(static_cast<int>(i)),
                                  ovf_test::cpu_stats(tensors_[i]->cpu_view(), with_casts));
    }
  }

  cudaStream_t stream_ = nullptr;
  std::vector<std::unique_ptr<GpuTensor>> tensors_;
  uint32_t seed_ = 1;
};

TEST_F(CudaStatsGpu, EveryDtypeContiguousAtUnalignedStarts) {
  for (Fill fill : {Fill::kRandomBits, Fill::kFinite, Fill::kZeros}) {
    for (ovf_dtype dtype : ovf_test::cuda_dtypes()) {
      for (int64_t n : {0, 1, 7, 1000, 70001, 1 << 18}) {
        for (size_t offset : {0, 1, 3}) {
          add(dtype, n + offset, offset, {n}, {1}, fill,
              "n=" + std::to_string(n) + " offset=" + std::to_string(offset) +
                  " fill=" + std::to_string(static_cast<int>(fill)));
        }
      }
    }
  }
  run_frame_and_compare();
}

TEST_F(CudaStatsGpu, EveryDtypeViews) {
  for (ovf_dtype dtype : ovf_test::cuda_dtypes()) {
    const std::pair<std::vector<int64_t>, std::vector<int64_t>> views[] = {
        {{7, 6, 5}, {1, 7, 42}},    // a permutation of a contiguous tensor
        {{5, 3, 7}, {42, 14, 1}},   // every other row
        {{5, 6, 4}, {42, 7, 2}},    // step-2 inner dimension
        {{3, 5, 7}, {0, 42, 1}},    // expanded leading dimension
        {{5, 1, 7}, {42, 999, 1}},  // size-1 dimension
        {{}, {}},                   // zero-dimensional
        {{5, 0, 7}, {42, 7, 1}},    // empty
    };
    for (const auto& [sizes, strides] : views) {
      add(dtype, 5 * 6 * 7, 0, sizes, strides, Fill::kRandomBits, "view");
    }
    add(dtype, 5 * 6 * 7, 34, {5, 7}, {-7, -1}, Fill::kRandomBits, "flipped");
    add(dtype, 2000 * 1000, 1, {2000, 499}, {1000, 2}, Fill::kRandomBits, "large strided");
    add(dtype, 1000 * 1000, 0, {1000, 64}, {1000, 1}, Fill::kFinite, "column slice");
    add(dtype, 4096, 0, {1 << 10, 4096}, {0, 1}, Fill::kRandomBits, "broadcast rows");
  }
  run_frame_and_compare();
}

// The cast losses in the same launch: contiguous runs at unaligned starts
// (the lane-pair pass, heads and tails), strided and broadcast views (one
// element at a time, counted per repeat), every dtype (none for the others).
TEST_F(CudaStatsGpu, CastCountsEveryDtype) {
  for (ovf_dtype dtype : ovf_test::cuda_dtypes()) {
    for (Fill fill : {Fill::kRandomBits, Fill::kFinite}) {
      for (size_t offset : {0, 3}) {
        add(dtype, 70001 + offset, offset, {70001}, {1}, fill, "offset " + std::to_string(offset));
      }
    }
    add(dtype, 2000 * 1000, 1, {2000, 499}, {1000, 2}, Fill::kRandomBits, "large strided");
    add(dtype, 4096, 0, {1 << 10, 4096}, {0, 1}, Fill::kRandomBits, "broadcast rows");
  }
  run_frame_and_compare(true);
}

TEST_F(CudaStatsGpu, NegatedViewsSwapInfinities) {
  for (ovf_dtype dtype : {OVF_DTYPE_FLOAT32, OVF_DTYPE_FLOAT16, OVF_DTYPE_FLOAT8_E5M2}) {
    add(dtype, 100000, 0, {100000}, {1}, Fill::kRandomBits, "negated").negated = true;
  }
  run_frame_and_compare();
}

// A tensor of the most blocks a tensor gets (kMaxBlocksPerTensor) and more
// elements per block than that: 2^28 float16 elements (512 MiB).
TEST_F(CudaStatsGpu, LargestTensorsUseManyBlocks) {
  add(OVF_DTYPE_FLOAT16, size_t{1} << 28, 5, {(int64_t{1} << 28) - 5}, {1}, Fill::kFinite, "2^28");
  run_frame_and_compare();
}

// Frames in flight at once, each its own FrameStats, polled with ready().
TEST_F(CudaStatsGpu, FramesInFlightArriveIndependently) {
  for (int i = 0; i < 6; ++i) {
    add(i % 2 ? OVF_DTYPE_BFLOAT16 : OVF_DTYPE_FLOAT32, 300000 + i, 0, {300000 + i}, {1},
        Fill::kRandomBits, "frame " + std::to_string(i));
  }
  std::vector<std::unique_ptr<FrameStats>> frames;
  for (const auto& t : tensors_) {
    frames.push_back(std::make_unique<FrameStats>());
    ASSERT_EQ(frames.back()->add(t->device_view()), 0);
    ASSERT_EQ(frames.back()->enqueue(stream_), cudaSuccess);
  }
  for (size_t i = 0; i < frames.size(); ++i) {
    while (!frames[i]->ready()) {
    }
    ASSERT_EQ(frames[i]->error(), cudaSuccess);
    SCOPED_TRACE(tensors_[i]->what);
    ovf_test::expect_same_stats(frames[i]->result(0), ovf_test::cpu_stats(tensors_[i]->cpu_view()));
  }
  // Reused for a second, larger frame: the buffers grow.
  FrameStats& again = *frames[0];
  again.clear();
  for (const auto& t : tensors_) ASSERT_GE(again.add(t->device_view()), 0);
  ASSERT_EQ(again.enqueue(stream_), cudaSuccess);
  ASSERT_EQ(again.wait(), cudaSuccess);
  for (size_t i = 0; i < tensors_.size(); ++i) {
    ovf_test::expect_same_stats(again.result(static_cast<int>(i)),
                                ovf_test::cpu_stats(tensors_[i]->cpu_view()));
  }
}

TEST_F(CudaStatsGpu, EmptyFrame) {
  FrameStats frame;
  ASSERT_EQ(frame.enqueue(stream_), cudaSuccess);
  ASSERT_EQ(frame.wait(), cudaSuccess);
  EXPECT_EQ(frame.size(), 0);
}

}  // namespace
