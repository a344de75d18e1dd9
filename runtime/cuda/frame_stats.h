// The CUDA statistics backend's entry point: one frame's CUDA tensors in one
// fused launch, results copied back asynchronously. No torch header: the
// caller (the torch glue) passes raw device pointers as ovf::TensorView, the
// stream to run on, and sets the tensors' device current.
//
//   FrameStats& f = pool.next();   // one per frame in flight
//   f.clear();
//   int i = f.add(view);           // -1: leave this tensor to another backend
//   f.enqueue(stream);             // table up, two kernels, results down, an event
//   ... later: f.ready() (no wait) or f.wait() (blocks), then f.result(i)
#ifndef OVF_CUDA_FRAME_STATS_H
#define OVF_CUDA_FRAME_STATS_H

#include <cuda_runtime_api.h>

#include <cstddef>

#include "frame_plan.h"
#include "stats.h"

namespace ovf::cuda {

// Where a FrameStats gets its device buffer. The default is the CUDA runtime's
// cudaMalloc / cudaFree; the torch glue hands in torch's caching allocator, so
// that the buffer counts in torch.cuda.memory_allocated(), is served from
// torch's cache, and a growth frees without cudaFree's device-wide sync.
struct DeviceMemory {
  void* (*allocate)(size_t bytes, cudaStream_t stream);  // nullptr when out of memory
  void (*release)(void* pointer);
  static DeviceMemory cuda_runtime();
};

class FrameStats {
 public:
  explicit FrameStats(DeviceMemory memory = DeviceMemory::cuda_runtime()) : memory_(memory) {}
  ~FrameStats();
  FrameStats(const FrameStats&) = delete;
  FrameStats& operator=(const FrameStats&) = delete;

  // Starts a new frame. Call it once the previous one's results have arrived
  // (ready() said so): its buffers are in use until then, and clear() waits
  // for them rather than hand them to the next frame early.
  void clear(bool with_casts = false);
  // See FramePlan::add: the tensor's index in this frame, or -1.
  int add(const TensorView& view) { return plan_.add(view); }
  int size() const { return static_cast<int>(plan_.tensors()); }

  // Enqueues the frame on `stream` (on the current device, which must stay
  // the same for this object's lifetime): the table's upload, the kernels,
  // the results' download into pinned memory, then an event. Nothing waits.
  // Buffers grow on first use and when a frame needs more (doubling, so
  // rarely): the pinned host buffer with cudaHostAlloc, the device buffer from
  // `memory` (see DeviceMemory) on `stream`.
  cudaError_t enqueue(cudaStream_t stream);
  // Whether the results have arrived; a device error is reported as arrived
  // with error() set (results then have has_stats = false).
  bool ready();
  // Blocks the host until they have.
  cudaError_t wait();
  cudaError_t error() const { return error_; }
  // Tensor `index`'s statistics, once ready() or wait() said they arrived.
  Stats result(int index) const;

 private:
  cudaError_t reserve(size_t table_bytes, size_t partial_count, cudaStream_t stream);
  template <typename P>
  cudaError_t launch(char* host, char* device, size_t table_bytes, cudaStream_t stream);
  size_t partial_bytes() const;
  void release();

  FramePlan plan_;
  DeviceMemory memory_;
  int device_ = -1;
  // Host: pinned [table | results]; device: [table | block partials | results].
  void* host_ = nullptr;
  void* device_buffer_ = nullptr;
  size_t host_bytes_ = 0, device_bytes_ = 0;
  cudaEvent_t done_ = nullptr;
  const void* results_ = nullptr;  // Partials or CastPartials in host_, valid after arrival
  bool in_flight_ = false;
  bool arrived_ = false;
  cudaError_t error_ = cudaSuccess;
};

}  // namespace ovf::cuda

#endif  // OVF_CUDA_FRAME_STATS_H
