// The kernel paths: their order, what TANDEM_CPU_KERNELS may name (every path this CPU executes,
// nothing else, with one message naming the value), and which path each kind of product takes
// under a bound.
#include "trainer/kernels/cpu/cpu_path.h"

#include <gtest/gtest.h>

#include <stdexcept>
#include <string>

namespace tandem::kernels {
namespace {

constexpr CpuPath kAll[] = {CpuPath::kGeneric, CpuPath::kAvx2, CpuPath::kAvxVnni, CpuPath::kAvx512,
                            CpuPath::kAvx512Vnni};

std::string message_of(const std::string& value) {
  try {
    parse_cpu_path(value);
  } catch (const std::invalid_argument& e) {
    return e.what();
  }
  return "";
}

TEST(CpuPath, EveryPathThisCpuExecutesCanBeNamedAndNoOther) {
  EXPECT_TRUE(cpu_executes(CpuPath::kGeneric));
  for (const CpuPath path : kAll) {
    const std::string name = cpu_path_name(path);
    if (cpu_executes(path)) {
      EXPECT_EQ(parse_cpu_path(name), path) << name;
      EXPECT_LE(path, cpu_best_path()) << name;
    } else {
      EXPECT_EQ(message_of(name), "TANDEM_CPU_KERNELS=" + name +
                                      ": this CPU cannot execute that path (its highest is " +
                                      cpu_path_name(cpu_best_path()) + ")");
    }
  }
  EXPECT_EQ(message_of("avx3"),
            "TANDEM_CPU_KERNELS=avx3: not a kernel path (one of generic, avx2, avx_vnni, avx512, "
            "avx512_vnni)");
  EXPECT_NE(message_of("AVX2"), "");  // names are exact
}

TEST(CpuPath, EachProductTakesTheHighestOfItsPathsUnderTheBound) {
  EXPECT_EQ(fp32_path(CpuPath::kGeneric), CpuPath::kGeneric);
  EXPECT_EQ(int8_path(CpuPath::kGeneric), CpuPath::kGeneric);
  if (!cpu_executes(CpuPath::kAvx2)) GTEST_SKIP() << "no AVX2 and FMA: every product is generic";
  EXPECT_EQ(fp32_path(CpuPath::kAvx2), CpuPath::kAvx2);
  EXPECT_EQ(int8_path(CpuPath::kAvx2), CpuPath::kAvx2);
  // avx_vnni bounds fp32 at avx2; avx512 bounds int8 at avx_vnni or avx2.
  EXPECT_EQ(fp32_path(CpuPath::kAvxVnni), CpuPath::kAvx2);
  EXPECT_EQ(int8_path(CpuPath::kAvx512),
            cpu_executes(CpuPath::kAvxVnni) ? CpuPath::kAvxVnni : CpuPath::kAvx2);
  EXPECT_EQ(fp32_path(CpuPath::kAvx512Vnni),
            cpu_executes(CpuPath::kAvx512) ? CpuPath::kAvx512 : CpuPath::kAvx2);
}

}  // namespace
}  // namespace tandem::kernels
