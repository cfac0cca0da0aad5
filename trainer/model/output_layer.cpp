#include "trainer/model/output_layer.h"

#include "trainer/kernels/fused/ops.h"
#include "trainer/model/adapter.h"

namespace tandem::model {

OutputProjectionImpl::OutputProjectionImpl(const OutputProjectionOptions& options) {
  if (options.own_weight) {
    weight_ = register_parameter("weight", torch::empty({options.vocab_size, options.d_model}));
    torch::nn::init::xavier_uniform_(weight_);
  }
  bias_ = register_parameter("bias", torch::zeros({options.vocab_size}));
}

torch::Tensor OutputProjectionImpl::forward(const torch::Tensor& x,
                                            const torch::Tensor& tied_weight) {
  return frozen_ ? (*frozen_)(x) : kernels::linear_rows(x, weight_for(weight(tied_weight), x), bias_);
}

void OutputProjectionImpl::freeze(const torch::Tensor& tied_weight,
                                  kernels::InferencePrecision precision) {
  frozen_ = std::make_shared<const kernels::FrozenLinear>(weight(tied_weight), bias_, precision);
}

TokenLoss OutputProjectionImpl::loss(const torch::Tensor& x, const torch::Tensor& tied_weight,
                                     const torch::Tensor& targets, double label_smoothing) {
  return projected_token_loss(x, weight(tied_weight), bias_, targets, label_smoothing);
}

}  // namespace tandem::model
