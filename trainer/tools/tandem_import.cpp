// tandem-import: a model trained elsewhere as a Tandem checkpoint (a Hugging Face MarianMT /
// OPUS-MT, M2M-100 or NLLB-200 folder), to fine-tune, evaluate and decode.
#include <sys/stat.h>

#include <CLI/CLI.hpp>
#include <cstdio>

#include "trainer/checkpoint/checkpoint.h"
#include "trainer/import/import.h"
#include "trainer/runtime/cpu_runtime.h"
#include "trainer/cli/tool_main.h"

namespace {

constexpr const char* kExamples = R"(Examples:
  tandem-import --from opus-mt-en-de --out runs/en-de/opus-mt.h5
  tandem-import --from nllb-200-distilled-600M --out runs/nllb/nllb-600M.h5
  echo "Hello" | tandem-decode --checkpoint runs/nllb/nllb-600M.h5 \
    --source-lang eng_Latn --target-lang spa_Latn
  tandem-prep --vocab-from runs/en-de/opus-mt.h5 --train-src my.en --train-tgt my.de \
    --valid-src dev.en --valid-tgt dev.de --out my.h5
  tandem-train --config configs/base.yaml --set data.corpus=my.h5 --set checkpoint.dir=runs/ft \
    --resume runs/en-de/opus-mt.h5 --reset-optimizer --reset-data --ranks 2
--from is a local folder as save_pretrained writes it, nothing is downloaded: config.json, the
weights (model.safetensors or pytorch_model.bin, or their shards with the *.index.json) and the
tokenizer: MarianMT's source.spm, target.spm and vocab.json; M2M-100's and NLLB-200's
sentencepiece.bpe.model with tokenizer.json / tokenizer_config.json / special_tokens_map.json
(and M2M-100's vocab.json). The checkpoint holds the model at step 0 with a paired vocabulary (the
SentencePiece models, the id table, and the language codes of M2M-100 and NLLB-200) and no
optimizer state. Give the training config the model's shape (docs/fine-tuning.md).)";

struct Args {
  std::string from, out;
  bool force = false;
};

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{
      "Import a model trained elsewhere (a Hugging Face MarianMT, M2M-100 or NLLB-200 folder) as "
      "a checkpoint."};
  Args args;
  app.add_option("--from", args.from, "the model folder (save_pretrained's)")->required();
  app.add_option("--out", args.out, "the checkpoint to write (*.h5)")->required();
  app.add_flag("--force", args.force, "replace --out if it exists");
  app.footer(kExamples);
  if (const auto done = tandem::cli::parse_command_line(app, "tandem-import", argc, argv))
    return *done;
  return tandem::cli::run_tool("tandem-import", [&] {
    struct stat info;
    if (!args.force && ::stat(args.out.c_str(), &info) == 0) {
      throw std::invalid_argument("--out '" + args.out +
                                  "' already exists; give --force to replace it");
    }
    // A tensor at a time: each goes back to the system when it is written.
    tandem::runtime::tune_allocator(tandem::runtime::Workload::kConversion);
    const auto imported = tandem::importer::import_folder(args.from);
    tandem::checkpoint::save(args.out, imported.checkpoint);
    std::printf("imported %s (%s) into %s\n", args.from.c_str(), imported.summary.c_str(),
                args.out.c_str());
    return 0;
  });
}
