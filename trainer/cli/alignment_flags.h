// --alignments and the heads it reads, which tandem-decode and tandem-score share: by default the
// heads the checkpoint's train.alignment names (those guided alignment trained, or, for a model
// trained without it, every head of the same layer, averaged); --alignment-layer,
// --alignment-heads and --alignment-head read others.
#pragma once

#include <CLI/CLI.hpp>
#include <cstdint>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

#include "trainer/cli/tool_main.h"
#include "trainer/config/config.h"
#include "trainer/model/alignment.h"

namespace tandem::cli {

struct AlignmentFlags {
  bool alignments = false;
  int64_t layer = 0, heads = 0, head = 0;
  bool shift = false;
  const CLI::Option* layer_given = nullptr;
  const CLI::Option* shift_given = nullptr;
  const CLI::Option* heads_given = nullptr;
  const CLI::Option* head_given = nullptr;
  bool on() const { return alignments; }
};

// `what`: where the alignment goes in the tool's output, for --alignments' help.
inline void add_alignment_flags(CLI::App& app, AlignmentFlags& flags, const std::string& what) {
  auto* on = app.add_flag("--alignments", flags.alignments,
                          "write each line's word alignment (Pharaoh i-j: source word i, target "
                          "word j, counted over white space) " +
                              what + ", from the alignment heads' attention");
  flags.layer_given = app.add_option("--alignment-layer", flags.layer,
                                     "read this decoder layer (negative counts from the top; "
                                     "default: the checkpoint's train.alignment.layer)")
                          ->needs(on);
  flags.heads_given = app.add_option("--alignment-heads", flags.heads,
                                     "average its first this many heads (default: the "
                                     "checkpoint's train.alignment.heads; all of them for a "
                                     "model trained without the alignment loss)")
                          ->check(kPositive)
                          ->needs(on);
  flags.head_given =
      app.add_option("--alignment-head", flags.head, "read this one head alone (0-based)")
          ->check(kNonNegative)
          ->needs(on)
          ->excludes("--alignment-heads");
  flags.shift_given = app.add_flag("--alignment-shift", flags.shift,
                                   "read each target piece where it is the decoder's input, not "
                                   "where it is predicted (Shift-Att; default: as the "
                                   "checkpoint's guided alignment trained them, "
                                   "train.alignment.shift; --alignment-shift=false reads where "
                                   "predicted)")
                          ->needs(on);
}

// The heads the flags name in the model `config` describes (a checkpoint's); std::invalid_argument
// naming the flag when the model has no such layer or head.
inline model::AlignmentHeads alignment_heads(const AlignmentFlags& flags,
                                             const config::Config& config) {
  const int64_t layers = config.model.decoder_layers, heads = config.model.heads;
  const int64_t layer = flags.layer_given->count() > 0 ? flags.layer : config.train.alignment.layer;
  model::AlignmentHeads read;
  try {
    read.layer = model::bottom_up_layer(layer, layers);
  } catch (const std::invalid_argument&) {
    throw std::invalid_argument("--alignment-layer " + std::to_string(layer) +
                                ": the model's decoder has " + std::to_string(layers) +
                                " layers (" + std::to_string(-layers) + " to " +
                                std::to_string(layers - 1) + ")");
  }
  read.heads =
      flags.heads_given->count() > 0 ? flags.heads : config.train.alignment.heads_read(heads);
  if (flags.head_given->count() > 0) read = {read.layer, 1, flags.head};
  read.shift = flags.shift_given->count() > 0 ? flags.shift : config.train.alignment.shift_read();
  if (read.first + read.heads > heads) {
    const std::string flag = flags.head_given->count() > 0
                                 ? "--alignment-head " + std::to_string(flags.head)
                                 : "--alignment-heads " + std::to_string(read.heads);
    throw std::invalid_argument(flag + ": the model's layers have " + std::to_string(heads) +
                                " heads");
  }
  return read;
}

// The heads read, as a file job's record keeps them (bulk/job_record.h).
inline std::vector<std::pair<std::string, std::string>> recorded_alignment_options(
    const AlignmentFlags& flags, const model::AlignmentHeads& read) {
  if (!flags.on()) return {};
  std::vector<std::pair<std::string, std::string>> options = {
      {"--alignments", "yes"},
      {"--alignment-layer", std::to_string(read.layer)},
      {"--alignment-head", std::to_string(read.first) + "+" + std::to_string(read.heads)}};
  if (read.shift) options.emplace_back("--alignment-shift", "yes");  // older records lack it
  return options;
}

}  // namespace tandem::cli
