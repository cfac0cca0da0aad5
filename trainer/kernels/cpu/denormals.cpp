#include "trainer/kernels/cpu/denormals.h"

#if defined(__x86_64__) || defined(_M_X64) || defined(__i386__)
#include <xmmintrin.h>
#define TANDEM_MXCSR 1
#endif

namespace tandem::kernels {
namespace {

#ifdef TANDEM_MXCSR
constexpr unsigned int kFlushToZero = 0x8000;      // FTZ: denormal results become 0
constexpr unsigned int kDenormalsAreZero = 0x0040;  // DAZ: denormal inputs read as 0
#endif

}  // namespace

FlushedDenormals::FlushedDenormals() {
#ifdef TANDEM_MXCSR
  saved_ = _mm_getcsr();
  _mm_setcsr(saved_ | kFlushToZero | kDenormalsAreZero);
#endif
}

FlushedDenormals::~FlushedDenormals() {
#ifdef TANDEM_MXCSR
  _mm_setcsr(saved_);
#endif
}

}  // namespace tandem::kernels
