// The decoding tools' CPU allocator: block sizes, reuse of freed blocks, what it keeps and what it
// gives back, against hand-computed sizes.
#include "trainer/runtime/block_cache.h"

#include <gtest/gtest.h>

#include <cstring>
#include <utility>

namespace tandem::runtime {
namespace {

constexpr size_t kKiB = 1024, kMiB = 1024 * 1024;

TEST(BlockCache, RoundsUpToAQuarterOfThePowerOfTwo) {
  EXPECT_EQ(BlockCache::block_size(128 * kKiB), 128 * kKiB);
  EXPECT_EQ(BlockCache::block_size(128 * kKiB + 1), 160 * kKiB);  // quarters of 128 KiB
  EXPECT_EQ(BlockCache::block_size(200 * kKiB), 224 * kKiB);
  EXPECT_EQ(BlockCache::block_size(kMiB), kMiB);
  EXPECT_EQ(BlockCache::block_size(900 * kKiB), kMiB);   // quarters of 512 KiB
  EXPECT_EQ(BlockCache::block_size(3000000), 3 * kMiB);  // 5.7 quarters of 2 MiB → 6
  EXPECT_EQ(BlockCache::block_size(4 * kMiB - 1), 4 * kMiB);
}

TEST(BlockCache, AFreedBlockServesTheNextRequestUpToTwiceSmaller) {
  BlockCache cache(64 * kMiB);
  void* first = nullptr;
  {
    c10::DataPtr block = cache.allocate(kMiB);
    first = block.get();
    std::memset(first, 1, kMiB);  // the whole block is usable
  }
  EXPECT_EQ(cache.cached_blocks(), 1u);
  EXPECT_EQ(cache.cached_bytes(), kMiB);
  {
    c10::DataPtr again = cache.allocate(900 * kKiB);  // its own size class is 1 MiB
    EXPECT_EQ(again.get(), first);
    EXPECT_EQ(cache.cached_bytes(), 0u);
  }
  {
    c10::DataPtr half = cache.allocate(600 * kKiB);  // 640 KiB: the 1 MiB block is within 2x
    EXPECT_EQ(half.get(), first);
  }
  {
    c10::DataPtr small = cache.allocate(400 * kKiB);  // 448 KiB: 1 MiB is more than twice that
    EXPECT_NE(small.get(), first);
    EXPECT_EQ(cache.cached_blocks(), 1u);
  }
  EXPECT_EQ(cache.cached_blocks(), 2u);
  EXPECT_EQ(cache.cached_bytes(), kMiB + 448 * kKiB);
  {
    c10::DataPtr larger = cache.allocate(2 * kMiB);  // nothing fits: a new block
    EXPECT_NE(larger.get(), first);
    EXPECT_EQ(cache.cached_blocks(), 2u);
  }
  EXPECT_EQ(cache.cached_blocks(), 3u);
}

TEST(BlockCache, SmallTensorsAndBlocksPastTheCapGoBack) {
  BlockCache cache(kMiB + kMiB / 2);
  {
    c10::DataPtr small = cache.allocate(BlockCache::kMinBytes - 1);
    ASSERT_NE(small.get(), nullptr);
  }
  EXPECT_EQ(cache.cached_blocks(), 0u);
  {
    c10::DataPtr a = cache.allocate(kMiB), b = cache.allocate(kMiB);
    EXPECT_NE(a.get(), b.get());
  }
  EXPECT_EQ(cache.cached_blocks(), 1u);  // the second would pass 1.5 MiB
  EXPECT_EQ(cache.cached_bytes(), kMiB);
  EXPECT_EQ(cache.allocate(0).get(), nullptr);
}

// LibTorch's quantized int8 kernels (tandem-decode --precision int8 on CPUs without VNNI) take
// memory through raw_allocate and free it with raw_deallocate, which needs a deleter of the data
// pointer itself: without one LibTorch aborts ("d INTERNAL ASSERT FAILED").
TEST(BlockCache, RawAllocationsRoundTripAndLargeOnesAreKept) {
  BlockCache cache(64 * kMiB);
  void* small = cache.raw_allocate(100);
  void* large = cache.raw_allocate(kMiB);
  ASSERT_NE(small, nullptr);
  ASSERT_NE(large, nullptr);
  EXPECT_EQ(reinterpret_cast<uintptr_t>(large) % 64, 0u);  // LibTorch's alignment
  std::memset(small, 2, 100);
  std::memset(large, 3, kMiB);
  cache.raw_deallocate(small);
  cache.raw_deallocate(large);
  EXPECT_EQ(cache.cached_blocks(), 1u);
  c10::DataPtr again = cache.allocate(kMiB);
  EXPECT_EQ(again.get(), large);
}

}  // namespace
}  // namespace tandem::runtime
