// GB/s of the CUDA statistics kernels against a device-to-device copy of the
// same bytes (bench/cuda_stats_bandwidth.py runs it and keeps the results).
//
// For each dtype and size, one contiguous tensor of finite values (the lean
// pass every real tensor takes; a NaN costs one vector's second look):
//   kernel  launch_frame_stats() alone, table already on the device: both
//           kernels, as one frame of one tensor costs on the GPU;
//   copy    cudaMemcpyAsync device to device of the same bytes, whose traffic
//           is twice theirs (read + write): copy GB/s = 2 x bytes / time, the
//           bandwidth the memory system delivers to a plain stream.
// ratio = kernel GB/s / copy GB/s; the target is >= 0.85 from 64 MiB up.
//   +casts  the same launch counting what casts to the narrow types would
//           lose (cast_tally.cuh), and its time as a multiple of the kernel's.
// Then a frame of 64 tensors of 1 MiB through FrameStats (upload, kernels,
// download, event, host wait), the per-frame cost the monitor pays, and a
// strided view (a column slice), for information.
//
//   ovf_cuda_stats_bench [--quick]
// Prints "no GPU: not run" and exits 0 where no CUDA device can be used.
#include <cuda_runtime.h>  // the typed cudaMalloc overloads

#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include "frame_plan.h"
#include "frame_stats.h"
#include "stats_kernels.h"

namespace {

constexpr double kTarget = 0.85;
constexpr size_t kTargetFromBytes = size_t{64} << 20;

#define CHECK(call)                                                      \
  do {                                                                   \
    const cudaError_t err_ = (call);                                     \
    if (err_ != cudaSuccess) {                                           \
      std::fprintf(stderr, "%s:%d: %s: %s\n", __FILE__, __LINE__, #call, \
                   cudaGetErrorString(err_));                            \
      std::exit(2);                                                      \
    }                                                                    \
  } while (0)

struct Timer {
  cudaEvent_t start, stop;
  Timer() {
    CHECK(cudaEventCreate(&start));
    CHECK(cudaEventCreate(&stop));
  }
  ~Timer() {
    cudaEventDestroy(start);
    cudaEventDestroy(stop);
  }
  // Median seconds per call of fn over `rounds` rounds of `inner` calls.
  template <typename Fn>
  double seconds_per_call(cudaStream_t stream, int rounds, int inner, Fn&& fn) {
    fn();  // warm-up
    CHECK(cudaStreamSynchronize(stream));
    std::vector<double> times;
    for (int r = 0; r < rounds; ++r) {
      CHECK(cudaEventRecord(start, stream));
      for (int i = 0; i < inner; ++i) fn();
      CHECK(cudaEventRecord(stop, stream));
      CHECK(cudaEventSynchronize(stop));
      float ms = 0;
      CHECK(cudaEventElapsedTime(&ms, start, stop));
      times.push_back(ms / 1e3 / inner);
    }
    std::sort(times.begin(), times.end());
    return times[times.size() / 2];
  }
};

// One planned frame with its table and partials on the device, ready to launch
// (with_casts: its kernels count cast losses too, into CastPartials).
struct DeviceFrame {
  ovf::cuda::FramePlan plan;
  ovf::cuda::TensorEntry* table = nullptr;
  void* partials = nullptr;

  explicit DeviceFrame(bool with_casts = false) { plan.clear(with_casts); }
  void upload() {
    CHECK(cudaMalloc(&table, plan.table().size() * sizeof(ovf::cuda::TensorEntry)));
    CHECK(cudaMemcpy(table, plan.table().data(),
                     plan.table().size() * sizeof(ovf::cuda::TensorEntry), cudaMemcpyHostToDevice));
    const size_t each =
        plan.with_casts() ? sizeof(ovf::cuda::CastPartial) : sizeof(ovf::cuda::Partial);
    CHECK(cudaMalloc(&partials, (plan.total_blocks() + plan.tensors()) * each));
  }
  void launch(cudaStream_t stream) const {
    const auto run = [&](auto* p) {  // block partials, then the results
      CHECK(ovf::cuda::launch_frame_stats(table, plan.tensors(), plan.total_blocks(), p,
                                          p + plan.total_blocks(), stream));
    };
    if (plan.with_casts()) {
      run(static_cast<ovf::cuda::CastPartial*>(partials));
    } else {
      run(static_cast<ovf::cuda::Partial*>(partials));
    }
  }
  ~DeviceFrame() {
    cudaFree(table);
    cudaFree(partials);
  }
};

double gbps(double bytes, double seconds) { return bytes / seconds / 1e9; }

std::string size_label(size_t bytes) {
  char buf[32];
  if (bytes >= (size_t{1} << 30)) {
    std::snprintf(buf, sizeof buf, "%zu GiB", bytes >> 30);
  } else {
    std::snprintf(buf, sizeof buf, "%zu MiB", bytes >> 20);
  }
  return buf;
}

}  // namespace

