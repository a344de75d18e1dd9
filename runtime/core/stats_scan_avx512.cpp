// The cast counts' loops for AVX-512 (F and BW): stats_count.inc over 512-bit
// lanes. A limit costs a compare into a mask register and a masked add for 16
// float32 or 32 float16 / bfloat16 elements, where AVX2 spends a compare and a
// subtract for 8 or 16; 32 vector registers hold eight fused limits' counters.
// On an Intel Xeon (Sapphire Rapids, one thread) bench/stats_throughput.py
// measures these against the AVX2 loops side by side. Compiled with -mavx512f
// -mavx512bw (CMakeLists.txt); stats_cpu.cpp installs them where the CPU
// reports both and runs them at full width.
//
// GCC 12's AVX-512 headers make their undefined vectors by self-assignment
// (`__m512i __Y = __Y;`), which -Wall reports at every inlined intrinsic.
#pragma GCC diagnostic ignored "-Wuninitialized"
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#include <immintrin.h>

#include "stats_scan.inc"

namespace ovf::detail {
namespace {

template <typename U>
struct Lanes;

// What every width shares: the 512-bit vector and its moves.
struct Vectors512 {
  using Vec = __m512i;
  static Vec load(const void* p) { return _mm512_loadu_si512(p); }
  static Vec zeros() { return _mm512_setzero_si512(); }
  static Vec all_ones() { return _mm512_set1_epi32(-1); }
  static Vec and_(Vec a, Vec b) { return _mm512_and_si512(a, b); }
};

// The element-wise operations on BITS-wide abs bits, compares into MASK.
#define OVF_LANE_OPS_512(BITS, MASK)                                                              \
  struct LaneOps##BITS : Vectors512 {                                                             \
    using Mask = MASK;                                                                            \
    static constexpr int kWidth = 512 / BITS;                                                     \
    static Vec splat(uint64_t v) { return _mm512_set1_epi##BITS(static_cast<int##BITS##_t>(v)); } \
    static Vec max(Vec a, Vec b) { return _mm512_max_epi##BITS(a, b); }                           \
    static Vec min_unsigned(Vec a, Vec b) { return _mm512_min_epu##BITS(a, b); }                  \
    static Vec less_one(Vec a) { return _mm512_sub_epi##BITS(a, _mm512_set1_epi##BITS(1)); }      \
    static Mask below(Vec a, Vec limit) { return _mm512_cmplt_epi##BITS##_mask(a, limit); }       \
    static Mask zero(Vec a) { return _mm512_testn_epi##BITS##_mask(a, a); }                       \
    static Vec add_one(Vec count, Mask m) {                                                       \
      return _mm512_mask_add_epi##BITS(count, m, count, _mm512_set1_epi##BITS(1));                \
    }                                                                                             \
  };
OVF_LANE_OPS_512(32, __mmask16)
OVF_LANE_OPS_512(16, __mmask32)
#undef OVF_LANE_OPS_512

// The reductions, once a span.
template <>
struct Lanes<uint32_t> : LaneOps32 {
  static uint64_t sum(Vec count) { return static_cast<uint32_t>(_mm512_reduce_add_epi32(count)); }
  static uint64_t max_of(Vec v) { return static_cast<uint32_t>(_mm512_reduce_max_epi32(v)); }
  static uint32_t min_unsigned_of(Vec v) { return _mm512_reduce_min_epu32(v); }
};

// 16-bit lanes: pairs of counts summed into 32-bit lanes; the abs bits widened to
// 32 bits half a vector at a time.
template <>
struct Lanes<uint16_t> : LaneOps16 {
  static uint64_t sum(Vec count) {
    return static_cast<uint32_t>(
        _mm512_reduce_add_epi32(_mm512_madd_epi16(count, _mm512_set1_epi16(1))));
  }
  static uint64_t max_of(Vec v) {
    return static_cast<uint32_t>(_mm512_reduce_max_epi32(_mm512_max_epi32(low(v), high(v))));
  }
  static uint16_t min_unsigned_of(Vec v) {
    return static_cast<uint16_t>(_mm512_reduce_min_epu32(_mm512_min_epu32(low(v), high(v))));
  }
  static Vec low(Vec v) { return _mm512_cvtepu16_epi32(_mm512_castsi512_si256(v)); }
  static Vec high(Vec v) { return _mm512_cvtepu16_epi32(_mm512_extracti64x4_epi64(v, 1)); }
};

}  // namespace
}  // namespace ovf::detail

#include "stats_count.inc"

namespace ovf::detail {

void count_with_avx512(ScanTable& table) { install_counting_loops(table); }

}  // namespace ovf::detail
