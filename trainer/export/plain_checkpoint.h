// A checkpoint's chosen weights as a plain Tandem checkpoint (tandem-export --to tandem): what
// turns LoRA adapters into a model of their base's shape with the adapters merged in.
#pragma once

#include "trainer/checkpoint/checkpoint.h"
#include "trainer/model_io/model_io.h"

namespace tandem::exporter {

// /model the weights as loaded (a LoRA checkpoint's merged: model_io.h), /config the model's
// config without its lora section, the vocabulary and the step; no optimizer state, average or
// data position (a run starts from it with --resume --reset-optimizer --reset-data, as from an
// import).
checkpoint::CheckpointData plain_checkpoint(const checkpoint::InferenceModel& model);

}  // namespace tandem::exporter
