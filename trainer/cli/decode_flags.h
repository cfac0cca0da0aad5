// The decoding flags tandem-decode and tandem-eval share, so both translate with the same options
// and defaults (those of decode::DecodeOptions) and describe them alike in --help: the checkpoints
// (one, or an ensemble), the choice of their weights, and the decoding threads.
#pragma once

#include <torch/cuda.h>
#include <torch/torch.h>

#include <CLI/CLI.hpp>
#include <cstdio>
#include <string>
#include <utility>
#include <vector>

#include "trainer/cli/language_flags.h"
#include "trainer/cli/one_blas_thread.h"
#include "trainer/cli/tool_main.h"
#include "trainer/decode/beam.h"
#include "trainer/kernels/cpu/cpu_path.h"
#include "trainer/model_io/model_io.h"
#include "trainer/runtime/cpu_runtime.h"
#include "trainer/runtime/device.h"

namespace tandem::cli {

inline void add_decode_flags(CLI::App& app, decode::DecodeOptions& options) {
  app.add_option("--beam", options.beam_size,
                 "beam size (Vaswani et al. 2017 used 4); 1 is greedy decoding")
      ->capture_default_str()
      ->check(kPositive);
  app.add_option(
         "--lenpen", options.length_penalty,
         "length penalty alpha: finished hypotheses are ranked by log-probability / "
         "length^alpha, length counting EOS (fairseq's --lenpen; 1 = mean per token, 0 = sum)")
      ->capture_default_str();
  app.add_option("--batch-tokens", options.batch_tokens, "source tokens per decoding batch")
      ->capture_default_str()
      ->check(kPositive);
  app.add_option("--max-len-a", options.max_len_a,
                 "at most a * source length + b decoding steps (an emitted EOS is one; source "
                 "length counts its EOS)")
      ->capture_default_str();
  app.add_option("--max-len-b", options.max_len_b, "see --max-len-a")->capture_default_str();
  app.add_option("--min-len", options.min_len,
                 "tokens a translation has at least before EOS may end it (fairseq's --min-len, "
                 "CTranslate2's min_decoding_length); 0 allows the empty translation")
      ->capture_default_str()
      ->check(kNonNegative);
}

// --raw-weights: the checkpoint's weights as training left them rather than their moving average.
inline void add_weights_flag(CLI::App& app, checkpoint::Weights& weights,
                             Task task = Task::kTranslate) {
  app.add_flag_callback(
      "--raw-weights", [&weights] { weights = checkpoint::Weights::kRaw; },
      std::string(task == Task::kScore ? "score" : "translate") +
          " with the weights as the last training step left them, not their exponential "
          "moving average (the default when the checkpoint holds one: train.ema_decay > 0)");
}

// --device: where the models run (runtime::inference_device); the CPU unless asked.
inline void add_device_flag(CLI::App& app, std::string& device) {
  app.add_option("--device", device,
                 "cpu, cuda (GPU 0), cuda:N, or auto (GPU 0 when one is visible, else the CPU)")
      ->capture_default_str();
}

// "cuda" or "cpu": the kind of device --device gives (auto: where LibTorch sees a GPU).
inline std::string device_kind(const std::string& flag) {
  if (flag == "auto") return torch::cuda::is_available() ? "cuda" : "cpu";
  return flag.rfind("cuda", 0) == 0 ? "cuda" : flag;
}

// The --device of one of `local_size` ranks of a job on its host: cuda, or auto where LibTorch sees
// GPUs, becomes the rank's own GPU (runtime::gpu_for_local_rank: one rank per GPU); any other
// choice stays as given.
inline std::string rank_device(const std::string& flag, int local_rank, int local_size) {
  if (local_size <= 1 || device_kind(flag) != "cuda" || flag.rfind("cuda:", 0) == 0 ||
      !torch::cuda::is_available()) {
    return flag;
  }
  const auto visible = static_cast<int>(torch::cuda::device_count());
  return "cuda:" + std::to_string(runtime::gpu_for_local_rank(local_rank, local_size, visible));
}

// What to translate (or score) with and how: --checkpoint (repeatable: an ensemble), --weights (one per
// checkpoint), --raw-weights, --threads, --precision and --device.
struct ModelFlags {
  std::vector<std::string> checkpoints;
  std::vector<double> weights;
  checkpoint::Weights which = checkpoint::Weights::kAverage;
  int threads = 0;                 // --threads; 0 = one per CPU this process may use (cpu_count)
  std::string precision = "fp32";  // --precision: fp32 or int8
  std::string device = "cpu";      // --device
};

// Returns the --checkpoint option (tandem-decode requires it).
inline CLI::Option* add_model_flags(CLI::App& app, ModelFlags& flags,
                                    Task task = Task::kTranslate) {
  const bool score = task == Task::kScore;
  auto* checkpoint = app.add_option(
      "--checkpoint", flags.checkpoints,
      std::string("checkpoint file (*.h5); repeat it to ") + (score ? "score" : "translate") +
          " with an ensemble of checkpoints (they must share one vocabulary), whose "
          "log-probabilities are averaged at every step");
  app.add_option("--weights", flags.weights,
                 "the ensemble's weights, one per --checkpoint in the same order (scaled to sum "
                 "to 1); equal by default")
      ->check(kPositive);
  add_weights_flag(app, flags.which, task);
  app.add_option(
         "--threads", flags.threads,
         std::string("sentence batches ") + (score ? "scored" : "translated") +
             " at once, each on its own thread (0: one per CPU this process may use, one on a "
             "GPU)")
      ->check(kNonNegative)
      ->capture_default_str();
  app.add_option(
         "--precision", flags.precision,
         "fp32: on the CPU the matrix products' weights are packed once at load for Tandem's "
         "AVX2 or AVX-512 loops; or int8: quantized once at load (one scale per row) and run "
         "by Tandem's AVX2, AVX-VNNI or AVX-512 VNNI loops (LibTorch's int8 kernels without "
         "AVX2); close to fp32 in quality, 1.3-2.2x its speed in docs/configs.md's runs "
         "(TANDEM_CPU_KERNELS forces a lower path)")
      ->check(CLI::IsMember({"fp32", "int8"}))
      ->capture_default_str();
  add_device_flag(app, flags.device);
  return checkpoint;
}

// A number as a job's record keeps it: 9 significant digits.
inline std::string recorded_number(double value) {
  char text[32];
  std::snprintf(text, sizeof text, "%.9g", value);
  return text;
}

// What of `flags` shapes a file job's output, for its record (bulk/job_record.h): the precision,
// the kind of device, which weights and the ensemble's weights; not the threads.
inline std::vector<std::pair<std::string, std::string>> recorded_model_options(
    const ModelFlags& flags) {
  std::vector<std::pair<std::string, std::string>> options = {
      {"--precision", flags.precision},
      {"--device", device_kind(flags.device)},
      {"--raw-weights", flags.which == checkpoint::Weights::kRaw ? "yes" : "no"}};
  std::string weights;
  for (const double w : flags.weights) weights += (weights.empty() ? "" : " ") + recorded_number(w);
  if (!weights.empty()) options.emplace_back("--weights", weights);
  return options;
}

// int8 runs on the CPU only (Tandem's own loops or LibTorch's quantized CPU kernels).
inline void check_precision_on(const std::string& precision, const torch::Device& device) {
  if (precision == "int8" && !device.is_cpu()) {
    throw std::invalid_argument(
        "--precision int8 runs on the CPU only (its int8 loops are CPU "
        "kernels); give --device cpu, or fp32 on the GPU");
  }
}

// Puts a loaded model on `device`; on the CPU its matrix products' weights are first prepared once
// in `precision` (fp32 or int8: Transformer::freeze), which decoding never changes.
inline void place_model(model::Transformer& model, const std::string& precision,
                        const torch::Device& device) {
  if (device.is_cpu()) {
    model->freeze(precision == "int8" ? kernels::InferencePrecision::kInt8
                                      : kernels::InferencePrecision::kFp32);
  }
  model->to(device);  // in place
}

// Loads the checkpoints onto --device and sets the process up for decoding: `--threads` workers
// with one intra-op thread each (more threads in one batch's matrix products scale poorly on CPUs).
inline checkpoint::InferenceEnsemble load_models(const ModelFlags& flags,
                                            decode::DecodeOptions& options) {
  if (flags.checkpoints.empty()) throw std::invalid_argument("give --checkpoint; see --help");
  if (!flags.weights.empty() && flags.weights.size() != flags.checkpoints.size()) {
    throw std::invalid_argument("--weights has " + std::to_string(flags.weights.size()) +
                                " values for " + std::to_string(flags.checkpoints.size()) +
                                " --checkpoint; give one per checkpoint");
  }
  kernels::cpu_path();  // TANDEM_CPU_KERNELS: a path this CPU executes, or exit 2
  const torch::Device device = runtime::inference_device(flags.device);
  check_precision_on(flags.precision, device);
  options.threads = flags.threads > 0 ? flags.threads : device.is_cpu() ? cpu_count() : 1;
  runtime::configure_cpu_runtime({1, 0, runtime::Workload::kDecoding});
  auto models = checkpoint::load_ensemble(flags.checkpoints, flags.weights, flags.which);
  // In place: the ensemble holds the same modules.
  for (auto& member : models.members) place_model(member.model, flags.precision, device);
  return models;
}

}  // namespace tandem::cli
