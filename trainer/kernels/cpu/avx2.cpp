// The packed products with AVX2 and FMA (compiled with -mavx2 -mfma; run only where cpu_path
// says the CPU has them). fp32: 6 rows x 16 columns of FMAs. int8: unsigned input bytes times
// signed weight bytes through vpmaddubsw, which sums each pair of products into 16 bits, and
// vpmaddwd, which sums the pairs into 32. With 8-bit inputs a pair could reach 2 x 255 x 127 and
// saturate 16 bits; so the inputs take 7 bits here, [-63, 63] offset by 64 to [1, 127], and a pair
// is at most 2 x 127 x 127 = 32258: every sum is exact. The weights keep their 8 bits (the
// per-row scheme CTranslate2 exports). Moving each input's sign onto the weight instead (vpsignb,
// vpabsb) keeps 8 input bits but ran at half the speed on the development machine.
#include "trainer/kernels/cpu/avx2_common.h"

namespace tandem::kernels {
namespace {

struct OffsetInt7x32 : Int32x8 {
  static V quad_sums(V inputs, V weights) {
    return _mm256_madd_epi16(_mm256_maddubs_epi16(inputs, weights), _mm256_set1_epi16(1));
  }
  static void dot(const uint8_t* x, V w0, V w1, V& c0, V& c1) {
    const V v = _mm256_set1_epi32(four_bytes(x));
    c0 = _mm256_add_epi32(c0, quad_sums(v, w0));
    c1 = _mm256_add_epi32(c1, quad_sums(v, w1));
  }
};

}  // namespace

namespace avx2 {
extern const PanelKernels kFp32{16, 0, 127, &fp32_product<Float8, 6>, nullptr};
// int8 tiles of 4 rows: with 5 or 6, GCC 12 kept accumulators on the stack (AVX2 has 16 registers).
extern const PanelKernels kInt8{16, 64, 63, &int8_product<OffsetInt7x32, 4>, &quantize_row<63, 64>};
}  // namespace avx2

}  // namespace tandem::kernels
