// Element-type facts shared by every statistics engine.
#include "stats.h"

#include <cmath>
#include <cstring>
#include <limits>

namespace ovf {
namespace {
constexpr double kInf = std::numeric_limits<double>::infinity();
}  // namespace

double half_bits_to_double(uint16_t b) {
  const int exponent = (b >> 10) & 0x1f;
  const int mantissa = b & 0x3ff;
  double magnitude;
  if (exponent == 0) {
    magnitude = std::ldexp(static_cast<double>(mantissa), -24);
  } else if (exponent == 0x1f) {
    magnitude = mantissa ? std::numeric_limits<double>::quiet_NaN() : kInf;
  } else {
    magnitude = std::ldexp(static_cast<double>(mantissa + 1024), exponent - 25);
  }
  return (b & 0x8000) ? -magnitude : magnitude;
}

double bfloat16_bits_to_double(uint16_t b) {
  const uint32_t widened = static_cast<uint32_t>(b) << 16;
  float f;
  std::memcpy(&f, &widened, sizeof f);
  return f;
}

// fp8 e4m3fn: no infinities, NaN is S.1111.111, max 448.
double float8_e4m3_to_double(uint8_t b) {
  const int exponent = (b >> 3) & 0xf;
  const int mantissa = b & 0x7;
  double magnitude;
  if ((b & 0x7f) == 0x7f) {
    magnitude = std::numeric_limits<double>::quiet_NaN();
  } else if (exponent == 0) {
    magnitude = std::ldexp(static_cast<double>(mantissa), -9);
  } else {
    magnitude = std::ldexp(static_cast<double>(mantissa + 8), exponent - 10);
  }
  return (b & 0x80) ? -magnitude : magnitude;
}

// fp8 e5m2: IEEE-like, the top byte of a float16.
double float8_e5m2_to_double(uint8_t b) {
  return half_bits_to_double(static_cast<uint16_t>(b) << 8);
}

int dtype_size(ovf_dtype dtype) {
  switch (dtype) {
    case OVF_DTYPE_FLOAT64:
    case OVF_DTYPE_INT64:
    case OVF_DTYPE_UINT64:
    case OVF_DTYPE_COMPLEX64: return 8;
    case OVF_DTYPE_COMPLEX128: return 16;
    case OVF_DTYPE_FLOAT32:
    case OVF_DTYPE_INT32:
    case OVF_DTYPE_UINT32: return 4;
    case OVF_DTYPE_FLOAT16:
    case OVF_DTYPE_BFLOAT16:
    case OVF_DTYPE_INT16:
    case OVF_DTYPE_UINT16: return 2;
    case OVF_DTYPE_INT8:
    case OVF_DTYPE_UINT8:
    case OVF_DTYPE_BOOL:
    case OVF_DTYPE_FLOAT8_E4M3:
    case OVF_DTYPE_FLOAT8_E5M2: return 1;
    default: return 0;
  }
}

const char* dtype_name(ovf_dtype dtype) {
  switch (dtype) {
    case OVF_DTYPE_FLOAT64: return "float64";
    case OVF_DTYPE_FLOAT32: return "float32";
    case OVF_DTYPE_FLOAT16: return "float16";
    case OVF_DTYPE_BFLOAT16: return "bfloat16";
    case OVF_DTYPE_COMPLEX64: return "complex64";
    case OVF_DTYPE_COMPLEX128: return "complex128";
    case OVF_DTYPE_INT64: return "int64";
    case OVF_DTYPE_INT32: return "int32";
    case OVF_DTYPE_INT16: return "int16";
    case OVF_DTYPE_INT8: return "int8";
    case OVF_DTYPE_UINT8: return "uint8";
    case OVF_DTYPE_BOOL: return "bool";
    case OVF_DTYPE_FLOAT8_E4M3: return "float8_e4m3fn";
    case OVF_DTYPE_FLOAT8_E5M2: return "float8_e5m2";
    case OVF_DTYPE_UINT16: return "uint16";
    case OVF_DTYPE_UINT32: return "uint32";
    case OVF_DTYPE_UINT64: return "uint64";
    default: return "unknown";
  }
}

double element_to_double(const void* element, ovf_dtype dtype) {
  const char* p = static_cast<const char*>(element);
  uint16_t b16;
  switch (dtype) {
    case OVF_DTYPE_FLOAT64: {
      double d;
      std::memcpy(&d, p, 8);
      return d;
    }
    case OVF_DTYPE_FLOAT32: {
      float f;
      std::memcpy(&f, p, 4);
      return f;
    }
    case OVF_DTYPE_FLOAT16: std::memcpy(&b16, p, 2); return half_bits_to_double(b16);
    case OVF_DTYPE_BFLOAT16: std::memcpy(&b16, p, 2); return bfloat16_bits_to_double(b16);
    case OVF_DTYPE_FLOAT8_E4M3: return float8_e4m3_to_double(static_cast<uint8_t>(*p));
    case OVF_DTYPE_FLOAT8_E5M2: return float8_e5m2_to_double(static_cast<uint8_t>(*p));
    case OVF_DTYPE_INT64: {
      int64_t x;
      std::memcpy(&x, p, 8);
      return static_cast<double>(x);
    }
    case OVF_DTYPE_INT32: {
      int32_t x;
      std::memcpy(&x, p, 4);
      return x;
    }
    case OVF_DTYPE_INT16: {
      int16_t x;
      std::memcpy(&x, p, 2);
      return x;
    }
    case OVF_DTYPE_INT8: return static_cast<int8_t>(*p);
    case OVF_DTYPE_UINT8: return static_cast<uint8_t>(*p);
    case OVF_DTYPE_UINT16: {
      uint16_t x;
      std::memcpy(&x, p, 2);
      return x;
    }
    case OVF_DTYPE_UINT32: {
      uint32_t x;
      std::memcpy(&x, p, 4);
      return x;
    }
    case OVF_DTYPE_UINT64: {
      uint64_t x;
      std::memcpy(&x, p, 8);
      return static_cast<double>(x);
    }
    case OVF_DTYPE_BOOL: return *p ? 1.0 : 0.0;
    default: return std::numeric_limits<double>::quiet_NaN();
  }
}

bool is_floating(ovf_dtype dtype) {
  switch (dtype) {
    case OVF_DTYPE_FLOAT64:
    case OVF_DTYPE_FLOAT32:
    case OVF_DTYPE_FLOAT16:
    case OVF_DTYPE_BFLOAT16:
    case OVF_DTYPE_COMPLEX64:
    case OVF_DTYPE_COMPLEX128:
    case OVF_DTYPE_FLOAT8_E4M3:
    case OVF_DTYPE_FLOAT8_E5M2: return true;
    default: return false;
  }
}

double dtype_max(ovf_dtype dtype) {
  switch (dtype) {
    case OVF_DTYPE_FLOAT64: return std::numeric_limits<double>::max();
    case OVF_DTYPE_FLOAT32: return std::numeric_limits<float>::max();
    case OVF_DTYPE_FLOAT16: return 65504.0;
    case OVF_DTYPE_BFLOAT16: return std::ldexp(255.0, 120);  // 0x7f7f: 3.3895e38
    case OVF_DTYPE_FLOAT8_E4M3: return 448.0;
    case OVF_DTYPE_FLOAT8_E5M2: return 57344.0;
    default: return 0;
  }
}

double dtype_min_normal(ovf_dtype dtype) {
  switch (dtype) {
    case OVF_DTYPE_FLOAT64: return std::numeric_limits<double>::min();
    case OVF_DTYPE_FLOAT32:
    case OVF_DTYPE_BFLOAT16: return std::numeric_limits<float>::min();
    case OVF_DTYPE_FLOAT16:
    case OVF_DTYPE_FLOAT8_E5M2: return std::ldexp(1.0, -14);
    case OVF_DTYPE_FLOAT8_E4M3: return std::ldexp(1.0, -6);
    default: return 0;
  }
}

uint64_t finite_end_bits(ovf_dtype dtype) {
  switch (dtype) {
    case OVF_DTYPE_FLOAT64: return 0x7ff0000000000000ull;
    case OVF_DTYPE_FLOAT32: return 0x7f800000u;
    case OVF_DTYPE_FLOAT16: return 0x7c00u;
    case OVF_DTYPE_BFLOAT16: return 0x7f80u;
    case OVF_DTYPE_FLOAT8_E4M3: return 0x7fu;
    case OVF_DTYPE_FLOAT8_E5M2: return 0x7cu;
    default: return 0;
  }
}

uint64_t first_abs_bits(double t, bool strictly_above, ovf_dtype dtype) {
  uint64_t lo = 0, hi = finite_end_bits(dtype);
  while (lo < hi) {
    const uint64_t mid = lo + (hi - lo) / 2;
    const double value = float_bits_to_double(mid, dtype);
    if (strictly_above ? value > t : value >= t) {
      hi = mid;
    } else {
      lo = mid + 1;
    }
  }
  return lo;
}

double float_bits_to_double(uint64_t bits, ovf_dtype dtype) {
  switch (dtype) {
    case OVF_DTYPE_FLOAT64: {
      double d;
      std::memcpy(&d, &bits, sizeof d);
      return d;
    }
    case OVF_DTYPE_FLOAT32: {
      const uint32_t b = static_cast<uint32_t>(bits);
      float f;
      std::memcpy(&f, &b, sizeof f);
      return f;
    }
    case OVF_DTYPE_FLOAT16: return half_bits_to_double(static_cast<uint16_t>(bits));
    case OVF_DTYPE_BFLOAT16: return bfloat16_bits_to_double(static_cast<uint16_t>(bits));
    case OVF_DTYPE_FLOAT8_E4M3: return float8_e4m3_to_double(static_cast<uint8_t>(bits));
    case OVF_DTYPE_FLOAT8_E5M2: return float8_e5m2_to_double(static_cast<uint8_t>(bits));
    default: return 0;
  }
}

}  // namespace ovf
