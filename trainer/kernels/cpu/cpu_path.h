// Which of Tandem's CPU kernel paths run here: the highest this CPU executes, or a lower one named
// by the environment variable TANDEM_CPU_KERNELS (so that tests and benchmarks run every path on
// one machine).
#pragma once

#include <string>

namespace tandem::kernels {

// The paths, lowest first. Each is an upper bound: fp32 takes the highest of generic (BLAS),
// avx2 and avx512 at or below it, int8 the highest of generic (LibTorch's quantized kernels),
// avx2, avx_vnni and avx512_vnni, among those the CPU has.
enum class CpuPath { kGeneric, kAvx2, kAvxVnni, kAvx512, kAvx512Vnni };

// The variable's name, and its values in the order of CpuPath.
inline constexpr const char* kCpuKernelsVariable = "TANDEM_CPU_KERNELS";
const char* cpu_path_name(CpuPath path);

// Whether this CPU executes `path`'s instructions: avx2 is AVX2 and FMA; avx_vnni adds the 256-bit
// AVX-VNNI; avx512 adds AVX-512 F; avx512_vnni adds AVX-512 F, BW, VL and VNNI instead.
bool cpu_executes(CpuPath path);

// The highest path this CPU executes.
CpuPath cpu_best_path();

// The path the kernels run: cpu_best_path(), or TANDEM_CPU_KERNELS when it is set. Read once;
// std::invalid_argument naming the variable, its value and what this CPU runs when the value is
// not a path's name or names one this CPU cannot execute (the tools turn it into exit 2).
CpuPath cpu_path();

// The same check of a value, for the tools to run before anything else.
CpuPath parse_cpu_path(const std::string& value);

// The path each kind of product takes under `cap`: fp32 the highest of generic, avx2 and avx512,
// int8 the highest of generic, avx2, avx_vnni and avx512_vnni, that is at most `cap` and that this
// CPU executes.
CpuPath fp32_path(CpuPath cap = cpu_path());
CpuPath int8_path(CpuPath cap = cpu_path());

}  // namespace tandem::kernels
