// Philox4x32-10 (Salmon, Moraes, Dror and Shaw, "Parallel random numbers: as easy as 1, 2, 3",
// SC 2011), on the host and on a GPU alike: a CUDA kernel's dropout mask is a function of
// (seed, offset, element), so its backward pass draws it again instead of storing it, and a test
// on the CPU draws the very same mask.
#pragma once

#include <cmath>
#include <cstdint>

#ifdef __CUDACC__
#define TANDEM_HOST_DEVICE __host__ __device__
#else
#define TANDEM_HOST_DEVICE
#endif

namespace tandem::kernels::philox {

struct Block {
  uint32_t word[4];
};

// The ten rounds on counter c under the key (k0, k1).
TANDEM_HOST_DEVICE inline Block philox4x32_10(Block c, uint32_t k0, uint32_t k1) {
  for (int round = 0; round < 10; ++round) {
    if (round > 0) {
      k0 += 0x9E3779B9u;
      k1 += 0xBB67AE85u;
    }
    const uint64_t p0 = static_cast<uint64_t>(0xD2511F53u) * c.word[0];
    const uint64_t p1 = static_cast<uint64_t>(0xCD9E8D57u) * c.word[2];
    c = Block{{static_cast<uint32_t>(p1 >> 32) ^ c.word[1] ^ k0, static_cast<uint32_t>(p1),
               static_cast<uint32_t>(p0 >> 32) ^ c.word[3] ^ k1, static_cast<uint32_t>(p0)}};
  }
  return c;
}

// The four words of subsequence `index` at `offset` 32-bit words into it, under `seed`: what
// curand_init(seed, index, offset) then curand4 give (and ATen's philox_engine(seed, index,
// offset / 4)) for an offset that is a multiple of 4, as LibTorch's CUDA generator hands out.
TANDEM_HOST_DEVICE inline Block draw(uint64_t seed, uint64_t offset, uint64_t index) {
  const uint64_t block = offset / 4;
  return philox4x32_10(Block{{static_cast<uint32_t>(block), static_cast<uint32_t>(block >> 32),
                              static_cast<uint32_t>(index), static_cast<uint32_t>(index >> 32)}},
                       static_cast<uint32_t>(seed), static_cast<uint32_t>(seed >> 32));
}

// Dropout over runs of 8 elements, one draw a run: element i of the run (0 to 7) takes 16 bits
// of it (word i / 2, low half first) and is kept where they are at least `threshold`, which is
// p · 65,536 rounded (the CPU's masks quantise p the same way).
TANDEM_HOST_DEVICE inline bool kept(const Block& bits, int i, uint32_t threshold) {
  return ((bits.word[i / 2] >> (16 * (i % 2))) & 0xFFFFu) >= threshold;
}

// The threshold of dropout at p.
inline uint32_t keep_threshold(double p) { return static_cast<uint32_t>(std::lround(p * 65536.0)); }

}  // namespace tandem::kernels::philox
