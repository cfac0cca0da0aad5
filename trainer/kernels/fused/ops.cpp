// CPU kernels: one BLAS call per (sentence, head) instead of LibTorch's batched matmul, which on
// CPU without MKL loops over the batch with per-item dispatch (most of attention's time), and
// masks read from the padding vector instead of a materialised [q_len, k_len] tensor.
#include "trainer/kernels/fused/ops.h"

#include <ATen/CPUGeneratorImpl.h>
#include <ATen/Parallel.h>
#include <dlfcn.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <mutex>
#include <type_traits>
#include <vector>

#include "trainer/kernels/fused/gpu_attention.h"
#include "trainer/kernels/cuda/gpu_ops.h"
#include "trainer/kernels/cuda/philox.h"

namespace tandem::kernels {
namespace {

using torch::autograd::AutogradContext;
using torch::autograd::variable_list;

// The BLAS LibTorch itself loaded (Fortran sgemm_/dgemm_), looked up at run time: LibTorch does
// not export its own gemm wrapper, and linking a BLAS here could pick a different one.
template <typename T>
using BlasGemm = void (*)(const char*, const char*, const int*, const int*, const int*, const T*,
                          const T*, const int*, const T*, const int*, const T*, T*, const int*);

template <typename T>
BlasGemm<T> blas_gemm() {
  static const auto fn = reinterpret_cast<BlasGemm<T>>(
      dlsym(RTLD_DEFAULT, std::is_same<T, float>::value ? "sgemm_" : "dgemm_"));
  return fn;
}

// Its matrix-vector product: one query row (incremental decoding) costs a fraction of a gemm
// call, which packs its operands first.
template <typename T>
using BlasGemv = void (*)(const char*, const int*, const int*, const T*, const T*, const int*,
                          const T*, const int*, const T*, T*, const int*);

template <typename T>
BlasGemv<T> blas_gemv() {
  static const auto fn = reinterpret_cast<BlasGemv<T>>(
      dlsym(RTLD_DEFAULT, std::is_same<T, float>::value ? "sgemv_" : "dgemv_"));
  return fn;
}

bool cpu_kernel_applies(const torch::Tensor& t) {
  if (!t.is_cpu()) return false;
  if (t.scalar_type() == torch::kFloat) return blas_gemm<float>() != nullptr;
  if (t.scalar_type() == torch::kDouble) return blas_gemm<double>() != nullptr;
  return false;
}

// Row-major C[m, n] = alpha op(A) op(B) + beta C: column-major BLAS computing Cᵀ = op(B)ᵀ op(A)ᵀ.
// One row (m = 1) is the vector product cᵀ = op(B)ᵀ a with a's elements lda apart when trans_a.
template <typename T>
void gemm(bool trans_a, bool trans_b, int64_t m, int64_t n, int64_t k, T alpha, const T* a,
          int64_t lda, const T* b, int64_t ldb, T beta, T* c, int64_t ldc) {
  if (m == 1 && blas_gemv<T>()) {
    // Column-major, B is [k, n] with leading dimension ldb when trans_b, else [n, k].
    const char op = trans_b ? 'T' : 'N';
    const int rows = static_cast<int>(trans_b ? k : n), cols = static_cast<int>(trans_b ? n : k);
    const int ld = static_cast<int>(ldb), step_a = trans_a ? static_cast<int>(lda) : 1, one = 1;
    if (beta == T(0)) std::fill(c, c + n, T(0));  // whatever c held (NaN too) must not leak in
    blas_gemv<T>()(&op, &rows, &cols, &alpha, b, &ld, a, &step_a, &beta, c, &one);
    return;
  }
  const char ta = trans_a ? 'T' : 'N', tb = trans_b ? 'T' : 'N';
  const int mi = static_cast<int>(n), ni = static_cast<int>(m), ki = static_cast<int>(k);
  const int la = static_cast<int>(ldb), lb = static_cast<int>(lda), lc = static_cast<int>(ldc);
  blas_gemm<T>()(&tb, &ta, &mi, &ni, &ki, &alpha, b, &la, a, &lb, &beta, c, &lc);
}

// Where the operands of one attention call live: rows of q and of k/v with their row strides.
struct Geometry {
  int64_t batch, q_len, k_len, heads, d_head;
  int64_t ld_q, ld_kv;   // row strides of q_rows and kv rows
  int64_t k_col, v_col;  // column offsets of k and v within the kv rows
  bool causal;
  int64_t q_stride, kv_stride;  // sentence strides of q_rows and kv rows
  int64_t d() const { return heads * d_head; }
};

// Keys query i may see: those before `visible` that are not padding.
int64_t visible_keys(const Geometry& g, int64_t i) { return g.causal ? i + 1 : g.k_len; }

bool any_key(const bool* pad, int64_t visible) {
  for (int64_t j = 0; j < visible; ++j) {
    if (!pad || !pad[j]) return true;
  }
  return false;
}

// Scores in `row` → probabilities; forbidden keys get exactly 0. No visible key: uniform (what
// filling every score with the same large negative value gives).
template <typename T>
void softmax_row(T* row, int64_t len, const bool* pad, int64_t visible) {
  if (!any_key(pad, visible)) {
    for (int64_t j = 0; j < len; ++j) row[j] = T(1) / static_cast<T>(len);
    return;
  }
  T top = -std::numeric_limits<T>::infinity();
  for (int64_t j = 0; j < visible; ++j) {
    if (!pad || !pad[j]) top = std::max(top, row[j]);
  }
  T sum = 0;
  for (int64_t j = 0; j < len; ++j) {
    const bool keep = j < visible && (!pad || !pad[j]);
    row[j] = keep ? std::exp(row[j] - top) : T(0);
    sum += row[j];
  }
  const T inv = T(1) / sum;
  for (int64_t j = 0; j < len; ++j) row[j] *= inv;
}

// P = softmax(scale q kᵀ) of sentence b, head h into p [q_len, k_len]. Backward recomputes it
// rather than keeping [batch, heads, q_len, k_len] per layer alive (a few % of attention's time).
template <typename T>
void probabilities(const T* q, const T* kv, const bool* pad, const Geometry& g, int64_t b,
                   int64_t h, T* p) {
  const T scale = T(1) / std::sqrt(static_cast<T>(g.d_head));
  const T* qb = q + b * g.q_stride + h * g.d_head;
  const T* kb = kv + b * g.kv_stride + g.k_col + h * g.d_head;
  gemm(false, true, g.q_len, g.k_len, g.d_head, scale, qb, g.ld_q, kb, g.ld_kv, T(0), p, g.k_len);
  const bool* padb = pad ? pad + b * g.k_len : nullptr;
  for (int64_t i = 0; i < g.q_len; ++i) {
    softmax_row(p + i * g.k_len, g.k_len, padb, visible_keys(g, i));
  }
}

template <typename T>
void attention_forward(const T* q, const T* kv, const bool* pad, const Geometry& g, T* out) {
  at::parallel_for(0, g.batch * g.heads, 1, [&](int64_t begin, int64_t end) {
    std::vector<T> p(g.q_len * g.k_len);
    for (int64_t bh = begin; bh < end; ++bh) {
      const int64_t b = bh / g.heads, h = bh % g.heads;
      probabilities(q, kv, pad, g, b, h, p.data());
      const T* vb = kv + b * g.kv_stride + g.v_col + h * g.d_head;
      gemm(false, false, g.q_len, g.d_head, g.k_len, T(1), p.data(), g.k_len, vb, g.ld_kv, T(0),
           out + b * g.q_len * g.d() + h * g.d_head, g.d());
    }
  });
}

// Keys of sentence b in use: up to its last non-padding key (all when all are padding, which
// attend uniformly to all as ever).
int64_t keys_in_use(const bool* pad, int64_t k_len) {
  if (pad == nullptr) return k_len;
  int64_t used = k_len;
  while (used > 0 && pad[used - 1]) --used;
  return used > 0 ? used : k_len;
}

// attention_forward with AttentionMask::per_sentence: sentence b's calls are those of a batch of
// it alone, padded to its last real key (a self-attention's queries too; their padding rows 0).
template <typename T>
void attention_forward_per_sentence(const T* q, const T* kv, const bool* pad, const Geometry& g,
                                    bool self, T* out) {
  at::parallel_for(0, g.batch * g.heads, 1, [&](int64_t begin, int64_t end) {
    std::vector<T> p;
    for (int64_t bh = begin; bh < end; ++bh) {
      const int64_t b = bh / g.heads, h = bh % g.heads;
      const bool* padb = pad ? pad + b * g.k_len : nullptr;
      Geometry alone = g;
      alone.batch = 1;
      alone.k_len = keys_in_use(padb, g.k_len);
      if (self) alone.q_len = alone.k_len;
      p.resize(alone.q_len * alone.k_len);
      const T* qb = q + b * g.q_stride;
      const T* kvb = kv + b * g.kv_stride;
      probabilities(qb, kvb, padb, alone, 0, h, p.data());
      T* ob = out + b * g.q_len * g.d() + h * g.d_head;
      gemm(false, false, alone.q_len, g.d_head, alone.k_len, T(1), p.data(), alone.k_len,
           kvb + g.v_col + h * g.d_head, g.ld_kv, T(0), ob, g.d());
      for (int64_t i = alone.q_len; i < g.q_len; ++i) {
        std::fill(ob + i * g.d(), ob + i * g.d() + g.d_head, T(0));
      }
    }
  });
}

// dS = P ∘ (dP - rowsum(dP ∘ P)), zero on rows that saw no key (their scores were constants).
template <typename T>
void softmax_backward_rows(const T* p, T* dp, const bool* pad, const Geometry& g) {
  for (int64_t i = 0; i < g.q_len; ++i) {
    const T* pr = p + i * g.k_len;
    T* dr = dp + i * g.k_len;
    if (!any_key(pad, visible_keys(g, i))) {
      std::fill(dr, dr + g.k_len, T(0));
      continue;
    }
    T dot = 0;
    for (int64_t j = 0; j < g.k_len; ++j) dot += pr[j] * dr[j];
    for (int64_t j = 0; j < g.k_len; ++j) dr[j] = pr[j] * (dr[j] - dot);
  }
}

// Gradients land in dq (rows like q) and dkv (rows like kv; the same buffer for self-attention).
template <typename T>
void attention_backward(const T* q, const T* kv, const bool* pad, const Geometry& g, const T* dout,
                        T* dq, T* dkv) {
  const T scale = T(1) / std::sqrt(static_cast<T>(g.d_head));
  at::parallel_for(0, g.batch * g.heads, 1, [&](int64_t begin, int64_t end) {
    std::vector<T> probs(g.q_len * g.k_len), dp(g.q_len * g.k_len);
    for (int64_t bh = begin; bh < end; ++bh) {
      const int64_t b = bh / g.heads, h = bh % g.heads;
      const int64_t q_at = b * g.q_stride + h * g.d_head;
      const int64_t kv_at = b * g.kv_stride + h * g.d_head;
      probabilities(q, kv, pad, g, b, h, probs.data());
      const T* p = probs.data();
      const T* dob = dout + b * g.q_len * g.d() + h * g.d_head;
      const T* kb = kv + kv_at + g.k_col;
      const T* vb = kv + kv_at + g.v_col;
      gemm(false, true, g.q_len, g.k_len, g.d_head, T(1), dob, g.d(), vb, g.ld_kv, T(0), dp.data(),
           g.k_len);
      gemm(true, false, g.k_len, g.d_head, g.q_len, T(1), p, g.k_len, dob, g.d(), T(0),
           dkv + kv_at + g.v_col, g.ld_kv);
      softmax_backward_rows(p, dp.data(), pad ? pad + b * g.k_len : nullptr, g);
      gemm(false, false, g.q_len, g.d_head, g.k_len, scale, dp.data(), g.k_len, kb, g.ld_kv, T(0),
           dq + q_at, g.ld_q);
      gemm(true, false, g.k_len, g.d_head, g.q_len, scale, dp.data(), g.k_len, q + q_at, g.ld_q,
           T(0), dkv + kv_at + g.k_col, g.ld_kv);
    }
  });
}

Geometry geometry(const torch::Tensor& q_rows, const torch::Tensor& kv_rows, bool self,
                  int64_t heads, bool causal) {
  const int64_t d = self ? q_rows.size(2) / 3 : q_rows.size(2);
  return Geometry{q_rows.size(0),
                  q_rows.size(1),
                  kv_rows.size(1),
                  heads,
                  d / heads,
                  q_rows.size(2),
                  kv_rows.size(2),
                  self ? d : 0,
                  self ? 2 * d : d,
                  causal,
                  q_rows.size(1) * q_rows.size(2),
                  kv_rows.size(1) * kv_rows.size(2)};
}

class AttentionFunction : public torch::autograd::Function<AttentionFunction> {
 public:
  // self: q_rows = q | k | v and kv_rows is q_rows (it gets no gradient of its own). An empty
  // pad means no padding. (LibTorch 1.13 takes no undefined tensors as Function inputs.)
  static torch::Tensor forward(AutogradContext* ctx, const torch::Tensor& q_rows,
                               const torch::Tensor& kv_rows, const torch::Tensor& pad,
                               int64_t heads, bool causal, bool self) {
    const Geometry g = geometry(q_rows, kv_rows, self, heads, causal);
    auto out = torch::empty({g.batch, g.q_len, g.d()}, q_rows.options());
    AT_DISPATCH_FLOATING_TYPES(q_rows.scalar_type(), "fused_attention", [&] {
      attention_forward<scalar_t>(q_rows.data_ptr<scalar_t>(), kv_rows.data_ptr<scalar_t>(),
                                  pad.numel() > 0 ? pad.data_ptr<bool>() : nullptr, g,
                                  out.data_ptr<scalar_t>());
    });
    ctx->save_for_backward({q_rows, self ? torch::Tensor() : kv_rows, pad});
    ctx->saved_data["heads"] = heads;
    ctx->saved_data["causal"] = causal;
    ctx->saved_data["self"] = self;
    return out;
  }

