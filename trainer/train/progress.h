// Progress of training over a logging window: the line rank 0 prints and the JSONL record it
// writes (step, epoch, loss, perplexity, accuracy, lr, grad norm, target tokens/s, elapsed, ETA),
// and on a terminal a live line redrawn in place every step (log::status; TANDEM_PROGRESS).
#pragma once

#include <torch/torch.h>

#include <chrono>
#include <cstdint>
#include <functional>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "trainer/config/config.h"

namespace tandem::train {

// One optimizer step. What the host knows is a number; what the device computed stays there until
// a log step reads a whole window of steps at once (on a GPU, reading waits for the GPU).
struct StepStats {
  int64_t step = 0;
  double tgt_tokens = 0;   // all ranks
  double rank_tokens = 0;  // this rank's
  double lr = 0;
  torch::Tensor token_sums;  // float64 [summed NLL, correct predictions] over this rank's targets
  // float64 [directions, 3]: per direction [summed NLL, targets, correct] over this rank's
  // targets; undefined for a file of one direction
  torch::Tensor direction_sums;
  // float64 [summed alignment cross-entropy, aligned target positions] over this rank's pairs;
  // undefined without guided alignment (train.alignment.weight 0)
  torch::Tensor alignment_sums;
  torch::Tensor update;      // float64 [gradient norm, 1 where the update was skipped (a
                             // non-finite norm: no update on any rank) else 0]
};

// One direction's training figures over a log window (a file of several, tandem-prep --corpora).
struct DirectionProgress {
  std::string name;
  double loss = 0;      // mean NLL per target token (nats); 0 when the window had none of it
  double accuracy = 0;  // target-token accuracy
  double tokens = 0;    // target tokens, all ranks
};

struct ProgressRecord {
  int64_t step = 0;
  double epoch = 0;          // fractional epochs completed
  double loss = 0;           // mean NLL per target token over the window (nats)
  double perplexity = 0;
  double accuracy = 0;       // target-token accuracy over the window
  double lr = 0;
  double grad_norm = 0;      // mean over the window's steps
  int64_t skipped = 0;       // updates skipped in the window (non-finite gradient norm)
  int64_t last_skipped = 0;  // the last such step
  double tokens_per_s = 0;   // target tokens, all ranks
  double elapsed_s = 0;      // since this process started training
  double eta_s = -1;         // -1 when no step/time limit is set
  std::vector<DirectionProgress> directions;  // when the file holds several, else empty
  // Guided alignment: the mean alignment cross-entropy per aligned target position (nats);
  // -1 without it.
  double alignment_loss = -1;
  // "... | ETA 1m02s | align 0.8123 | by corpus: en-es 3.2143, es-en 3.4012" (align with guided
  // alignment, the last part with directions)
  std::string line() const;
  // With directions also loss_<name>, accuracy_<name> and tgt_tokens_<name> (TensorBoard:
  // train/loss_<name>, ...); with guided alignment, alignment_loss.
  nlohmann::json json() const;
};

// What the live line shows: the current window's loss and speed, and how far the run has come.
struct LiveView {
  int64_t step = 0;
  int64_t max_steps = 0;     // 0: no step limit (the step is shown alone)
  double epoch = 0;          // fractional epochs completed
  double loss = 0;           // mean NLL per target token since the last record (nats)
  double lr = 0;
  double tokens_per_s = 0;   // target tokens, all ranks
  double fraction = -1;      // of the run done, 0..1, by the nearest limit; -1 when none is set
  double eta_s = -1;         // -1 when no limit is set
  // "step 120/480 [###---------]  25% | ETA 1m02s | loss 3.2143 | 5321 tok/s | epoch 1.33 |
  //  lr 3.00e-04" (bar and ETA only when a limit gives an end), most important first: fields
  // that would reach past `width` columns are left out whole.
  std::string line(size_t width = std::string::npos) const;
};

class ProgressMeter {
 public:
  // Sums a tensor over all ranks in place (a collective); the default, for one process, does
  // nothing.
  using SumOverRanks = std::function<void(torch::Tensor&)>;

  // Throws std::invalid_argument for a bad TANDEM_PROGRESS (see log::progress_mode_from_env).
  // `directions`: the corpus file's direction names when it holds several (the steps then carry
  // StepStats::direction_sums in that order), else empty.
  ProgressMeter(const config::Config& config, int64_t start_step, SumOverRanks sum_over_ranks = {},
                std::vector<std::string> directions = {});
  ~ProgressMeter();  // erases the live line, e.g. when training ends by an exception
  // Adds the step's device figures to the window's on the device, without reading them.
  void add(const StepStats& stats);
  // The window's record; starts a new window. Reads the window from the device, summing the
  // ranks' loss figures first: every rank calls it at the same steps.
  ProgressRecord take(int64_t step, double epoch);
  // Updates skipped in the current window (not yet in a record) and the last one's step; reads
  // only figures every rank has (no collective), e.g. to report them when training ends.
  struct Skips {
    int64_t count = 0;
    int64_t last = 0;
  };
  Skips unreported_skips() const;
  // Rank 0 on a terminal: redraws the live line (at most every 100 ms); otherwise nothing.
  // Call once per step, after add() (and take(), when due).
  void show(int64_t step, double epoch);
  // The live line's content now; what show() draws.
  LiveView view(int64_t step, double epoch) const;
  // One line for the end of training: steps run, tokens, mean speed, elapsed. Ends the live
  // line, so that it is the last thing on the terminal.
  std::string summary(int64_t step, double epoch) const;

 private:
  using Clock = std::chrono::steady_clock;
  // The run's limits (train.max_steps, max_minutes, max_epochs), for the ETA and the live line's
  // bar; 0: none.
  struct Limits {
    double steps = 0;
    double minutes = 0;
    double epochs = 0;
  };
  // The current log window: host counts, and the device's sums (undefined until its first step).
  struct Window {
    Clock::time_point start;
    int64_t steps = 0;
    double tokens = 0;           // all ranks
    double rank_tokens = 0;      // this rank's
    double lr = 0;               // the latest step's
    torch::Tensor token_sums;    // Σ StepStats::token_sums
    torch::Tensor direction_sums;  // Σ StepStats::direction_sums (with directions)
    torch::Tensor alignment_sums;  // Σ StepStats::alignment_sums (with guided alignment)
    torch::Tensor update;        // Σ StepStats::update
    torch::Tensor last_skipped;  // max over the window of step × skipped
  };
  // The live line on a terminal.
  struct Live {
    bool enabled = false;  // show() draws
    Clock::time_point last_shown;
    double first_epoch = -1;  // at the first show(), for the epoch-limit ETA
  };
  double eta(int64_t step, double elapsed_s) const;  // -1 without a step or time limit

  Limits limits_;
  int64_t start_step_;
  Clock::time_point started_;
  SumOverRanks sum_over_ranks_;
  std::vector<std::string> directions_;
  Live live_;
  Window window_;
  double total_tokens_ = 0;
  ProgressRecord last_record_;  // what the live line shows while a new window is empty
};

}  // namespace tandem::train
