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
}

TokenLoss OutputProjectionImpl::loss(const torch::Tensor& x, const HeldWeight& tied_weight,
                                     const torch::Tensor& targets, double label_smoothing) {
  return projected_token_loss(x, weight(tied_weight), bias_, targets, label_smoothing);
}

}  // namespace tandem::model