  static variable_list backward(AutogradContext* ctx, variable_list grads) {
    const auto saved = ctx->get_saved_variables();
    const auto &q_rows = saved[0], &pad = saved[2];
    const bool self = ctx->saved_data["self"].toBool();
    const auto& kv_rows = self ? q_rows : saved[1];
    const Geometry g = geometry(q_rows, kv_rows, self, ctx->saved_data["heads"].toInt(),
                                ctx->saved_data["causal"].toBool());
    const auto dout = grads[0].contiguous();
    auto dq = torch::empty_like(q_rows);
    auto dkv = self ? dq : torch::empty_like(kv_rows);
    AT_DISPATCH_FLOATING_TYPES(q_rows.scalar_type(), "fused_attention_backward", [&] {
      attention_backward<scalar_t>(q_rows.data_ptr<scalar_t>(), kv_rows.data_ptr<scalar_t>(),
                                   pad.numel() > 0 ? pad.data_ptr<bool>() : nullptr, g,
                                   dout.data_ptr<scalar_t>(), dq.data_ptr<scalar_t>(),
                                   dkv.data_ptr<scalar_t>());
    });
    return {dq,
            self ? torch::Tensor() : dkv,
            torch::Tensor(),
            torch::Tensor(),
            torch::Tensor(),
            torch::Tensor()};
  }
};

// The same computation in tensor ops, for any device and dtype; on a GPU with LibTorch >= 2,
// through its fused attention kernels (gpu_attention.h).
torch::Tensor attention_with_tensor_ops(const torch::Tensor& q_rows, const torch::Tensor& kv,
                                        int64_t heads, const AttentionMask& mask) {
  const bool self = !kv.defined();
  const int64_t d = self ? q_rows.size(2) / 3 : q_rows.size(2);
  const auto& kv_rows = self ? q_rows : kv;
  const int64_t k_col = self ? d : 0;
  auto split = [&](const torch::Tensor& x) {
    return x.reshape({x.size(0), x.size(1), heads, d / heads}).transpose(1, 2);
  };
  if (gpu_attention_applies(q_rows)) return gpu_attention(q_rows, kv, heads, mask);
  auto q = split(q_rows.narrow(2, 0, d) * (1.0 / std::sqrt(static_cast<double>(d / heads))));
  auto k = split(kv_rows.narrow(2, k_col, d));
  auto v = split(kv_rows.narrow(2, k_col + d, d));
  auto scores = torch::matmul(q, k.transpose(-2, -1));
  const auto forbidden = mask.dense(q_rows.size(1), q_rows.device());
  if (forbidden.defined()) {
    const double fill = scores.scalar_type() == torch::kHalf ? -65504.0 : -1e30;
    scores = scores.masked_fill(forbidden, fill);
  }
  auto context = torch::matmul(torch::softmax(scores, -1), v);
  return context.transpose(1, 2).reshape({q_rows.size(0), q_rows.size(1), d});
}

// splitmix64, seeded once per call from torch's default CPU generator, so torch::manual_seed
// and the generator state saved in checkpoints still determine every mask.
class MaskBits {
 public:
  MaskBits() {
    auto generator = at::detail::getDefaultCPUGenerator();
    std::lock_guard<std::mutex> lock(generator.mutex());
    state_ = generator.get<at::CPUGeneratorImpl>()->random64();
  }
  uint64_t next() {
    uint64_t z = (state_ += 0x9E3779B97F4A7C15ull);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
  }

