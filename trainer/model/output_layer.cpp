#include "trainer/model/output_layer.h"

namespace tandem::model {

OutputProjectionImpl::OutputProjectionImpl(const OutputProjectionOptions& options) {
  if (options.own_weight) {
    weight_ = register_parameter("weight", torch::empty({options.vocab_size, options.d_model}));
    torch::nn::init::xavier_uniform_(weight_);
  }
  bias_ = register_parameter("bias", torch::zeros({options.vocab_size}));
}

torch::Tensor OutputProjectionImpl::forward(const torch::Tensor& x, const HeldWeight& tied_weight) {
  return frozen_ ? (*frozen_)(x) : base_linear(x, weight(tied_weight), bias_);
}

void OutputProjectionImpl::freeze(const HeldWeight& tied_weight,
                                  kernels::InferencePrecision precision) {
  frozen_ = std::make_shared<const kernels::FrozenLinear>(weight(tied_weight).as(torch::kFloat),
                                                          bias_, precision);
  precision_ = precision;
}

std::shared_ptr<const RestrictedOutput> OutputProjectionImpl::restricted(
    const HeldWeight& tied_weight, const torch::Tensor& ids) const {
  return std::make_shared<const RestrictedOutput>(ids, weight(tied_weight).as(torch::kFloat), bias_,
                                                  precision_);
}

RestrictedOutput::RestrictedOutput(const torch::Tensor& ids, const torch::Tensor& weight,
                                   const torch::Tensor& bias,
                                   std::optional<kernels::InferencePrecision> precision)
    : ids_(ids.to(weight.device(), torch::kLong)) {
  torch::NoGradGuard no_grad;
  auto rows = weight.index_select(0, ids_).contiguous();
  auto row_bias = bias.index_select(0, ids_).contiguous();
  if (precision) {
    frozen_.emplace(rows, row_bias, *precision);
  } else {
    weight_ = rows;
    bias_ = row_bias;
  }
}

torch::Tensor RestrictedOutput::operator()(const torch::Tensor& x) const {
  return frozen_ ? (*frozen_)(x) : torch::addmm(bias_, x, weight_.t());  // [rows, n]
}

TokenLoss OutputProjectionImpl::loss(const torch::Tensor& x, const HeldWeight& tied_weight,
                                     const torch::Tensor& targets, double label_smoothing) {
  return projected_token_loss(x, weight(tied_weight), bias_, targets, label_smoothing);
}

}  // namespace tandem::model
