// LibTorch's CPU allocator for the decoding tools: large tensors' memory is kept when freed and
// handed to the next tensor of about the same size, instead of going back to glibc.
#pragma once

#include <c10/core/Allocator.h>
#include <torch/version.h>

#include <cstddef>
#include <map>
#include <mutex>

// LibTorch 2.3 made c10::Allocator::allocate non-const and copy_data pure virtual: the one place
// that tells the two interfaces apart.
#if TORCH_VERSION_MAJOR > 2 || (TORCH_VERSION_MAJOR == 2 && TORCH_VERSION_MINOR >= 3)
#define TANDEM_ALLOCATOR_API_2_3 1
#endif

namespace tandem::runtime {

// LibTorch's CPU allocator for the decoding tools: the memory of large tensors is kept when they
// are freed and handed to the next tensor of about the same size, instead of going back to glibc.
// Decoding allocates tensors of many sizes (every batch has its own rows and lengths, and rows
// drop out at every step); glibc carves those that fit no free chunk from the top of its heap,
// whose pages the kernel then maps on first touch. On greedy decoding of the 497-line Bible test
// split the heap grew by ~10 MB a batch while its live bytes stayed the same; with this cache the
// run took 53k page faults instead of 60k and its heap ended at 194 MB instead of 235 MB. Here a
// block's size is rounded up to a quarter of its power of two and a freed block serves any
// request up to twice smaller, so after the first batches the same pages come back. Small tensors
// (under kMinBytes) stay with glibc's bins, which reuse them well.

class BlockCache final : public c10::Allocator {
 public:
  static constexpr size_t kMinBytes = size_t{128} << 10;

  // Keeps at most `max_cached_bytes` of free blocks; a block freed beyond that goes back to glibc.
  explicit BlockCache(size_t max_cached_bytes);
  ~BlockCache() override;
  BlockCache(const BlockCache&) = delete;
  BlockCache& operator=(const BlockCache&) = delete;

#ifdef TANDEM_ALLOCATOR_API_2_3
  c10::DataPtr allocate(size_t nbytes) override;
  void copy_data(void* dest, const void* src, size_t count) const override;
#else
  c10::DataPtr allocate(size_t nbytes) const override;
#endif

  // LibTorch's raw_allocate/raw_deallocate (used by its quantized int8 kernels, among others)
  // need a deleter that takes the data pointer itself: every pointer this allocator hands out,
  // large or small, can be freed with it.
  c10::DeleterFnPtr raw_deleter() const override { return &BlockCache::give_back; }

  // The size of the block that serves `nbytes` (kMinBytes and up): rounded up to a multiple of a
  // quarter of the largest power of two not above it.
  static size_t block_size(size_t nbytes);

  size_t cached_bytes() const;  // free blocks kept for reuse
  size_t cached_blocks() const;

 private:
  // Every allocation starts with this header, kHeaderBytes before the data (which stays aligned
  // as LibTorch aligns it), so that a data pointer alone finds its block and owner.
  struct Block {
    const BlockCache* owner;
    size_t size;  // bytes of data after the header; below kMinBytes: not cached
  };
  static constexpr size_t kHeaderBytes = 64;
  static_assert(sizeof(Block) <= kHeaderBytes, "the header must fit before the data");
  static Block* new_block(const BlockCache* owner, size_t size);
  static void* data_of(Block* block);
  static void give_back(void* data);
  void keep(Block* block) const;

  size_t max_cached_bytes_;
  mutable std::mutex mutex_;
  mutable std::multimap<size_t, Block*> free_;  // size → free blocks of that size
  mutable size_t cached_bytes_ = 0;
};

// Makes a process-wide BlockCache LibTorch's CPU allocator from now on (tensors allocated before
// keep their own deleters); once per process, later calls do nothing.
void use_block_cache();

}  // namespace tandem::runtime
