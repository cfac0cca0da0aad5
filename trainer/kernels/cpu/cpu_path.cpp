#include "trainer/kernels/cpu/cpu_path.h"

#if defined(__x86_64__)
#include <cpuid.h>
#endif

#include <cstdlib>
#include <initializer_list>
#include <stdexcept>

namespace tandem::kernels {
namespace {

constexpr CpuPath kPaths[] = {CpuPath::kGeneric, CpuPath::kAvx2, CpuPath::kAvxVnni,
                              CpuPath::kAvx512, CpuPath::kAvx512Vnni};

bool has_avx_vnni() {
#if defined(__x86_64__) && defined(__GNUC__)
  // CPUID leaf 7 subleaf 1, EAX bit 4. Asked by hand: clang 16's __builtin_cpu_supports does not
  // know its name.
  unsigned eax = 0, ebx = 0, ecx = 0, edx = 0;
  return __get_cpuid_count(7, 1, &eax, &ebx, &ecx, &edx) != 0 && (eax & (1U << 4)) != 0;
#else
  return false;
#endif
}

// The highest of `choices` at or below `cap` that this CPU executes (generic at worst).
CpuPath highest(CpuPath cap, std::initializer_list<CpuPath> choices) {
  CpuPath best = CpuPath::kGeneric;
  for (const CpuPath path : choices) {
    if (path <= cap && path > best && cpu_executes(path)) best = path;
  }
  return best;
}

}  // namespace

const char* cpu_path_name(CpuPath path) {
  switch (path) {
    case CpuPath::kGeneric:
      return "generic";
    case CpuPath::kAvx2:
      return "avx2";
    case CpuPath::kAvxVnni:
      return "avx_vnni";
    case CpuPath::kAvx512:
      return "avx512";
    case CpuPath::kAvx512Vnni:
      return "avx512_vnni";
  }
  return "?";
}

bool cpu_executes(CpuPath path) {
#if defined(__x86_64__) && defined(__GNUC__)
  static const bool avx2 = __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma");
  static const bool avx512 = avx2 && __builtin_cpu_supports("avx512f");
  switch (path) {
    case CpuPath::kGeneric:
      return true;
    case CpuPath::kAvx2:
      return avx2;
    case CpuPath::kAvxVnni: {
      static const bool has = avx2 && has_avx_vnni();
      return has;
    }
    case CpuPath::kAvx512:
      return avx512;
    case CpuPath::kAvx512Vnni: {
      static const bool has = avx512 && __builtin_cpu_supports("avx512bw") &&
                              __builtin_cpu_supports("avx512vl") &&
                              __builtin_cpu_supports("avx512vnni");
      return has;
    }
  }
  return false;
#else
  return path == CpuPath::kGeneric;
#endif
}

CpuPath cpu_best_path() {
  CpuPath best = CpuPath::kGeneric;
  for (const CpuPath path : kPaths) {
    if (cpu_executes(path)) best = path;
  }
  return best;
}

CpuPath parse_cpu_path(const std::string& value) {
  std::string names;
  for (const CpuPath path : kPaths) {
    if (value == cpu_path_name(path)) {
      if (!cpu_executes(path)) {
        throw std::invalid_argument(std::string(kCpuKernelsVariable) + "=" + value +
                                    ": this CPU cannot execute that path (its highest is " +
                                    cpu_path_name(cpu_best_path()) + ")");
      }
      return path;
    }
    names += (names.empty() ? "" : ", ") + std::string(cpu_path_name(path));
  }
  throw std::invalid_argument(std::string(kCpuKernelsVariable) + "=" + value +
                              ": not a kernel path (one of " + names + ")");
}

CpuPath cpu_path() {
  static const CpuPath path = [] {
    const char* value = std::getenv(kCpuKernelsVariable);
    return value != nullptr && *value != '\0' ? parse_cpu_path(value) : cpu_best_path();
  }();
  return path;
}

CpuPath fp32_path(CpuPath cap) { return highest(cap, {CpuPath::kAvx2, CpuPath::kAvx512}); }

CpuPath int8_path(CpuPath cap) {
  return highest(cap, {CpuPath::kAvx2, CpuPath::kAvxVnni, CpuPath::kAvx512Vnni});
}

}  // namespace tandem::kernels
