#include "trainer/runtime/block_cache.h"

#include <c10/core/CPUAllocator.h>
#include <c10/core/impl/alloc_cpu.h>

namespace tandem::runtime {

BlockCache::BlockCache(size_t max_cached_bytes) : max_cached_bytes_(max_cached_bytes) {}

BlockCache::~BlockCache() {
  for (auto& [size, block] : free_) c10::free_cpu(block);
}

BlockCache::Block* BlockCache::new_block(const BlockCache* owner, size_t size) {
  auto* block = static_cast<Block*>(c10::alloc_cpu(kHeaderBytes + size));
  *block = Block{owner, size};
  return block;
}

void* BlockCache::data_of(Block* block) { return reinterpret_cast<char*>(block) + kHeaderBytes; }

size_t BlockCache::block_size(size_t nbytes) {
  size_t power = 1;
  while (power <= nbytes / 2) power *= 2;  // the largest power of two <= nbytes
  const size_t quarter = power / 4;
  return (nbytes + quarter - 1) / quarter * quarter;
}

#ifdef TANDEM_ALLOCATOR_API_2_3
c10::DataPtr BlockCache::allocate(size_t nbytes) {
#else
c10::DataPtr BlockCache::allocate(size_t nbytes) const {
#endif
  const c10::Device cpu(c10::DeviceType::CPU);
  if (nbytes == 0) return {nullptr, nullptr, &BlockCache::give_back, cpu};
  if (nbytes < kMinBytes) {
    void* data = data_of(new_block(this, nbytes));
    return {data, data, &BlockCache::give_back, cpu};
  }
  const size_t size = block_size(nbytes);
  Block* block = nullptr;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    // The smallest free block that fits, if it is at most twice the size asked for.
    const auto fit = free_.lower_bound(size);
    if (fit != free_.end() && fit->first <= 2 * size) {
      block = fit->second;
      cached_bytes_ -= block->size;
      free_.erase(fit);
    }
  }
  if (block == nullptr) block = new_block(this, size);
  void* data = data_of(block);
  return {data, data, &BlockCache::give_back, cpu};
}

#ifdef TANDEM_ALLOCATOR_API_2_3
// Blocks are plain host memory.
void BlockCache::copy_data(void* dest, const void* src, size_t count) const {
  default_copy_data(dest, src, count);
}
#endif

void BlockCache::give_back(void* data) {
  if (data == nullptr) return;
  auto* block = reinterpret_cast<Block*>(static_cast<char*>(data) - kHeaderBytes);
  block->owner->keep(block);
}

void BlockCache::keep(Block* block) const {
  if (block->size >= kMinBytes) {
    std::lock_guard<std::mutex> lock(mutex_);
    if (cached_bytes_ + block->size <= max_cached_bytes_) {
      free_.emplace(block->size, block);
      cached_bytes_ += block->size;
      return;
    }
  }
  c10::free_cpu(block);
}

size_t BlockCache::cached_bytes() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return cached_bytes_;
}

size_t BlockCache::cached_blocks() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return free_.size();
}

void use_block_cache() {
  // Never destroyed: tensors may be freed during static destruction, after main returns.
  static BlockCache* const cache = [] {
    auto* created = new BlockCache(size_t{1} << 30);
    c10::SetCPUAllocator(created, /*priority=*/1);
    return created;
  }();
  (void)cache;
}

}  // namespace tandem::runtime
