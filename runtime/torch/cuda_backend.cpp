#include "cuda_backend.h"

#include <array>
#include <cstdio>
#include <cstdlib>
#include <mutex>
#include <vector>

#include "ring_writer.h"

#ifdef OVF_HAVE_CUDA_GLUE
#include <c10/cuda/CUDACachingAllocator.h>
#include <c10/cuda/CUDAGuard.h>
#include <c10/cuda/CUDAStream.h>

#include "frame_stats.h"
#include "torch_tensor.h"
#endif

namespace ovf {
namespace {

enum class Verdict { kUnchecked, kAgreed, kRejected };
constexpr int kMaxDevices = 64;
std::mutex g_verdict_mutex;
std::array<Verdict, kMaxDevices> g_verdicts{};  // kUnchecked

bool known_device(int index) { return index >= 0 && index < kMaxDevices; }

Verdict verdict(int index) {
  if (!known_device(index)) return Verdict::kRejected;
  std::lock_guard<std::mutex> lock(g_verdict_mutex);
  return g_verdicts[index];
}

#ifdef OVF_HAVE_CUDA_GLUE
// FrameStats' device buffers come from torch's caching allocator (their pinned
// host buffers, a table and a result per tensor, stay cudaHostAlloc's).
void* torch_allocate(size_t bytes, cudaStream_t stream) {
  try {
    return c10::cuda::CUDACachingAllocator::raw_alloc_with_stream(bytes, stream);
  } catch (const c10::Error&) {
    return nullptr;  // out of memory: the frame's lines read "no data"
  }
}

void torch_release(void* pointer) {
  try {
    c10::cuda::CUDACachingAllocator::raw_delete(pointer);
  } catch (const c10::Error&) {
    // Called from ~FrameStats: a pointer torch no longer knows leaks rather than terminates.
  }
}

// FrameStats keep pinned and device buffers: reused, one per frame in flight
// (so the pool holds as many as frames were ever in flight at once).
class FrameStatsPool {
 public:
  std::unique_ptr<cuda::FrameStats> take(int device) {
    std::lock_guard<std::mutex> lock(mutex_);
    auto& free = free_[device];
    if (free.empty()) {
      return std::make_unique<cuda::FrameStats>(
          cuda::DeviceMemory{&torch_allocate, &torch_release});
    }
    auto stats = std::move(free.back());
    free.pop_back();
    return stats;
  }
  void give_back(int device, std::unique_ptr<cuda::FrameStats> stats) {
    std::lock_guard<std::mutex> lock(mutex_);
    free_[device].push_back(std::move(stats));
  }

 private:
  std::mutex mutex_;
  std::array<std::vector<std::unique_ptr<cuda::FrameStats>>, kMaxDevices> free_;
};

FrameStatsPool& pool() {
  static auto* p = new FrameStatsPool();  // never destroyed: batches may end during exit
  return *p;
}

class CudaGroup : public DeviceGroupBackend {
 public:
  CudaGroup(int device, bool with_casts) : device_(device), stats_(pool().take(device)) {
    stats_->clear(with_casts);
  }
  ~CudaGroup() override {
    if (submitted_) stats_->wait();  // its buffers go back to the pool only when idle
    pool().give_back(device_, std::move(stats_));
  }

