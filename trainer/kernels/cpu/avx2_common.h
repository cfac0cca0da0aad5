// What the AVX2 units (avx2.cpp, avx_vnni.cpp) share: the 8-float and 8-int vectors and the
// quantizing of an input row. Include it only in a unit compiled with -mavx2 -mfma.
#pragma once

#include <immintrin.h>

#include "trainer/kernels/cpu/tiles.h"

namespace tandem::kernels {
namespace {

struct Float8 {
  using V = __m256;
  static constexpr int64_t kWidth = 8;
  static V load(const float* p) { return _mm256_loadu_ps(p); }
  static void store(float* p, V v) { _mm256_storeu_ps(p, v); }
  static V broadcast(const float* p) { return _mm256_broadcast_ss(p); }
  static V set1(float f) { return _mm256_set1_ps(f); }
  static V mul(V a, V b) { return _mm256_mul_ps(a, b); }
  static V fmadd(V a, V b, V c) { return _mm256_fmadd_ps(a, b, c); }
};

// What the int8 tiles ask of eight 32-bit lanes, but the products (each unit's own dot).
struct Int32x8 {
  using V = __m256i;
  using F = Float8;
  static constexpr int64_t kWidth = 8;
  static V zero() { return _mm256_setzero_si256(); }
  static V load(const void* p) { return _mm256_loadu_si256(static_cast<const __m256i*>(p)); }
  static void store(void* p, V v) { _mm256_storeu_si256(static_cast<__m256i*>(p), v); }
  static V sub(V a, V b) { return _mm256_sub_epi32(a, b); }
  static __m256 to_float(V v) { return _mm256_cvtepi32_ps(v); }
};

// x [n] → [padded] bytes, each q + Zero with q in [-Levels, Levels], 32 at a time: four 8-lane
// conversions packed to 16 and then 8 bits, whose lane-wise packing the last permutation puts
// back in order.
template <int Levels, int Zero>
float quantize_row(const float* x, int64_t n, int64_t padded, uint8_t* out) {
  const __m256 magnitude = _mm256_castsi256_ps(_mm256_set1_epi32(0x7FFFFFFF));
  __m256 top8 = _mm256_setzero_ps();
  int64_t k = 0;
  for (; k + 8 <= n; k += 8) {
    top8 = _mm256_max_ps(top8, _mm256_and_ps(_mm256_loadu_ps(x + k), magnitude));
  }
  alignas(32) float lanes[8];
  _mm256_store_ps(lanes, top8);
  const float top = row_max(x, k, n, row_max(lanes, 0, 8, 0.0F));
  const float inv = top > 0 ? static_cast<float>(Levels) / top : 1.0F;
  const __m256 vinv = _mm256_set1_ps(inv);
  const __m256i order = _mm256_setr_epi32(0, 4, 1, 5, 2, 6, 3, 7);
  const __m256i zero = _mm256_set1_epi8(static_cast<char>(Zero));
  auto ints = [&](int64_t at) {
    return _mm256_cvtps_epi32(_mm256_mul_ps(_mm256_loadu_ps(x + at), vinv));
  };
  for (k = 0; k + 32 <= n; k += 32) {
    const __m256i lo = _mm256_packs_epi32(ints(k), ints(k + 8));
    const __m256i hi = _mm256_packs_epi32(ints(k + 16), ints(k + 24));
    const __m256i bytes = _mm256_permutevar8x32_epi32(_mm256_packs_epi16(lo, hi), order);
    _mm256_storeu_si256(reinterpret_cast<__m256i*>(out + k), _mm256_add_epi8(bytes, zero));
  }
  for (; k < n; ++k) out[k] = quantize_one(x[k], inv, Zero);
  for (; k < padded; ++k) out[k] = static_cast<uint8_t>(Zero);
  return top > 0 ? top / static_cast<float>(Levels) : 1.0F;
}

}  // namespace
}  // namespace tandem::kernels
