// Buffers, copies and the completion event around the fused launch (see
// frame_stats.h). Host code over the CUDA runtime API; the kernels are in
// stats_kernels.cu.
#include "frame_stats.h"

#include <algorithm>
#include <cstring>

#include "stats_kernels.h"

namespace ovf::cuda {
namespace {

// Partials sit after the table, aligned for their 8-byte fields (the table's
// size is a multiple of its 8-byte alignment already; this keeps it explicit).
size_t aligned(size_t bytes) {
  return (bytes + alignof(Partial) - 1) / alignof(Partial) * alignof(Partial);
}

// A failed CUDA call also leaves the thread's last error set (an allocation's
// out-of-memory, say), and torch's next launch check in the user's code would
// raise it as its own: every failure of ovf's is taken back here.
cudaError_t forget(cudaError_t err) {
  if (err != cudaSuccess) (void)cudaGetLastError();
  return err;
}

void* runtime_allocate(size_t bytes, cudaStream_t /*stream*/) {
  void* pointer = nullptr;
  return forget(cudaMalloc(&pointer, bytes)) == cudaSuccess ? pointer : nullptr;
}

void runtime_release(void* pointer) { (void)forget(cudaFree(pointer)); }

}  // namespace

DeviceMemory DeviceMemory::cuda_runtime() { return {&runtime_allocate, &runtime_release}; }

FrameStats::~FrameStats() {
  if (in_flight_) cudaEventSynchronize(done_);  // the copies still write into our buffers
  release();
  if (done_ != nullptr) cudaEventDestroy(done_);
}

void FrameStats::release() {
  if (host_ != nullptr) cudaFreeHost(host_);
  if (device_buffer_ != nullptr) memory_.release(device_buffer_);
  host_ = device_buffer_ = nullptr;
  host_bytes_ = device_bytes_ = 0;
}

void FrameStats::clear(bool with_casts) {
  if (in_flight_) wait();  // never hand buffers a copy may still write to to the next frame
  plan_.clear(with_casts);
  in_flight_ = false;
  arrived_ = false;
  results_ = nullptr;
  error_ = cudaSuccess;
}

size_t FrameStats::partial_bytes() const {
  return plan_.with_casts() ? sizeof(CastPartial) : sizeof(Partial);
}

cudaError_t FrameStats::reserve(size_t table_bytes, size_t partial_count, cudaStream_t stream) {
  const size_t host_need = aligned(table_bytes) + plan_.tensors() * partial_bytes();
  const size_t device_need = aligned(table_bytes) + partial_count * partial_bytes();
  if (host_need > host_bytes_) {
    const size_t bytes = std::max(host_need, 2 * host_bytes_);
    if (host_ != nullptr) cudaFreeHost(host_);
    host_ = nullptr;
    host_bytes_ = 0;
    cudaError_t err = cudaHostAlloc(&host_, bytes, cudaHostAllocDefault);
    if (err != cudaSuccess) {
      host_ = nullptr;
      return err;
    }
    host_bytes_ = bytes;
  }
  if (device_need > device_bytes_) {
    // Nothing in flight uses the old buffer: enqueue() and clear() waited.
    if (device_buffer_ != nullptr) memory_.release(device_buffer_);
    const size_t bytes = std::max(device_need, 2 * device_bytes_);
    device_bytes_ = 0;
    device_buffer_ = memory_.allocate(bytes, stream);
    if (device_buffer_ == nullptr) return cudaErrorMemoryAllocation;
    device_bytes_ = bytes;
  }
  return cudaSuccess;
}

cudaError_t FrameStats::enqueue(cudaStream_t stream) {
  if (in_flight_) wait();  // enqueued twice without clear(): the buffers may move
  int device = 0;
  cudaError_t err = cudaGetDevice(&device);
  if (err != cudaSuccess) return error_ = forget(err);
  if (device_ >= 0 && device != device_) return error_ = cudaErrorInvalidDevice;
  device_ = device;
  if (done_ == nullptr) {
    err = cudaEventCreateWithFlags(&done_, cudaEventDisableTiming);
    if (err != cudaSuccess) {
      done_ = nullptr;
      return error_ = forget(err);
    }
  }
  const uint32_t tensors = plan_.tensors();
  const size_t table_bytes = tensors * sizeof(TensorEntry);
  const size_t partials = static_cast<size_t>(plan_.total_blocks()) + tensors;
  err = reserve(table_bytes, partials, stream);
  if (err != cudaSuccess) return error_ = forget(err);

  // The table goes through pinned memory so that the upload is asynchronous
  // and add() may refill the plan's own vector for the next frame meanwhile.
  char* host = static_cast<char*>(host_);
  std::memcpy(host, plan_.table().data(), table_bytes);
  bool uploading = false;  // the stream may read `host` from here on
  if (tensors > 0) {
    char* dev = static_cast<char*>(device_buffer_);
    err = cudaMemcpyAsync(dev, host, table_bytes, cudaMemcpyHostToDevice, stream);
    uploading = err == cudaSuccess;
    if (err == cudaSuccess) {
      err = plan_.with_casts() ? launch<CastPartial>(host, dev, table_bytes, stream)
                               : launch<Partial>(host, dev, table_bytes, stream);
    }
  }
  if (err == cudaSuccess) err = cudaEventRecord(done_, stream);
  if (err != cudaSuccess) {
    error_ = forget(err);
    // A launch failed after the table's upload was enqueued: the copy may still
    // read the pinned buffer, so this object stays in flight until the stream
    // has passed it (clear() and wait() wait for that before the buffers are
    // reused), and its results read "no data" (error_).
    if (uploading) {
      if (forget(cudaEventRecord(done_, stream)) == cudaSuccess) {
        in_flight_ = true;
      } else {
        (void)forget(cudaStreamSynchronize(stream));
      }
    }
    return error_;
  }
  results_ = host + aligned(table_bytes);
  in_flight_ = true;
  arrived_ = false;
  return cudaSuccess;
}

// The kernels over the uploaded table, then the results' download: [table |
// block partials | results] on the device, [table | results] in `host`.
template <typename P>
cudaError_t FrameStats::launch(char* host, char* device, size_t table_bytes, cudaStream_t stream) {
  const uint32_t tensors = plan_.tensors();
  auto* dev_blocks = reinterpret_cast<P*>(device + aligned(table_bytes));
  P* dev_results = dev_blocks + plan_.total_blocks();
  const cudaError_t err = launch_frame_stats(reinterpret_cast<const TensorEntry*>(device), tensors,
                                             plan_.total_blocks(), dev_blocks, dev_results, stream);
  if (err != cudaSuccess) return err;
  return cudaMemcpyAsync(host + aligned(table_bytes), dev_results, tensors * sizeof(P),
                         cudaMemcpyDeviceToHost, stream);
}

bool FrameStats::ready() {
  if (!in_flight_) return arrived_;
  const cudaError_t err = forget(cudaEventQuery(done_));  // not ready: no error, but set
  if (err == cudaErrorNotReady) return false;
  if (err != cudaSuccess) error_ = err;
  in_flight_ = false;
  arrived_ = true;
  return true;
}

cudaError_t FrameStats::wait() {
  if (in_flight_) {
    const cudaError_t err = forget(cudaEventSynchronize(done_));
    if (err != cudaSuccess) error_ = err;
    in_flight_ = false;
    arrived_ = true;
  }
  return error_;
}

Stats FrameStats::result(int index) const {
  if (!arrived_ || error_ != cudaSuccess || results_ == nullptr || index < 0 || index >= size()) {
    return Stats{};
  }
  if (plan_.with_casts())
    return plan_.finish(index, static_cast<const CastPartial*>(results_)[index]);
  return plan_.finish(index, static_cast<const Partial*>(results_)[index]);
}

}  // namespace ovf::cuda
