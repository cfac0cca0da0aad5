// The int8 packed product with AVX-VNNI, the 256-bit vpdpbusd (compiled with -mavx2 -mfma
// -mavxvnni; run only where cpu_path says the CPU has it): inputs offset by 128 to unsigned bytes
// times signed weights, four products summed into each 32-bit lane exactly; the offset's share
// (128 x each column's weight sum) is subtracted at the end.
#include "trainer/kernels/cpu/avx2_common.h"

namespace tandem::kernels {
namespace {

struct OffsetInt8x32 : Int32x8 {
  static void dot(const uint8_t* x, V w0, V w1, V& c0, V& c1) {
    const V v = _mm256_set1_epi32(four_bytes(x));
    c0 = _mm256_dpbusd_avx_epi32(c0, v, w0);
    c1 = _mm256_dpbusd_avx_epi32(c1, v, w1);
  }
};

}  // namespace

namespace avx_vnni {
extern const PanelKernels kInt8{16, 128, 127, &int8_product<OffsetInt8x32, 6>,
                                &quantize_row<127, 128>};
}  // namespace avx_vnni

}  // namespace tandem::kernels
