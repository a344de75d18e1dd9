/* The bandwidth floor for bench/stats_throughput.py: read every byte of a buffer once,
 * as fast as the CPU can, and do nothing else (an xor reduction the compiler cannot drop).
 * Loaded with ctypes and called on tensor.data_ptr(); one thread.
 * target_clones picks the widest vectors the CPU has, like the stats engine's dispatch. */
#include <stddef.h>
#include <stdint.h>
#include <string.h>

typedef uint64_t ovf_v8u64 __attribute__((vector_size(64)));

__attribute__((target_clones("avx512f", "avx2", "default"))) uint64_t ovf_read_floor(
    const void* data, size_t nbytes) {
  const unsigned char* p = (const unsigned char*)data;
  ovf_v8u64 a0 = {0}, a1 = {0}, a2 = {0}, a3 = {0};
  size_t i = 0;
  for (; i + 256 <= nbytes; i += 256) {
    ovf_v8u64 x0, x1, x2, x3;
    memcpy(&x0, p + i, 64);
    memcpy(&x1, p + i + 64, 64);
    memcpy(&x2, p + i + 128, 64);
    memcpy(&x3, p + i + 192, 64);
    a0 ^= x0;
    a1 ^= x1;
    a2 ^= x2;
    a3 ^= x3;
  }
  a0 ^= a1 ^ a2 ^ a3;
  uint64_t r = 0;
  for (int k = 0; k < 8; ++k) r ^= a0[k];
  for (; i < nbytes; ++i) r ^= p[i];
  return r;
}