int main(int argc, char** argv) {
  const bool quick = argc > 1 && std::strcmp(argv[1], "--quick") == 0;
  int count = 0;
  const cudaError_t err = cudaGetDeviceCount(&count);
  if (err != cudaSuccess || count == 0) {
    std::printf("no GPU: not run (%s)\n",
                err != cudaSuccess ? cudaGetErrorString(err) : "no CUDA device");
    return 0;
  }
  CHECK(cudaSetDevice(0));
  cudaDeviceProp prop;
  CHECK(cudaGetDeviceProperties(&prop, 0));
  int runtime = 0, driver = 0;
  cudaRuntimeGetVersion(&runtime);
  cudaDriverGetVersion(&driver);
  std::printf("device: %s (sm_%d%d, %d SMs, %.1f GiB), CUDA runtime %d, driver %d\n", prop.name,
              prop.major, prop.minor, prop.multiProcessorCount,
              prop.totalGlobalMem / double(1 << 30), runtime, driver);
  std::printf("target: kernel >= %.2f x copy GB/s from %s up%s\n\n", kTarget,
              size_label(kTargetFromBytes).c_str(), quick ? " (--quick: not judged)" : "");

  cudaStream_t stream;
  CHECK(cudaStreamCreate(&stream));
  Timer timer;
  const int rounds = quick ? 3 : 11;
  std::vector<size_t> sizes = {size_t{4} << 20, size_t{64} << 20, size_t{1} << 30};
  if (quick) sizes.resize(2);
  const size_t largest = sizes.back();
  const size_t free_needed = 2 * largest + (size_t{256} << 20);
  size_t free_bytes = 0, total_bytes = 0;
  CHECK(cudaMemGetInfo(&free_bytes, &total_bytes));
  if (free_bytes < free_needed) {
    std::printf("only %.1f GiB free: sizes above %s skipped\n", free_bytes / double(1 << 30),
                size_label(sizes[sizes.size() - 2]).c_str());
    sizes.pop_back();
  }
  unsigned char *src = nullptr, *dst = nullptr;
  CHECK(cudaMalloc(&src, sizes.back()));
  CHECK(cudaMalloc(&dst, sizes.back()));
  // 0x3c in every byte: a finite normal value in every floating dtype here
  // (float16 0x3c3c = 1.06, bfloat16 0.0115, e4m3 1.5, float32 0.0115).
  CHECK(cudaMemset(src, 0x3c, sizes.back()));

  const std::pair<ovf_dtype, const char*> dtypes[] = {{OVF_DTYPE_FLOAT32, "float32"},
                                                      {OVF_DTYPE_FLOAT16, "float16"},
                                                      {OVF_DTYPE_BFLOAT16, "bfloat16"},
                                                      {OVF_DTYPE_FLOAT8_E4M3, "float8_e4m3fn"},
                                                      {OVF_DTYPE_FLOAT64, "float64"}};
  std::printf("%-14s %8s %12s %12s %7s %9s %12s %8s\n", "dtype", "size", "kernel GB/s", "copy GB/s",
              "ratio", "kernel us", "+casts GB/s", "x plain");
  std::vector<std::string> missed;
  for (size_t bytes : sizes) {
    const double copy_s = timer.seconds_per_call(stream, rounds, 5, [&] {
      CHECK(cudaMemcpyAsync(dst, src, bytes, cudaMemcpyDeviceToDevice, stream));
    });
    const double copy_gbps = gbps(2.0 * bytes, copy_s);
    for (const auto& [dtype, name] : dtypes) {
      const int64_t n = static_cast<int64_t>(bytes / ovf::cuda::element_size(dtype)), one = 1;
      ovf::TensorView v;
      v.data = src;
      v.dtype = dtype;
      v.ndim = 1;
      v.sizes = &n;
      v.strides = &one;
      // The same tensor with the cast losses counted too (ovf watch --cast,
      // --cast-shares): its time beside the plain kernel's.
      double seconds[2];
      for (bool with_casts : {false, true}) {
        DeviceFrame frame(with_casts);
        if (frame.plan.add(v) < 0) return 2;
        frame.upload();
        seconds[with_casts] =
            timer.seconds_per_call(stream, rounds, 5, [&] { frame.launch(stream); });
      }
      const double kernel_s = seconds[0];
      const double ratio = gbps(bytes, kernel_s) / copy_gbps;
      std::printf("%-14s %8s %12.1f %12.1f %7.2f %9.1f %12.1f %8.2f\n", name,
                  size_label(bytes).c_str(), gbps(bytes, kernel_s), copy_gbps, ratio,
                  kernel_s * 1e6, gbps(bytes, seconds[1]), seconds[1] / kernel_s);
      if (bytes >= kTargetFromBytes && ratio < kTarget) {
        char line[160];
        std::snprintf(line, sizeof line, "%s %s: kernel %.2f x copy (target %.2f)", name,
                      size_label(bytes).c_str(), ratio, kTarget);
        missed.push_back(line);
      }
    }
  }

  // A frame as the monitor sends one: 64 float16 tensors of 1 MiB, through
  // FrameStats with a host wait, as exact mode does once per frame.
  {
    const int tensors = 64;
    const int64_t n = (int64_t{1} << 20) / 2, one = 1;
    ovf::cuda::FrameStats frame;
    const double frame_s = timer.seconds_per_call(stream, rounds, 3, [&] {
      frame.clear();
      for (int i = 0; i < tensors; ++i) {
        ovf::TensorView v;
        v.data = src + static_cast<size_t>(i) * (size_t{1} << 20) % sizes.back();
        v.dtype = OVF_DTYPE_FLOAT16;
        v.ndim = 1;
        v.sizes = &n;
        v.strides = &one;
        frame.add(v);
      }
      CHECK(frame.enqueue(stream));
      CHECK(frame.wait());
    });
    std::printf(
        "\nframe of %d x 1 MiB float16 through FrameStats (enqueue + wait): %.1f us, "
        "%.1f GB/s\n",
        tensors, frame_s * 1e6, gbps(double(tensors) * (1 << 20), frame_s));
  }
  // A column slice: 64 of every 1024 float16 columns, rows of 2 KiB (strided path).
  {
    const int64_t sizes2[] = {static_cast<int64_t>(sizes.back() / 2048), 64};
    const int64_t strides2[] = {1024, 1};
    ovf::TensorView v;
    v.data = src;
    v.dtype = OVF_DTYPE_FLOAT16;
    v.ndim = 2;
    v.sizes = sizes2;
    v.strides = strides2;
    DeviceFrame frame;
    if (frame.plan.add(v) < 0) return 2;
    frame.upload();
    const double s = timer.seconds_per_call(stream, rounds, 5, [&] { frame.launch(stream); });
    const double read = double(sizes2[0]) * sizes2[1] * 2;
    std::printf("column slice (%lld x 64 of 1024 float16): %.1f GB/s of elements read, %.1f us\n",
                static_cast<long long>(sizes2[0]), gbps(read, s), s * 1e6);
  }
  cudaFree(src);
  cudaFree(dst);
  cudaStreamDestroy(stream);
  for (const auto& line : missed) std::printf("TARGET MISSED: %s\n", line.c_str());
  if (quick && !missed.empty()) {
    std::printf("(--quick: a smoke test; targets are judged on full runs only)\n");
    return 0;
  }
  return missed.empty() ? 0 : 1;
}
