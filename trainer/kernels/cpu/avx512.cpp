// The fp32 packed product with AVX-512 F (compiled with -mavx512f -mavx2 -mfma; run only where
// cpu_path says the CPU has it): the AVX2 tile's 6 rows over panels twice as wide, 32 columns in
// two 16-float registers, so that each broadcast input feeds twice the products.
#include "trainer/kernels/cpu/avx512_common.h"

namespace tandem::kernels {

namespace avx512 {
extern const PanelKernels kFp32{32, 0, 127, &fp32_product<Float16, 6>, nullptr};
}  // namespace avx512

}  // namespace tandem::kernels
