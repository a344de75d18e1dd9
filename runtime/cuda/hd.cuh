// Lets one header serve nvcc and the host compiler: the statistics functors are
// compiled into the kernels and, unchanged, into the host tests that check them
// against the CPU engine.
#ifndef OVF_CUDA_HD_CUH
#define OVF_CUDA_HD_CUH

#ifdef __CUDACC__
#define OVF_HD __host__ __device__
#else
#define OVF_HD
#endif

// Loop unrolling, said in device code only (nvcc's host pass hands the pragma to g++,
// which does not know it).
#ifdef __CUDA_ARCH__
#define OVF_UNROLL _Pragma("unroll")
#define OVF_NO_UNROLL _Pragma("unroll 1")
#else
#define OVF_UNROLL
#define OVF_NO_UNROLL
#endif

#endif  // OVF_CUDA_HD_CUH
