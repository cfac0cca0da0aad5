#include "trainer/kernels/cpu/frozen_linear.h"

#include <ATen/Parallel.h>

#include <algorithm>
#include <cmath>

#include "trainer/kernels/fused/ops.h"

namespace tandem::kernels {
namespace {

// Rows whose inputs are reused across all panels before the next rows are read: 128 K inputs'
// worth (512 KB of floats), which stay in L2 (1-2 MB per core on current x86) while the panels
// stream through. Each block is one pass over the weights, from L3 or memory: at 24 K a beam-4
// step of 240 rows streamed each weight three times, and the products ran ~5 % slower; at 96 K a
// greedy step's 60 rows of a feed-forward output (2,048 inputs) took two blocks, 48 rows and 12.
constexpr int64_t kBlockInputs = 131072;

// Row blocks of `block` rows (their inputs reused from L2 across all panels), and within each,
// the panels split among the intra-op threads: each(r, n, p, next) for rows [r, r + n) of panel
// p, next whether panel p + 1 is this thread's next.
template <typename Each>
void blocks_and_panels(int64_t rows, int64_t block, int64_t panels, const Each& each) {
  for (int64_t r = 0; r < rows; r += block) {
    const int64_t n = std::min(block, rows - r);
    at::parallel_for(0, panels, 1, [&](int64_t begin, int64_t end) {
      for (int64_t p = begin; p < end; ++p) each(r, n, p, p + 1 < end);
    });
  }
}

// The rows of one block of inputs `in` long: a multiple of 12, whole tiles of 4 or 6 rows.
int64_t block_rows(int64_t in) { return std::max<int64_t>(12, kBlockInputs / in / 12 * 12); }

// The int8 inputs of a product: each row quantized, with its scale. Kept per thread and grown,
// never shrunk: decoding calls a product per layer per step, and a fresh allocation each time
// cost system time (pages mapped and returned) as well as the copy.
struct QuantizedRows {
  std::vector<uint8_t> bytes;
  std::vector<float> scales;
};

// The instruction sets' kernels of each precision and path; null where none (the generic path).
const PanelKernels* panel_kernels(InferencePrecision precision, CpuPath path) {
#if defined(TANDEM_X86_KERNELS)
  struct Entry {
    InferencePrecision precision;
    CpuPath path;
    const PanelKernels* kernels;
  };
  static const Entry kEntries[] = {
      {InferencePrecision::kFp32, CpuPath::kAvx2, &avx2::kFp32},
      {InferencePrecision::kFp32, CpuPath::kAvx512, &avx512::kFp32},
      {InferencePrecision::kInt8, CpuPath::kAvx2, &avx2::kInt8},
      {InferencePrecision::kInt8, CpuPath::kAvxVnni, &avx_vnni::kInt8},
      {InferencePrecision::kInt8, CpuPath::kAvx512Vnni, &avx512_vnni::kInt8}};
  for (const auto& entry : kEntries) {
    if (entry.precision == precision && entry.path == path) return entry.kernels;
  }
#else
  (void)precision;
  (void)path;
#endif
  return nullptr;
}

}  // namespace

bool cpu_has_packed_fp32() {
  return panel_kernels(InferencePrecision::kFp32, fp32_path()) != nullptr;
}

FrozenLinear::FrozenLinear(const torch::Tensor& weight, const torch::Tensor& bias,
                           InferencePrecision precision, CpuPath path)
    : precision_(precision),
      path_(precision == InferencePrecision::kInt8 ? int8_path(path) : fp32_path(path)),
      in_(weight.size(1)),
      out_(weight.size(0)),
      kernels_(panel_kernels(precision, path_)) {
  torch::NoGradGuard no_grad;
  if (kernels_ == nullptr) {
    if (precision == InferencePrecision::kInt8) {
      int8_ = Int8Linear(weight, bias);
    } else {
      weight_ = weight.detach().to(torch::kCPU, torch::kFloat).contiguous();
      plain_bias_ = bias.detach().to(torch::kCPU, torch::kFloat).contiguous();
    }
    return;
  }
  const auto w = weight.detach().to(torch::kCPU, torch::kFloat).contiguous();
  const auto b = bias.detach().to(torch::kCPU, torch::kFloat).contiguous();
  const int64_t panels = (out_ + kernels_->panel - 1) / kernels_->panel;
  bias_.assign(panels * kernels_->panel, 0.0F);
  std::copy(b.data_ptr<float>(), b.data_ptr<float>() + out_, bias_.begin());
  if (precision == InferencePrecision::kInt8) {
    pack_int8(w);
  } else {
    pack_fp32(w);
  }
}

void FrozenLinear::pack_fp32(const torch::Tensor& w) {
  const int64_t panel = kernels_->panel, panels = (out_ + panel - 1) / panel;
  panels_.assign(panels * in_ * panel, 0.0F);
  const float* wp = w.data_ptr<float>();
  for (int64_t o = 0; o < out_; ++o) {
    float* column = panels_.data() + (o / panel) * in_ * panel + o % panel;
    for (int64_t k = 0; k < in_; ++k) column[k * panel] = wp[o * in_ + k];
  }
}

void FrozenLinear::pack_int8(const torch::Tensor& w) {
  const int64_t panel = kernels_->panel, panels = (out_ + panel - 1) / panel;
  const int64_t quads = (in_ + 3) / 4;
  panels8_.assign(panels * quads * 4 * panel, 0);
  offset_sums_.assign(panels * panel, 0);
  scales_.assign(panels * panel, 1.0F);
  const RowQuantized quantized = quantize_rows(w);
  const int8_t* q = quantized.values.data_ptr<int8_t>();
  std::copy_n(quantized.scales.data_ptr<float>(), out_, scales_.begin());
  for (int64_t o = 0; o < out_; ++o) {
    const int8_t* row = q + o * in_;
    int8_t* column = panels8_.data() + (o / panel) * quads * 4 * panel + (o % panel) * 4;
    int32_t sum = 0;
    for (int64_t k = 0; k < in_; ++k) {
      column[(k / 4) * 4 * panel + k % 4] = row[k];
      sum += row[k];
    }
    offset_sums_[o] = kernels_->input_zero * sum;  // what the inputs' offset adds
  }
}

torch::Tensor FrozenLinear::operator()(const torch::Tensor& x) const {
  if (!packed()) {
    return precision_ == InferencePrecision::kInt8 ? int8_(x)
                                                   : linear_rows(x, weight_, plain_bias_);
  }
  const auto rows = input_rows(x);
  auto y = torch::empty({rows.size(0), out_}, torch::kFloat);
  packed_product(rows, y.data_ptr<float>());
  return shaped_like(y, x);
}

void FrozenLinear::operator()(const torch::Tensor& x, const torch::Tensor& y) const {
  const auto rows = input_rows(x);
  TORCH_CHECK(y.is_cpu() && y.scalar_type() == torch::kFloat && y.is_contiguous() && y.dim() == 2 &&
                  y.size(0) == rows.size(0) && y.size(1) == out_,
              "FrozenLinear: expected a contiguous float CPU result [", rows.size(0), ", ", out_,
              "], got ", y.sizes(), " ", y.scalar_type(), " on ", y.device());
  torch::NoGradGuard no_grad;
  if (packed()) {
    packed_product(rows, y.data_ptr<float>());
  } else {
    y.copy_((*this)(rows));
  }
}

torch::Tensor FrozenLinear::input_rows(const torch::Tensor& x) const {
  TORCH_CHECK(x.is_cpu() && x.scalar_type() == torch::kFloat && x.size(-1) == in_,
              "FrozenLinear: expected float CPU input [..., ", in_, "], got ", x.sizes(), " ",
              x.scalar_type(), " on ", x.device());
  return x.reshape({-1, in_}).contiguous();
}

torch::Tensor FrozenLinear::shaped_like(const torch::Tensor& y, const torch::Tensor& x) const {
  auto sizes = x.sizes().vec();
  sizes.back() = out_;
  return y.view(sizes);
}

void FrozenLinear::packed_product(const torch::Tensor& rows_in, float* yp) const {
  const int64_t rows = rows_in.size(0), panel = kernels_->panel;
  const int64_t panels = (out_ + panel - 1) / panel;
  PanelJob job;
  job.ldy = out_;
  const bool int8 = precision_ == InferencePrecision::kInt8;
  const int64_t quads = (in_ + 3) / 4;
  // int8: each input row in 8 bits with a scale of its own, rows a multiple of 16 bytes apart.
  const int64_t ldx = int8 ? (quads * 4 + 15) / 16 * 16 : in_;
  const int64_t panel_bytes = int8 ? quads * 4 * panel : in_ * panel * 4;
  const float* x_scales = nullptr;  // int8: each input row's scale
  if (int8) {
    thread_local QuantizedRows quantized;
    if (static_cast<int64_t>(quantized.bytes.size()) < rows * ldx) {
      quantized.bytes.resize(rows * ldx);
    }
    if (static_cast<int64_t>(quantized.scales.size()) < rows) quantized.scales.resize(rows);
    uint8_t* bytes = quantized.bytes.data();
    float* scales = quantized.scales.data();
    const float* xp = rows_in.data_ptr<float>();
    at::parallel_for(0, rows, 16, [&](int64_t begin, int64_t end) {
      for (int64_t r = begin; r < end; ++r) {
        scales[r] = kernels_->quantize(xp + r * in_, in_, ldx, bytes + r * ldx);
      }
    });
    job.x = bytes;
    x_scales = scales;
    job.depth = quads;
  } else {
    job.x = rows_in.data_ptr<float>();
    job.depth = in_;
  }
  job.ldx = ldx;
  const auto* weights = int8 ? reinterpret_cast<const char*>(panels8_.data())
                             : reinterpret_cast<const char*>(panels_.data());
  const int64_t x_bytes = int8 ? 1 : 4;
  blocks_and_panels(rows, block_rows(in_), panels,
                    [&](int64_t r0, int64_t n, int64_t p, bool next) {
                      PanelJob part = job;
                      part.x = static_cast<const char*>(job.x) + r0 * ldx * x_bytes;
                      part.rows = n;
                      part.panel = weights + p * panel_bytes;
                      part.bias = bias_.data() + p * panel;
                      if (int8) {
                        part.x_scales = x_scales + r0;
                        part.w_scales = scales_.data() + p * panel;
                        part.offset_sums = offset_sums_.data() + p * panel;
                      }
                      part.y = yp + r0 * out_ + p * panel;
                      part.cols = std::min(panel, out_ - p * panel);
                      part.next = next ? weights + (p + 1) * panel_bytes : nullptr;
                      part.next_lines = panel_bytes / 64;
                      kernels_->product(part);
                    });
}

}  // namespace tandem::kernels
