// What the AVX-512 units (avx512.cpp, avx512_vnni.cpp) share: the 16-float vector. Include it only
// in a unit compiled with -mavx512f.
#pragma once

#include <immintrin.h>

#include "trainer/kernels/cpu/tiles.h"

namespace tandem::kernels {
namespace {

struct Float16 {
  using V = __m512;
  static constexpr int64_t kWidth = 16;
  static V load(const float* p) { return _mm512_loadu_ps(p); }
  static void store(float* p, V v) { _mm512_storeu_ps(p, v); }
  static V broadcast(const float* p) { return _mm512_set1_ps(*p); }
  static V set1(float f) { return _mm512_set1_ps(f); }
  static V mul(V a, V b) { return _mm512_mul_ps(a, b); }
  static V fmadd(V a, V b, V c) { return _mm512_fmadd_ps(a, b, c); }
};

}  // namespace
}  // namespace tandem::kernels