  bool add(const at::Tensor& t, ovf_dtype dtype) override {
    if (dtype == OVF_DTYPE_COMPLEX64 || dtype == OVF_DTYPE_COMPLEX128) return false;
    TensorView view;
    if (!device_view(t, &view)) return false;
    return stats_->add(view) >= 0;
  }
  void submit() override {
    c10::cuda::CUDAGuard guard(static_cast<c10::DeviceIndex>(device_));
    const cudaStream_t stream = c10::cuda::getCurrentCUDAStream(device_).stream();
    // OVF_TEST_CUDA_FAIL: a test makes the launch fail as on a GPU the kernels
    // were not built for (tests/python/test_gpu.py).
    static const bool fail = std::getenv("OVF_TEST_CUDA_FAIL") != nullptr;
    enqueue_error_ = fail ? cudaErrorNoKernelImageForDevice : stats_->enqueue(stream);
    submitted_ = enqueue_error_ == cudaSuccess;
  }
  bool ready() override { return !submitted_ || stats_->ready(); }
  void wait() override {
    if (submitted_) stats_->wait();
  }
  Stats result(int index) override {
    if (!submitted_) return Stats{};  // has_stats false: "no data"
    Stats s = stats_->result(index);
    // OVF_TEST_CUDA_DISAGREE: a test makes the backend wrong on purpose, so
    // that the first-use self-check must reject it (tests/python/test_gpu.py).
    static const bool disagree = std::getenv("OVF_TEST_CUDA_DISAGREE") != nullptr;
    if (disagree) s.zero_count += 1;
    return s;
  }
  std::string failure() override {
    const cudaError_t err = submitted_ ? stats_->error() : enqueue_error_;
    if (err == cudaSuccess) return "";
    std::string what = cudaGetErrorString(err);
    if (err == cudaErrorNoKernelImageForDevice || err == cudaErrorInvalidDeviceFunction) {
      what +=
          ": ovf's kernels were not built for this GPU (rebuild with CMAKE_CUDA_ARCHITECTURES "
          "naming it, or \"native\")";
    } else if (err == cudaErrorInsufficientDriver || err == cudaErrorUnsupportedPtxVersion) {
      what += ": the driver is older than the CUDA runtime ovf was built with";
    }
    return what;
  }

 private:
  int device_;
  std::unique_ptr<cuda::FrameStats> stats_;
  bool submitted_ = false;
  cudaError_t enqueue_error_ = cudaSuccess;
};
#endif

}  // namespace

bool cuda_backend_built() {
#ifdef OVF_HAVE_CUDA_GLUE
  return true;
#else
  return false;
#endif
}

void note_cuda_backend() {
#ifdef OVF_HAVE_CUDA_GLUE
  // device_count() answers 0 without a driver or a GPU; it never throws.
  const uint32_t bits =
      OVF_BACKEND_CUDA_BUILT | (c10::cuda::device_count() == 0 ? OVF_BACKEND_NO_CUDA_DEVICE : 0u);
  __atomic_or_fetch(&ovf_state.device_backends, bits, __ATOMIC_RELAXED);
#endif
}

std::unique_ptr<DeviceGroupBackend> make_cuda_group(int index, bool with_casts) {
#ifdef OVF_HAVE_CUDA_GLUE
  if (verdict(index) == Verdict::kRejected) return nullptr;
  __atomic_or_fetch(&ovf_state.device_backends, uint32_t{OVF_BACKEND_CUDA}, __ATOMIC_RELAXED);
  return std::make_unique<CudaGroup>(index, with_casts);
#else
  (void)index;
  (void)with_casts;
  return nullptr;
#endif
}

bool cuda_needs_check(int index) { return verdict(index) == Verdict::kUnchecked; }

bool cuda_stream_capturing(int index) {
#ifdef OVF_HAVE_CUDA_GLUE
  cudaStreamCaptureStatus status = cudaStreamCaptureStatusNone;
  const cudaStream_t stream = c10::cuda::getCurrentCUDAStream(index).stream();
  if (cudaStreamIsCapturing(stream, &status) != cudaSuccess) {
    (void)cudaGetLastError();  // not the user's error to find later
    return false;
  }
  return status != cudaStreamCaptureStatusNone;
#else
  (void)index;
  return false;
#endif
}

void cuda_record_check(int index, bool agreed, const std::string& failure) {
  if (!known_device(index)) return;
  {
    std::lock_guard<std::mutex> lock(g_verdict_mutex);
    if (g_verdicts[index] != Verdict::kUnchecked) return;
    g_verdicts[index] = agreed ? Verdict::kAgreed : Verdict::kRejected;
  }
  if (agreed) return;
  __atomic_or_fetch(&ovf_state.device_backends, uint32_t{OVF_BACKEND_CUDA_REJECTED},
                    __ATOMIC_RELAXED);
  if (failure.empty()) {
    std::fprintf(stderr,
                 "ovf: warning: the CUDA statistics backend disagreed with the portable one on "
                 "cuda:%d's first frame; ovf uses the portable backend there from now on\n",
                 index);
  } else {
    std::fprintf(stderr,
                 "ovf: warning: the CUDA statistics backend failed on cuda:%d's first frame (%s); "
                 "ovf uses the portable backend there from now on\n",
                 index, failure.c_str());
  }
}

}  // namespace ovf