 private:
  uint64_t state_;
};

// keep[i] = 1 with probability 1 - p (16 random bits per element).
torch::Tensor keep_mask(int64_t n, double p) {
  auto keep = torch::empty({n}, torch::kUInt8);
  uint8_t* out = keep.data_ptr<uint8_t>();
  const uint32_t threshold = philox::keep_threshold(p);
  MaskBits bits;
  for (int64_t i = 0; i < n; i += 4) {
    uint64_t r = bits.next();
    for (int64_t j = i; j < std::min(n, i + 4); ++j, r >>= 16) {
      out[j] = (r & 0xFFFF) >= threshold ? 1 : 0;
    }
  }
  return keep;
}

template <typename T>
void masked_scale_add(const T* x, const uint8_t* keep, T scale, const T* residual, T* out,
                      int64_t n) {
  for (int64_t i = 0; i < n; ++i) {
    out[i] = (residual ? residual[i] : T(0)) + (keep[i] ? x[i] * scale : T(0));
  }
}

class DropoutAddFunction : public torch::autograd::Function<DropoutAddFunction> {
 public:
  // has_residual false: `residual` is a placeholder (Function inputs must be defined tensors).
  static torch::Tensor forward(AutogradContext* ctx, const torch::Tensor& x,
                               const torch::Tensor& residual, double p, bool has_residual) {
    const auto input = x.contiguous();
    const auto res = has_residual ? residual.contiguous() : torch::Tensor();
    auto keep = keep_mask(input.numel(), p);
    auto out = torch::empty_like(input);
    AT_DISPATCH_FLOATING_TYPES(input.scalar_type(), "dropout_add", [&] {
      masked_scale_add<scalar_t>(input.data_ptr<scalar_t>(), keep.data_ptr<uint8_t>(),
                                 static_cast<scalar_t>(1.0 / (1.0 - p)),
                                 res.defined() ? res.data_ptr<scalar_t>() : nullptr,
                                 out.data_ptr<scalar_t>(), input.numel());
    });
    ctx->save_for_backward({keep});
    ctx->saved_data["scale"] = 1.0 / (1.0 - p);
    ctx->saved_data["residual"] = has_residual;
    return out;
  }

