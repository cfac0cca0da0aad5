#include "trainer/model/transformer.h"

#include <cmath>
#include <stdexcept>
#include <string>

#include "trainer/model/autocast.h"

namespace tandem::model {
namespace {

void require(bool ok, const std::string& field, double value, const std::string& expected) {
  if (!ok) {
    throw std::invalid_argument("TransformerOptions." + field + " = " + std::to_string(value) +
                                ": expected " + expected);
  }
}

void validate(const TransformerOptions& o) {
  require(o.vocab_size > 0, "vocab_size", o.vocab_size, "> 0");
  require(o.d_model > 0, "d_model", o.d_model, "> 0");
  require(o.heads > 0 && o.d_model % o.heads == 0, "heads", o.heads,
          "> 0 and dividing d_model (" + std::to_string(o.d_model) + ")");
  require(o.encoder_layers > 0, "encoder_layers", o.encoder_layers, "> 0");
  require(o.decoder_layers > 0, "decoder_layers", o.decoder_layers, "> 0");
  require(o.d_ff > 0, "d_ff", o.d_ff, "> 0");
  require(o.dropout >= 0 && o.dropout < 1, "dropout", o.dropout, "in [0, 1)");
  require(o.max_positions > 0, "max_positions", o.max_positions, "> 0");
  require(o.positions != PositionLayout::kFairseq || o.d_model >= 4, "d_model", o.d_model,
          ">= 4 with fairseq positions");
}

StackOptions stack_options(const TransformerOptions& o, int64_t layers) {
  return StackOptions{LayerOptions{o.d_model, o.heads, o.d_ff, o.dropout, o.pre_norm, o.activation},
                      layers, o.on_part_built, o.recompute_layers};
}

}  // namespace

namespace {

// fairseq's table (SinusoidalPositionalEmbedding.get_embedding) for positions 2 .. max_len + 1, in
// its float32 arithmetic: the weights a fairseq model was trained with, to the last bit that
// LibTorch's sin and cos give.
torch::Tensor fairseq_positions(int64_t max_len, int64_t d_model) {
  const int64_t half = d_model / 2;
  const double step = std::log(10000.0) / static_cast<double>(half - 1);
  const auto frequency = torch::exp(torch::arange(half, torch::kLong).to(torch::kFloat) * -step);
  const auto position = torch::arange(2, max_len + 2, torch::kLong).to(torch::kFloat).unsqueeze(1);
  const auto angle = position * frequency.unsqueeze(0);  // [max_len, half]
  auto pe = torch::zeros({max_len, d_model}, torch::kFloat);
  pe.slice(1, 0, half).copy_(angle.sin());
  pe.slice(1, half, 2 * half).copy_(angle.cos());
  return pe;
}

}  // namespace

torch::Tensor sinusoidal_positions(int64_t max_len, int64_t d_model, PositionLayout layout) {
  if (layout == PositionLayout::kFairseq) return fairseq_positions(max_len, d_model);
  // In double so that large positions keep their precision; float32 only at the end.
  auto position = torch::arange(max_len, torch::kDouble).unsqueeze(1);  // [max_len, 1]
  auto two_i = torch::arange(0, d_model, 2, torch::kDouble);            // [ceil(d/2)]
  auto angle = position / torch::pow(10000.0, two_i / static_cast<double>(d_model));
  const int64_t sines = angle.size(1), cosines = d_model / 2;
  auto pe = torch::empty({max_len, d_model}, torch::kDouble);
  if (layout == PositionLayout::kInterleaved) {
    pe.slice(1, 0, d_model, 2).copy_(angle.sin());
    pe.slice(1, 1, d_model, 2).copy_(angle.slice(1, 0, cosines).cos());
  } else {
    pe.slice(1, 0, sines).copy_(angle.sin());
    pe.slice(1, sines, d_model).copy_(angle.slice(1, 0, cosines).cos());
  }
  return pe.to(torch::kFloat);
}

TransformerImpl::TransformerImpl(const TransformerOptions& options) : options_(options) {
  validate(options);
  const auto built = [&](torch::nn::Module& part) {
    if (options.on_part_built) options.on_part_built(part);
  };
  src_embed_ =
      register_module("src_embed", torch::nn::Embedding(options.vocab_size, options.d_model));
  built(*src_embed_);
  if (!options.tie_embeddings) {
    tgt_embed_ =
        register_module("tgt_embed", torch::nn::Embedding(options.vocab_size, options.d_model));
    built(*tgt_embed_);
  }
  encoder_ = register_module("encoder", Encoder(stack_options(options, options.encoder_layers)));
  decoder_ = register_module("decoder", Decoder(stack_options(options, options.decoder_layers)));
  output_proj_ = register_module(
      "output_proj", OutputProjection(OutputProjectionOptions{options.d_model, options.vocab_size,
                                                              !options.tie_embeddings}));
  built(*output_proj_);
  positions_ = register_buffer(
      "positions", sinusoidal_positions(options.max_positions, options.d_model, options.positions));
  options_.on_part_built = nullptr;  // the parts are built: nothing holds on to the caller's hook
  if (!options.on_part_built) init_parameters();
}

void hollow_parameters(torch::nn::Module& module) {
  torch::NoGradGuard no_grad;
  for (auto& param : module.parameters(/*recurse=*/true)) {
    param.set_data(torch::zeros({1}, param.options()).expand(param.sizes()));
  }
}

void TransformerImpl::init_parameters() {
  torch::NoGradGuard no_grad;
  for (auto& module : modules(/*include_self=*/false)) {
    if (auto* linear = module->as<torch::nn::Linear>()) {
      torch::nn::init::xavier_uniform_(linear->weight);
      torch::nn::init::zeros_(linear->bias);
    } else if (auto* embedding = module->as<torch::nn::Embedding>()) {
      torch::nn::init::normal_(embedding->weight, 0.0, std::pow(options_.d_model, -0.5));
    }
  }
}

void TransformerImpl::freeze(kernels::InferencePrecision precision) {
  for (const auto& module : modules()) {
    if (auto* attention = module->as<MultiheadAttentionImpl>()) attention->freeze(precision);
    if (auto* ffn = module->as<FeedForwardImpl>()) ffn->freeze(precision);
  }
  output_proj_->freeze(tgt_weight(), precision);
  frozen_ = precision;
}

HeldWeight TransformerImpl::tgt_weight() const {
  const auto& embedding = options_.tie_embeddings ? src_embed_ : tgt_embed_;
  return held_weight(*embedding, embedding->weight);
}

torch::Tensor TransformerImpl::embed(const torch::Tensor& tokens, const HeldWeight& weight,
                                     int64_t offset) {
  int64_t len = tokens.size(1);
  if (offset + len > options_.max_positions) {
    throw std::invalid_argument(
        "Transformer: sequence length " + std::to_string(offset + len) +
        " exceeds model option max_positions = " + std::to_string(options_.max_positions));
  }
  const double scale = std::sqrt(static_cast<double>(options_.d_model));
  auto x = weight.lookup(tokens);
  const auto positions = positions_.slice(0, offset, offset + len);
  if (bf16_stream(x.device())) {  // cast once, then positions + scale * x in one pass
    x = torch::add(positions.to(torch::kBFloat16), x.to(torch::kBFloat16), scale);
  } else {
    if (x.scalar_type() != positions.scalar_type()) x = x.to(positions.scalar_type());  // bf16 base
    x = x * scale + positions;  // [batch, len, d_model]
  }
  return kernels::dropout_add(x, options_.dropout, is_training(), torch::Tensor());
}

torch::Tensor TransformerImpl::encode(const torch::Tensor& src) {
  return encoder_(embed(src, held_weight(*src_embed_, src_embed_->weight), 0),
                  kernels::AttentionMask{src.eq(kPadId), false});
}

torch::Tensor TransformerImpl::decoder_states(const torch::Tensor& tgt_in,
                                              const torch::Tensor& memory,
                                              const torch::Tensor& src,
                                              AttentionReadout* readout) {
  const kernels::AttentionMask self_mask{tgt_in.eq(kPadId), true};
  const kernels::AttentionMask cross_mask{src.eq(kPadId), false};
  return decoder_(embed(tgt_in, tgt_weight(), 0), memory, self_mask, cross_mask, readout);
}

torch::Tensor TransformerImpl::decode(const torch::Tensor& tgt_in, const torch::Tensor& memory,
                                      const torch::Tensor& src) {
  return output_proj_(decoder_states(tgt_in, memory, src), tgt_weight());  // [batch, len, vocab]
}

torch::Tensor TransformerImpl::forward(const torch::Tensor& src, const torch::Tensor& tgt_in) {
  return decode(tgt_in, encode(src), src);
}

TokenLoss TransformerImpl::loss(const torch::Tensor& src, const torch::Tensor& tgt_in,
                                const torch::Tensor& tgt_out, double label_smoothing,
                                const GuidedAlignment* guided) {
  const bool linked = guided != nullptr && guided->links.defined() && guided->links.size(0) > 0;
  AttentionReadout readout{linked ? guided->heads : AlignmentHeads{}, torch::Tensor()};
  TokenLoss loss =
      output_proj_->loss(decoder_states(tgt_in, encode(src), src, linked ? &readout : nullptr),
                         tgt_weight(), tgt_out, label_smoothing);
  if (!linked) return loss;
  // With shift, each target piece's links are read at the position that has it as input.
  const auto links =
      guided->heads.shift
          ? guided->links + torch::tensor({int64_t{0}, int64_t{1}, int64_t{0}},
                                          guided->links.options())
          : guided->links;
  const auto alignment = alignment_loss_sum(readout.log_probs, links, guided->link_weights);
  loss.loss_sum = loss.loss_sum + guided->weight * alignment.to(loss.loss_sum.scalar_type());
  loss.alignment_sum = alignment.detach().to(torch::kFloat64);
  return loss;
}

torch::Tensor TransformerImpl::cross_attention(const torch::Tensor& src,
                                               const torch::Tensor& tgt_in,
                                               const AlignmentHeads& heads) {
  AttentionReadout readout{heads, torch::Tensor()};
  decoder_states(tgt_in, encode(src), src, &readout);
  return readout.log_probs;
}

DecoderState TransformerImpl::start_decoding(const torch::Tensor& memory,
                                             const torch::Tensor& src) {
  DecoderState state(src.eq(kPadId));
  decoder_->start(state, memory);
  return state;
}

torch::Tensor TransformerImpl::decode_step(const torch::Tensor& tokens, DecoderState& state) {
  auto x = embed(tokens.view({-1, 1}), tgt_weight(), state.step);  // [rows, 1, d_model]
  auto h = decoder_->step(x.view({-1, options_.d_model}), state);
  ++state.step;
  if (state.output) return (*state.output)(h);  // [rows, shortlist ids]
  return output_proj_(h, tgt_weight());          // [rows, vocab]
}

void TransformerImpl::restrict_output(DecoderState& state, const torch::Tensor& ids) {
  state.output = output_proj_->restricted(tgt_weight(), ids);
}

}  // namespace tandem::model
