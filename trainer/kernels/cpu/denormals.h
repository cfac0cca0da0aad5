// Denormal floats treated as zero while a thread decodes. Attention's probabilities of keys far
// below a row's best underflow into denormals (exp(x - max) < 2^-126), and on x86 every multiply
// or add that reads or writes one takes a microcode assist of ~100 cycles: the tiny model's fp32
// encoder spent 0.40 s of its 497-line test split in attention with them, 0.13 s without. A
// denormal is below 2^-126 of the sums it joins (probabilities sum to 1, values are O(1)), so
// flushing it leaves them as they were: the same translations and n-best scores, byte for byte,
// of the tiny and a base-shape model in fp32 and int8 at beams 1 and 4.
#pragma once

namespace tandem::kernels {

// For its lifetime, the calling thread's float arithmetic reads denormal inputs as zero and
// writes zero for denormal results (x86's MXCSR DAZ and FTZ bits); the thread's previous mode
// comes back when it ends. Threads already running (LibTorch's intra-op pool) keep theirs; threads
// started in its scope begin with it (Linux copies the mode at thread creation). No-op on other
// CPUs.
class FlushedDenormals {
 public:
  FlushedDenormals();
  ~FlushedDenormals();
  FlushedDenormals(const FlushedDenormals&) = delete;
  FlushedDenormals& operator=(const FlushedDenormals&) = delete;

 private:
  unsigned int saved_ = 0;  // the thread's MXCSR before
};

}  // namespace tandem::kernels
