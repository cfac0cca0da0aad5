#include "trainer/dist/gradient_reducer.h"

namespace tandem::dist {

GradientReducer::GradientReducer(std::vector<torch::Tensor> params, Communicator& comm)
    : params_(std::move(params)), comm_(comm) {
  int64_t total = 0;
  for (const auto& p : params_) total += p.numel();
  flat_ = torch::empty({total}, params_.empty() ? torch::kFloat32 : params_.front().scalar_type());
}

void GradientReducer::all_reduce(double scale) {
  torch::NoGradGuard no_grad;
  int64_t offset = 0;
  for (auto& p : params_) {
    auto slice = flat_.narrow(0, offset, p.numel());
    if (p.grad().defined()) {
      slice.copy_(p.grad().reshape({-1}));
    } else {
      slice.zero_();
    }
    offset += p.numel();
  }
  comm_.all_reduce_sum(flat_);
  flat_.mul_(scale);
  offset = 0;
  for (auto& p : params_) {
    auto slice = flat_.narrow(0, offset, p.numel()).view(p.sizes());
    if (p.grad().defined()) {
      p.mutable_grad().copy_(slice);
    } else {
      p.mutable_grad() = slice.clone();
    }
    offset += p.numel();
  }
}

}  // namespace tandem::dist
