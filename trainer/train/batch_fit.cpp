#include "trainer/train/batch_fit.h"

#include <algorithm>
#include <cstdio>
#include <stdexcept>

#include "trainer/checkpoint/checkpoint.h"
#include "trainer/common/log.h"
#include "trainer/common/token_ids.h"
#include "trainer/config/config.h"
#include "trainer/model/autocast.h"

#ifdef TANDEM_TORCH_CUDA
#include <c10/cuda/CUDACachingAllocator.h>
#include <torch/cuda.h>
#endif

namespace tandem::train {
namespace {

// data.max_tokens of the run that wrote `path`, or 0 when it cannot be read here (the resume then
// reports the file's problem itself).
int64_t checkpoint_max_tokens(const std::string& path) {
  try {
    const auto saved = config::parse_config(checkpoint::load_description(path).config_yaml, path);
    return saved.data.max_tokens > 0 ? saved.data.max_tokens : 0;
  } catch (const std::exception&) {
    return 0;
  }
}

// The training split's longest padded sentence (max(src, tgt) + 1), within the model's positions.
int64_t longest_sentence(const data::Corpus& corpus, int64_t max_positions) {
  const auto lengths = corpus.padded_lengths("train");
  const int64_t longest = lengths.empty() ? 1 : *std::max_element(lengths.begin(), lengths.end());
  return std::clamp<int64_t>(longest, 1, max_positions);
}

void release_gradients(model::Transformer& model) {
  for (auto& p : model->parameters()) p.mutable_grad() = torch::Tensor();
}

void empty_device_cache() {
#ifdef TANDEM_TORCH_CUDA
  c10::cuda::CUDACachingAllocator::emptyCache();
#endif
}

}  // namespace

int64_t largest_fitting(int64_t max, int64_t min, const std::function<bool(int64_t)>& fits) {
  for (int64_t tokens = max; tokens >= min && tokens > 0; tokens /= 2) {
    if (fits(tokens)) return tokens;
  }
  return 0;
}

bool step_fits(model::Transformer& model, const runtime::DeviceChoice& device, int64_t tokens,
               int64_t length, int64_t vocab_size) {
  const int64_t rows = std::max<int64_t>(1, tokens / length);
  bool fits = true;
  empty_device_cache();
  try {
    // Token ids from a counter (no random generator is touched): every one a real word, no
    // padding; the same rows serve as source, decoder input and targets.
    const int64_t first = kEosId + 1, words = std::max<int64_t>(1, vocab_size - first);
    const auto ids = (torch::arange(rows * length, torch::kLong) % words + first)
                         .view({rows, length})
                         .to(device.device);
    model::TokenLoss loss;
    {
      model::AutocastGuard autocast(device.bf16, device.device);
      loss = model->loss(ids, ids, ids, 0.1);
    }
    loss.loss_sum.backward();
#ifdef TANDEM_TORCH_CUDA
    if (device.device.is_cuda()) torch::cuda::synchronize();
#endif
  } catch (const c10::OutOfMemoryError&) {
    fits = false;
  }
  release_gradients(model);
  empty_device_cache();
  return fits;
}

int64_t fit_max_tokens(model::Transformer& model, const runtime::DeviceChoice& device,
                       const data::Corpus& corpus, const std::string& resume_path,
                       parallel::Communicator& comm) {
  const auto say = [&](int64_t tokens, const std::string& how) {
    if (comm.rank() == 0) {
      log::info("data.max_tokens auto: " + std::to_string(tokens) + " tokens per rank (" + how +
                ")");
    }
    return tokens;
  };
  if (!resume_path.empty()) {
    std::string saved = comm.rank() == 0 ? std::to_string(checkpoint_max_tokens(resume_path)) : "";
    const int64_t tokens = std::stoll(comm.broadcast_bytes(saved, 0));
    if (tokens > 0) return say(tokens, "as the run in " + resume_path + " had it");
  }
  if (!device.device.is_cuda()) return say(kCpuAutoTokens, "on a CPU");
  const int64_t length = longest_sentence(corpus, model->options().max_positions);
  const int64_t vocab = corpus.vocab().size();
  const int64_t mine = largest_fitting(kFitMaxTokens, kFitMinTokens, [&](int64_t tokens) {
    return step_fits(model, device, tokens + tokens / 8, length, vocab);
  });
  int64_t tokens = mine;
  for (const uint64_t other : comm.all_gather(static_cast<uint64_t>(mine))) {
    tokens = std::min(tokens, static_cast<int64_t>(other));
  }
  if (tokens == 0) {
    throw std::runtime_error("data.max_tokens auto: not even " + std::to_string(kFitMinTokens) +
                             " tokens of the corpus's longest (" + std::to_string(length) +
                             "-token) sentences fit in the memory of " + device.description +
                             (mine > 0 ? " on another rank" : "") +
                             "; set data.max_tokens to a number");
  }
  char how[200];
  std::snprintf(how, sizeof how,
                "the largest of %lld, %lld, ... %lld whose step on %lld-token sentences fits in %s "
                "on every rank",
                static_cast<long long>(kFitMaxTokens), static_cast<long long>(kFitMaxTokens / 2),
                static_cast<long long>(kFitMinTokens), static_cast<long long>(length),
                device.description.c_str());
  return say(tokens, how);
}

}  // namespace tandem::train
