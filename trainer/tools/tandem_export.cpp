// tandem-export: a checkpoint's model in another engine's format (CTranslate2, Hugging Face
// transformers), or as a plain Tandem checkpoint (a LoRA checkpoint's adapters merged), written
// whole or not at all.
#include <dirent.h>
#include <sys/stat.h>

#include <CLI/CLI.hpp>
#include <cstdio>
#include <optional>

#include "trainer/cli/decode_flags.h"
#include "trainer/cli/tool_main.h"
#include "trainer/common/staged_dir.h"
#include "trainer/export/ctranslate2.h"
#include "trainer/export/huggingface.h"
#include "trainer/export/plain_checkpoint.h"
#include "trainer/model_io/model_io.h"

namespace {

constexpr const char* kExamples = R"(Examples:
  tandem-export --checkpoint runs/tiny/last.h5 --to ctranslate2 --out runs/tiny/ct2
  tandem-export --checkpoint runs/tiny/last.h5 --to ctranslate2 --out ct2-int8 --quantization int8
  tandem-export --checkpoint runs/lora/last.h5 --to tandem --out runs/lora/merged.h5
  tandem-export --checkpoint runs/tiny/last.h5 --to huggingface --out runs/tiny/hf
  python3 -c 'from transformers import pipeline
  print(pipeline("translation", model="runs/tiny/hf")("In the beginning")[0]["translation_text"])'
  python3 -c 'import ctranslate2, sentencepiece as spm
  sp = spm.SentencePieceProcessor(model_file="runs/tiny/ct2/sentencepiece.model")
  tr = ctranslate2.Translator("runs/tiny/ct2")
  out = tr.translate_batch([sp.encode("In the beginning", out_type=str)], beam_size=4,
                           length_penalty=0.6)
  print(sp.decode(out[0].hypotheses[0]))'
With --shortlist the folder also holds vmap.txt, CTranslate2's vocabulary map of the shortlist
(translate_batch(..., use_vmap=True)).
The folder holds model.bin, config.json, shared_vocabulary.json, sentencepiece.model and
tandem.json (the checkpoint, step and weights it came from). CTranslate2 adds the source's EOS
itself; tokenize with sentencepiece.model and pass the pieces. beam_size=4, length_penalty=0.6
(and CTranslate2's default min_decoding_length=1) is tandem-decode's own search (docs/serving.md).
--to huggingface writes a folder that transformers loads as it is (AutoTokenizer,
AutoModelForSeq2SeqLM, pipeline("translation")): config.json, generation_config.json,
model.safetensors, MarianTokenizer's source.spm, target.spm, vocab.json, tokenizer_config.json
and special_tokens_map.json, and tandem.json (docs/serving.md).
--to tandem writes one checkpoint file: the weights (a LoRA checkpoint's base with its adapters
merged in), the config without its lora section, the vocabulary; no optimizer state.)";

struct Args {
  std::string checkpoint, to, out, quantization = "float32";
  std::string shortlist;  // --shortlist: vmap.txt beside a CTranslate2 model
  tandem::exporter::HfLanguages languages;  // --source-lang, --target-lang (huggingface)
  tandem::checkpoint::Weights weights = tandem::checkpoint::Weights::kAverage;
  bool force = false;
};

// Whether `path` is a folder with nothing in it, or one that holds `marker` (an earlier export).
bool replaceable(const std::string& path, const char* marker) {
  DIR* dir = ::opendir(path.c_str());
  if (dir == nullptr) return false;
  bool empty = true, marked = false;
  while (const dirent* entry = ::readdir(dir)) {
    const std::string name = entry->d_name;
    if (name == "." || name == "..") continue;
    empty = false;
    marked = marked || name == marker;
  }
  ::closedir(dir);
  return empty || marked;
}

// --out may be new; an existing one only with --force, and only what an export made: a folder
// with a model.bin (or an empty one) for ctranslate2, a Tandem checkpoint for tandem. Nothing else
// is ever deleted.
void check_out(const Args& args) {
  struct stat info;
  if (::lstat(args.out.c_str(), &info) != 0) return;
  const std::string where = "--out '" + args.out + "'";
  const bool file = args.to == "tandem";
  if (file ? !S_ISREG(info.st_mode) : !S_ISDIR(info.st_mode)) {
    throw std::invalid_argument(where + " exists and is not a " + (file ? "file" : "folder") +
                                "; it is left as it is");
  }
  if (!args.force) {
    throw std::invalid_argument(where + " already exists; give --force to replace it");
  }
  if (file) {
    try {
      tandem::checkpoint::load_description(args.out);
    } catch (const std::invalid_argument&) {
      throw std::invalid_argument(where + " is not a Tandem checkpoint, and --force replaces "
                                  "only those");
    }
  } else if (const char* marker = args.to == "ctranslate2" ? "model.bin" : "model.safetensors";
             !replaceable(args.out, marker)) {
    throw std::invalid_argument(where + " holds files but no " + marker +
                                ": it is not an exported model, and --force replaces only those "
                                "(or an empty folder)");
  }
}

// The flags that only one --to takes.
void check_flags(const Args& args) {
  if (args.to != "ctranslate2" && !args.shortlist.empty()) {
    throw std::invalid_argument("--shortlist is for --to ctranslate2 (its vmap.txt); "
                                "tandem-decode reads the shortlist file itself");
  }
  if (args.to != "huggingface" && (!args.languages.source.empty() ||
                                   !args.languages.target.empty())) {
    throw std::invalid_argument("--source-lang and --target-lang are for --to huggingface (its "
                                "tokenizer's and generate()'s languages)");
  }
  if (args.to != "ctranslate2" && args.quantization != "float32") {
    throw std::invalid_argument("--quantization '" + args.quantization + "' is for --to "
                                "ctranslate2; a Tandem checkpoint or transformers folder is "
                                "float32");
  }
}

int export_tandem(const Args& args) {
  const auto model = tandem::checkpoint::load_for_inference(args.checkpoint, args.weights);
  tandem::checkpoint::save(args.out, tandem::exporter::plain_checkpoint(model));
  std::printf("exported %s (step %lld, %s weights) to %s as a Tandem checkpoint\n",
              args.checkpoint.c_str(), static_cast<long long>(model.step),
              model.averaged ? "averaged" : "raw", args.out.c_str());
  return 0;
}

// The folder, staged and published whole; the shortlist (when given) read before anything is
// written, so that a bad one leaves nothing.
int export_ctranslate2(const Args& args) {
  std::optional<tandem::data::Shortlist> shortlist;
  if (!args.shortlist.empty()) shortlist = tandem::data::Shortlist::load(args.shortlist);
  tandem::StagedDir out(args.out, args.force);
  const auto model = tandem::checkpoint::load_for_inference(args.checkpoint, args.weights);
  if (shortlist) {
    tandem::exporter::write_ct2_vmap(*shortlist, model.vocab, out.path() + "/vmap.txt");
  }
  const auto quantization = tandem::exporter::ct2_quantization(args.quantization);
  tandem::exporter::write_ct2_folder(model, quantization,
                                     {args.checkpoint, model.step, model.averaged}, out.path());
  out.commit();
  std::printf("exported %s (step %lld, %s weights) to %s as a CTranslate2 model (%s)\n",
              args.checkpoint.c_str(), static_cast<long long>(model.step),
              model.averaged ? "averaged" : "raw", args.out.c_str(), args.quantization.c_str());
  return 0;
}

// The folder, staged and published whole: a model no transformers class computes is refused
// before any file is written, and the staging folder goes with the error.
int export_huggingface(const Args& args) {
  const auto model = tandem::checkpoint::load_for_inference(args.checkpoint, args.weights);
  tandem::StagedDir out(args.out, args.force);
  tandem::exporter::write_hf_folder(model, args.languages,
                                    {args.checkpoint, model.step, model.averaged}, out.path());
  out.commit();
  std::printf("exported %s (step %lld, %s weights) to %s as a Hugging Face transformers model\n",
              args.checkpoint.c_str(), static_cast<long long>(model.step),
              model.averaged ? "averaged" : "raw", args.out.c_str());
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"Write a checkpoint's model in another engine's format (CTranslate2, Hugging Face "
               "transformers), or as a plain "
               "Tandem checkpoint (LoRA adapters merged)."};
  Args args;
  app.add_option("--checkpoint", args.checkpoint, "checkpoint file (*.h5)")->required();
  app.add_option("--to", args.to,
                 "the format to write: ctranslate2 (a model folder), huggingface (a transformers "
                 "model folder), or tandem (a checkpoint file with the weights alone, LoRA "
                 "adapters merged)")
      ->required()
      ->check(CLI::IsMember({"ctranslate2", "huggingface", "tandem"}));
  app.add_option("--out", args.out,
                 "the model folder (ctranslate2, huggingface) or file (tandem) to create")
      ->required();
  app.add_option("--quantization", args.quantization,
                 "how the weights are stored: float32, int8 (linear and embedding matrices "
                 "int8 with a scale per row), int8_float16 (the rest float16), float16")
      ->check(CLI::IsMember(tandem::exporter::ct2_quantization_names()))
      ->capture_default_str();
  tandem::cli::add_weights_flag(app, args.weights);
  app.add_option("--shortlist", args.shortlist,
                 "with --to ctranslate2, a lexical shortlist (tandem-shortlist) written as the "
                 "folder's vmap.txt, CTranslate2's vocabulary map (translate_batch(use_vmap=True))");
  app.add_option("--source-lang", args.languages.source,
                 "with --to huggingface and a model with language codes (NLLB-200: eng_Latn), "
                 "the tokenizer's source language (src_lang)");
  app.add_option("--target-lang", args.languages.target,
                 "with --to huggingface and a model with language codes (NLLB-200: spa_Latn), "
                 "the language generate() translates into (forced_bos_token_id) and the "
                 "tokenizer's tgt_lang, as tandem-decode --target-lang");
  app.add_flag("--force", args.force,
               "replace --out if it exists and holds an earlier export (a model.bin, a "
               "model.safetensors) or nothing; "
               "with --to tandem, if it is a Tandem checkpoint");
  app.footer(kExamples);
  if (const auto done = tandem::cli::parse_command_line(app, "tandem-export", argc, argv))
    return *done;
  return tandem::cli::run_tool("tandem-export", [&] {
    check_flags(args);
    check_out(args);
    if (args.to == "tandem") return export_tandem(args);
    return args.to == "huggingface" ? export_huggingface(args) : export_ctranslate2(args);
  });
}
