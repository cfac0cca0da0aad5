#include "trainer/kernels/cuda/lt_gradients.h"

#include <cstdint>
#include <cstdlib>
#include <stdexcept>
#include <string>

#ifdef TANDEM_CUBLASLT
#include <c10/cuda/CUDAStream.h>
#include <cublasLt.h>
#include <dlfcn.h>
#endif

namespace tandem::model {

bool epilogue_bias_gradients_chosen() {
  static const bool chosen = [] {
    const char* choice = std::getenv("TANDEM_BIAS_GRADIENTS");
    const std::string name = choice ? choice : "";
    if (name.empty() || name == "kernel") return false;
    if (name != "epilogue") {
      throw std::invalid_argument("TANDEM_BIAS_GRADIENTS=" + name +
                                  ": expected kernel or epilogue");
    }
    return true;
  }();
  return chosen;
}

#ifdef TANDEM_CUBLASLT
namespace {

// cuBLASLt's functions, found in the process (LibTorch's CUDA library loads cuBLASLt) rather than
// linked: the build then adds no cuBLASLt of its own beside LibTorch's, whatever toolkit it finds.
struct LtApi {
  decltype(&cublasLtCreate) create;
  decltype(&cublasLtMatmulDescCreate) desc_create;
  decltype(&cublasLtMatmulDescDestroy) desc_destroy;
  decltype(&cublasLtMatmulDescSetAttribute) desc_set;
  decltype(&cublasLtMatrixLayoutCreate) layout_create;
  decltype(&cublasLtMatrixLayoutDestroy) layout_destroy;
  decltype(&cublasLtMatmulPreferenceCreate) preference_create;
  decltype(&cublasLtMatmulPreferenceDestroy) preference_destroy;
  decltype(&cublasLtMatmulPreferenceSetAttribute) preference_set;
  decltype(&cublasLtMatmulAlgoGetHeuristic) heuristic;
  decltype(&cublasLtMatmul) matmul;
  cublasLtHandle_t handle = nullptr;
};

template <typename F>
bool find(F& f, const char* name) {
  f = reinterpret_cast<F>(dlsym(RTLD_DEFAULT, name));
  return f != nullptr;
}

// The functions and a handle, or nullptr where the process has no cuBLASLt.
const LtApi* lt_api() {
  static const LtApi* api = []() -> const LtApi* {
    static LtApi found{};
    const bool all = find(found.create, "cublasLtCreate") &&
                     find(found.desc_create, "cublasLtMatmulDescCreate") &&
                     find(found.desc_destroy, "cublasLtMatmulDescDestroy") &&
                     find(found.desc_set, "cublasLtMatmulDescSetAttribute") &&
                     find(found.layout_create, "cublasLtMatrixLayoutCreate") &&
                     find(found.layout_destroy, "cublasLtMatrixLayoutDestroy") &&
                     find(found.preference_create, "cublasLtMatmulPreferenceCreate") &&
                     find(found.preference_destroy, "cublasLtMatmulPreferenceDestroy") &&
                     find(found.preference_set, "cublasLtMatmulPreferenceSetAttribute") &&
                     find(found.heuristic, "cublasLtMatmulAlgoGetHeuristic") &&
                     find(found.matmul, "cublasLtMatmul");
    if (!all || found.create(&found.handle) != CUBLAS_STATUS_SUCCESS) return nullptr;
    return &found;
  }();
  return api;
}

void check(cublasStatus_t status, const char* call) {
  if (status != CUBLAS_STATUS_SUCCESS) {
    throw std::runtime_error(std::string("cuBLASLt: ") + call + " failed with status " +
                             std::to_string(static_cast<int>(status)));
  }
}

// cuBLASLt's descriptors, destroyed with their holder.
struct Descriptors {
  const LtApi& lt;
  cublasLtMatmulDesc_t product = nullptr;
  cublasLtMatrixLayout_t a = nullptr, b = nullptr, d = nullptr;
  cublasLtMatmulPreference_t preference = nullptr;
  explicit Descriptors(const LtApi& api) : lt(api) {}
  Descriptors(const Descriptors&) = delete;
  Descriptors& operator=(const Descriptors&) = delete;
  ~Descriptors() {
    if (preference) lt.preference_destroy(preference);
    if (d) lt.layout_destroy(d);
    if (b) lt.layout_destroy(b);
    if (a) lt.layout_destroy(a);
    if (product) lt.desc_destroy(product);
  }
  template <typename T>
  void set(cublasLtMatmulDescAttributes_t attribute, const T& value) {
    check(lt.desc_set(product, attribute, &value, sizeof(value)), "cublasLtMatmulDescSetAttribute");
  }
};

// The products' scratch: LibTorch's default for cuBLASLt on Hopper.
constexpr int64_t kWorkspaceBytes = 32 << 20;

}  // namespace

bool weight_and_bias_gradients(const torch::Tensor& g, const torch::Tensor& x, torch::Tensor& dw,
                               torch::Tensor& db) {
  if (!g.is_cuda() || g.dim() != 2 || x.dim() != 2 || g.scalar_type() != torch::kBFloat16 ||
      x.scalar_type() != torch::kBFloat16 || !g.is_contiguous() || !x.is_contiguous() ||
      g.device() != x.device() || g.size(0) != x.size(0) || g.size(0) == 0) {
    return false;
  }
  const int64_t rows = g.size(0), out = g.size(1), in = x.size(1);
  // 16-byte rows and pointers, as the fast kernels want (and the layers here have).
  if (out % 8 != 0 || in % 8 != 0 || reinterpret_cast<uintptr_t>(g.data_ptr()) % 16 != 0 ||
      reinterpret_cast<uintptr_t>(x.data_ptr()) % 16 != 0) {
    return false;
  }
  // Column-major, as cuBLASLt reads: D [in, out] (dw row-major) = A [in, rows] (x row-major, N)
  // · op(B) [rows, out] (g row-major is [out, rows] column-major, T); BGRADB sums op(B) over the
  // product's k (the rows) into a vector as long as D has columns (out): db.
  auto options = g.options().dtype(torch::kFloat);
  auto weights = torch::empty({out, in}, options), biases = torch::empty({out}, options);
  const LtApi* lt = lt_api();
  if (lt == nullptr) return false;
  Descriptors desc(*lt);
  check(lt->desc_create(&desc.product, CUBLAS_COMPUTE_32F, CUDA_R_32F), "cublasLtMatmulDescCreate");
  desc.set(CUBLASLT_MATMUL_DESC_TRANSA, CUBLAS_OP_N);
  desc.set(CUBLASLT_MATMUL_DESC_TRANSB, CUBLAS_OP_T);
  desc.set(CUBLASLT_MATMUL_DESC_EPILOGUE, CUBLASLT_EPILOGUE_BGRADB);
  desc.set(CUBLASLT_MATMUL_DESC_BIAS_POINTER, biases.data_ptr());
  check(lt->layout_create(&desc.a, CUDA_R_16BF, in, rows, in), "layout of x");
  check(lt->layout_create(&desc.b, CUDA_R_16BF, out, rows, out), "layout of g");
  check(lt->layout_create(&desc.d, CUDA_R_32F, in, out, in), "layout of dw");
  const auto workspace = torch::empty({kWorkspaceBytes}, g.options().dtype(torch::kUInt8));
  const size_t workspace_size = kWorkspaceBytes;
  check(lt->preference_create(&desc.preference), "cublasLtMatmulPreferenceCreate");
  check(lt->preference_set(desc.preference, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES,
                           &workspace_size, sizeof(workspace_size)),
        "cublasLtMatmulPreferenceSetAttribute");
  cublasLtMatmulHeuristicResult_t found{};
  int count = 0;
  const cublasStatus_t status = lt->heuristic(lt->handle, desc.product, desc.a, desc.b, desc.d,
                                              desc.d, desc.preference, 1, &found, &count);
  if (status != CUBLAS_STATUS_SUCCESS || count == 0) return false;  // no such kernel here
  const float one = 1.f, zero = 0.f;
  const auto stream = c10::cuda::getCurrentCUDAStream(g.device().index()).stream();
  check(lt->matmul(lt->handle, desc.product, &one, x.data_ptr(), desc.a, g.data_ptr(), desc.b,
                   &zero, weights.data_ptr(), desc.d, weights.data_ptr(), desc.d, &found.algo,
                   workspace.data_ptr(), workspace_size, stream),
        "cublasLtMatmul");
  dw = weights;
  db = biases;
  return true;
}

#else  // no cuBLASLt in this build

bool weight_and_bias_gradients(const torch::Tensor&, const torch::Tensor&, torch::Tensor&,
                               torch::Tensor&) {
  return false;
}

#endif

}  // namespace tandem::model
