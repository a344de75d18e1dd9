// A thread's unit of contiguous reading: 16 bytes of elements as one load
// brings them, and the 16-bit-lane operations the narrow types are reduced
// with. __host__ __device__ like the rest (see stats_functors.cuh).
#ifndef OVF_CUDA_VECTOR_CUH
#define OVF_CUDA_VECTOR_CUH

#include <cstdint>
#include <cstring>

#include "hd.cuh"
#include "stats_functors.cuh"

namespace ovf::cuda {

// Four 32-bit words. Elements are cut out of the words where they are used
// rather than unpacked into an array first, which would hold one register per
// element (64 for fp8).
constexpr int kVectorBytes = 16;
struct alignas(kVectorBytes) Vector {
  uint32_t w[kVectorBytes / 4];
};

template <typename Bits>
constexpr int kPerVector = kVectorBytes / static_cast<int>(sizeof(Bits));

OVF_HD inline Vector load_vector(const void* p) {
#ifdef __CUDA_ARCH__
  // Through uint4 (a copy of the struct itself compiles to four 32-bit loads)
  // and the read-only path: the kernel never writes what it reads.
  const uint4 q = __ldg(static_cast<const uint4*>(p));
  return Vector{{q.x, q.y, q.z, q.w}};
#else
  Vector v;
  std::memcpy(&v, p, sizeof v);
  return v;
#endif
}

// Element i of a vector (little-endian, as every CUDA host and device is).
template <typename Bits>
OVF_HD Bits element(const Vector& v, int i) {
  if constexpr (sizeof(Bits) == 8) {
    return static_cast<Bits>(v.w[2 * i]) | (static_cast<Bits>(v.w[2 * i + 1]) << 32);
  } else {
    constexpr int kPerWord = 4 / static_cast<int>(sizeof(Bits));
    constexpr uint32_t kMask = sizeof(Bits) == 4 ? ~0u : (1u << (8 * sizeof(Bits))) - 1;
    const int shift = 8 * static_cast<int>(sizeof(Bits)) * (i % kPerWord);
    return static_cast<Bits>((v.w[i / kPerWord] >> shift) & kMask);
  }
}

// Lane-wise max and min of two 16-bit lanes: one instruction on sm_90
// (max.u16x2), a few on older GPUs; the host's version is the definition.
OVF_HD inline uint32_t max_u16x2(uint32_t a, uint32_t b) {
#ifdef __CUDA_ARCH__
  return __vmaxu2(a, b);
#else
  return greater(a & 0xffff0000u, b & 0xffff0000u) | greater(a & 0xffffu, b & 0xffffu);
#endif
}

OVF_HD inline uint32_t min_u16x2(uint32_t a, uint32_t b) {
#ifdef __CUDA_ARCH__
  return __vminu2(a, b);
#else
  return lesser(a & 0xffff0000u, b & 0xffff0000u) | lesser(a & 0xffffu, b & 0xffffu);
#endif
}

}  // namespace ovf::cuda

#endif  // OVF_CUDA_VECTOR_CUH
