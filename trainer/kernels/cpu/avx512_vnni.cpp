// The int8 packed product with AVX-512 VNNI (compiled with -mavx512f -mavx512bw -mavx512vl
// -mavx512vnni -mavx2 -mfma; run only where cpu_path says the CPU has them): inputs offset by
// 128 to unsigned bytes times signed weights by vpdpbusd, four products summed into each 32-bit
// lane exactly, 6 rows x 32 columns per tile; the offset's share (128 x each column's weight sum)
// is subtracted at the end.
#include "trainer/kernels/cpu/avx512_common.h"

namespace tandem::kernels {
namespace {

// The maskz forms of the intrinsics, all lanes on: GCC 12 warns that the plain ones' undefined
// pass-through operand is uninitialized.
constexpr __mmask16 kAll = 0xFFFF;

struct OffsetInt8x64 {
  using V = __m512i;
  using F = Float16;
  static constexpr int64_t kWidth = 16;
  static V zero() { return _mm512_setzero_si512(); }
  static V load(const void* p) { return _mm512_loadu_si512(p); }
  static void store(void* p, V v) { _mm512_storeu_si512(p, v); }
  static V sub(V a, V b) { return _mm512_sub_epi32(a, b); }
  static __m512 to_float(V v) { return _mm512_maskz_cvtepi32_ps(kAll, v); }
  static void dot(const uint8_t* x, V w0, V w1, V& c0, V& c1) {
    const V v = _mm512_set1_epi32(four_bytes(x));
    c0 = _mm512_dpbusd_epi32(c0, v, w0);
    c1 = _mm512_dpbusd_epi32(c1, v, w1);
  }
};

// Row x [n] → u8 [padded] offset by 128 (the rest 128, i.e. zeros), 16 at a time, and its scale.
float quantize_row(const float* x, int64_t n, int64_t padded, uint8_t* out) {
  __m512 top16 = _mm512_setzero_ps();
  int64_t k = 0;
  for (; k + 16 <= n; k += 16) {
    top16 = _mm512_maskz_max_ps(kAll, top16, _mm512_abs_ps(_mm512_loadu_ps(x + k)));
  }
  alignas(64) float lanes[16];
  _mm512_store_ps(lanes, top16);
  const float top = row_max(x, k, n, row_max(lanes, 0, 16, 0.0F));
  const float inv = top > 0 ? 127.0F / top : 1.0F;
  const __m512 vinv = _mm512_set1_ps(inv);
  const __m512i zero = _mm512_set1_epi32(128);
  for (k = 0; k + 16 <= n; k += 16) {
    const __m512i q = _mm512_maskz_cvtps_epi32(kAll, _mm512_mul_ps(_mm512_loadu_ps(x + k), vinv));
    _mm_storeu_si128(reinterpret_cast<__m128i*>(out + k),
                     _mm512_maskz_cvtepi32_epi8(kAll, _mm512_add_epi32(q, zero)));
  }
  for (; k < n; ++k) out[k] = quantize_one(x[k], inv, 128);
  for (; k < padded; ++k) out[k] = 128;
  return top > 0 ? top / 127.0F : 1.0F;
}

}  // namespace

namespace avx512_vnni {
extern const PanelKernels kInt8{32, 128, 127, &int8_product<OffsetInt8x64, 6>, &quantize_row};
}  // namespace avx512_vnni

}  // namespace tandem::kernels