  static variable_list backward(AutogradContext* ctx, variable_list grads) {
    const auto keep = ctx->get_saved_variables()[0];
    const auto grad = grads[0].contiguous();
    auto dx = torch::empty_like(grad);
    AT_DISPATCH_FLOATING_TYPES(grad.scalar_type(), "dropout_add_backward", [&] {
      masked_scale_add<scalar_t>(grad.data_ptr<scalar_t>(), keep.data_ptr<uint8_t>(),
                                 static_cast<scalar_t>(ctx->saved_data["scale"].toDouble()),
                                 nullptr, dx.data_ptr<scalar_t>(), grad.numel());
    });
    return {dx, ctx->saved_data["residual"].toBool() ? grads[0] : torch::Tensor(), torch::Tensor(),
            torch::Tensor()};
  }
};

}  // namespace

torch::Tensor linear_rows(const torch::Tensor& x, const torch::Tensor& weight,
                          const torch::Tensor& bias) {
  auto rows = torch::addmm(bias, x.reshape({-1, x.size(-1)}), weight.t());
  auto sizes = x.sizes().vec();
  sizes.back() = weight.size(0);
  return rows.view(sizes);
}

// bf16 projections (CPU autocast) go through the float kernel: attention is a few % of the
// products, and its softmax wants float anyway.
torch::Tensor float_if_cpu_bf16(const torch::Tensor& t) {
  return t.defined() && t.is_cpu() && t.scalar_type() == torch::kBFloat16 ? t.to(torch::kFloat) : t;
}

torch::Tensor fused_attention(const torch::Tensor& q_in, const torch::Tensor& kv_in, int64_t heads,
                              const AttentionMask& mask) {
  const auto q_rows = float_if_cpu_bf16(q_in), kv = float_if_cpu_bf16(kv_in);
  if (!cpu_kernel_applies(q_rows)) return attention_with_tensor_ops(q_rows, kv, heads, mask);
  const auto pad = mask.key_pad.defined() ? mask.key_pad.to(torch::kBool).contiguous()
                                          : torch::empty({0}, torch::kBool);
  const auto q = q_rows.contiguous();
  if (mask.per_sentence && !torch::GradMode::is_enabled()) {
    const auto& kv_rows = kv.defined() ? kv.contiguous() : q;
    const Geometry g = geometry(q, kv_rows, !kv.defined(), heads, mask.causal);
    auto out = torch::empty({g.batch, g.q_len, g.d()}, q.options());
    AT_DISPATCH_FLOATING_TYPES(q.scalar_type(), "fused_attention", [&] {
      attention_forward_per_sentence<scalar_t>(q.data_ptr<scalar_t>(), kv_rows.data_ptr<scalar_t>(),
                                               pad.numel() > 0 ? pad.data_ptr<bool>() : nullptr, g,
                                               !kv.defined(), out.data_ptr<scalar_t>());
    });
    return out;
  }
  return AttentionFunction::apply(q, kv.defined() ? kv.contiguous() : q, pad, heads, mask.causal,
                                  !kv.defined());
}

torch::Tensor cached_attention(const torch::Tensor& q, const torch::Tensor& kv_cache, int64_t len,
                               int64_t heads) {
  const int64_t rows = q.size(0), d = q.size(1);
  if (!cpu_kernel_applies(q) || q.stride(1) != 1 || !kv_cache.is_contiguous() ||
      kv_cache.scalar_type() != q.scalar_type()) {
    auto out = attention_with_tensor_ops(q.reshape({rows, 1, d}), kv_cache.narrow(1, 0, len), heads,
                                         AttentionMask{});
    return out.view({rows, d});
  }
  const Geometry g{rows,  1, len, heads, d / heads,   q.stride(0),
                   2 * d, 0, d,   false, q.stride(0), kv_cache.size(1) * 2 * d};
  auto out = torch::empty({rows, d}, q.options());
  AT_DISPATCH_FLOATING_TYPES(q.scalar_type(), "cached_attention", [&] {
    attention_forward<scalar_t>(q.data_ptr<scalar_t>(), kv_cache.data_ptr<scalar_t>(), nullptr, g,
                                out.data_ptr<scalar_t>());
  });
  return out;
}

torch::Tensor dropout_add(const torch::Tensor& x_in, double p, bool training,
                          const torch::Tensor& residual) {
  // A bf16 sublayer output (autocast) joins the residual stream in the stream's precision.
  const auto x = residual.defined() && residual.scalar_type() != x_in.scalar_type()
                     ? x_in.to(residual.scalar_type())
                     : x_in;
  if (!training || p <= 0) return residual.defined() ? residual + x : x;
  if (!cpu_kernel_applies(x) || (residual.defined() && residual.sizes() != x.sizes())) {
    auto dropped = torch::dropout(x, p, true);
    return residual.defined() ? residual + dropped : dropped;
  }
  return DropoutAddFunction::apply(
      x, residual.defined() ? residual : torch::empty({0}, x.options()), p, residual.defined());
}

}  // namespace tandem::kernels
