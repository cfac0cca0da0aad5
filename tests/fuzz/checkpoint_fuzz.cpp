// The checkpoint reader on edits of a real checkpoint checkpoint::save wrote (hdf5_edit.h): what
// resuming reads (load: every tensor, the optimizer state, the data position, the RNG states, the
// keep-best record; and as resume reads it, the outline then each tensor alone), and what eval and
// decode read (load_for_inference, raw and averaged weights),
// then a sentence translated with what was loaded.
#include <string>
#include <vector>

#include "tests/fuzz/fuzz_files.h"
#include "tests/fuzz/fuzz_target.h"
#include "tests/fuzz/hdf5_edit.h"
#include "trainer/checkpoint/checkpoint.h"
#include "trainer/config/config.h"
#include "trainer/decode/translate.h"
#include "trainer/model_io/model_io.h"
#include "trainer/train/keep_best.h"
#include "trainer/train/rng.h"

namespace tandem::fuzz {

std::vector<std::string> seeds() {
  return seeds_for(base_checkpoint(),
                   {"", std::string("\x01\x02\x03", 3), std::string("\x05\x00\x03\x04\x01", 5)});
}

}  // namespace tandem::fuzz

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace tandem;
  torch::set_num_threads(1);
  const std::string path = fuzz::file_to_read(fuzz::base_checkpoint(), "edited.h5", data, size);
  fuzz::refused_or_read([&] {
    const checkpoint::CheckpointData loaded = checkpoint::load(path);
    const config::Config config = config::parse_config(loaded.config_yaml, path + " /config");
    train::KeepBest keep_best(config.valid.metric, config.valid.patience);
    keep_best.restore(loaded.validation, path + " /validation");
    for (const std::string& state : loaded.rng) train::check_dropout_rng_state(state);
  });
  fuzz::refused_or_read([&] {
    const checkpoint::CheckpointData outline = checkpoint::load_outline(path);
    for (const auto& [group, tensors] : checkpoint::streamed_groups(outline)) {
      const checkpoint::GroupReader file(path, group);
      for (const auto& [name, shape] : *tensors) {
        const torch::Tensor read = file.read(name);
        if (!read.sizes().equals(shape.sizes()))
          fuzz::fail("a tensor read alone differs in shape from the outline's");
      }
    }
  });
  for (const auto weights : {checkpoint::Weights::kRaw, checkpoint::Weights::kAverage}) {
    fuzz::refused_or_read([&] {
      const checkpoint::InferenceModel model = checkpoint::load_for_inference(path, weights);
      const decode::Ensemble ensemble({model.model}, {1.0});
      decode::DecodeOptions options;
      options.beam_size = 2;
      const auto source = model.vocab.encode("red green blue", data::Side::kSource);
      const auto best = decode::translate(ensemble, {source}, options);
      for (const int32_t id : best.at(0).tokens) {
        if (id < 0 || id >= model.vocab.size())
          fuzz::fail("a translation's id is outside the vocabulary");
      }
      model.vocab.decode(best.at(0).tokens, data::Side::kTarget);
    });
  }
  return 0;
}
