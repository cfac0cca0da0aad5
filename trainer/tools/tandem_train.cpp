// tandem-train: train a Transformer from a YAML config, alone or under mpirun -np N.
#include <CLI/CLI.hpp>

#include <iostream>

#include "trainer/common/error.h"
#include "trainer/common/log.h"
#include "trainer/config/config.h"
#include "trainer/parallel/process_group.h"
#include "trainer/tools/tool_main.h"
#include "trainer/train/trainer.h"

namespace {

constexpr const char* kExamples = R"(Examples:
  tandem-train --config configs/tiny.yaml
  tandem-train --config configs/tiny.yaml --set train.max_steps=2000 --set checkpoint.dir=runs/a
  mpirun -np 2 tandem-train --config configs/tiny.yaml          # 2 data-parallel ranks
  tandem-train --config configs/tiny.yaml --resume runs/tiny/step-00001000.h5
  tandem-train --config ft.yaml --resume base/last.h5 --reset-optimizer --reset-data   # fine-tune
Training resumes automatically from the newest checkpoint in checkpoint.dir.)";

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"Train an encoder-decoder Transformer (data parallel under mpirun)."};
  std::string config_path;
  std::vector<std::string> overrides;
  tandem::train::ResumeOptions resume;
  bool print_config = false;
  app.add_option("--config", config_path, "YAML config file")->required();
  app.add_option("--set", overrides, "override a config key: key.path=value (repeatable)");
  app.add_option("--resume", resume.path,
                 "resume from this checkpoint instead of the newest in checkpoint.dir");
  app.add_flag("--reset-optimizer", resume.reset_optimizer,
               "on resume, start Adam's moments afresh (fine-tuning)");
  app.add_flag("--reset-data", resume.reset_data,
               "on resume, start from the first batch of epoch 1 (e.g. with a new corpus)");
  app.add_flag("--print-config", print_config, "print the resolved config and exit");
  app.footer(kExamples);
  app.failure_message(tandem::tools::usage_error_line("tandem-train"));
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    const int code = app.exit(e);
    return code == 0 ? 0 : tandem::kExitUsage;
  }

  tandem::parallel::ProcessGroup group(&argc, &argv);
  try {
    auto config = tandem::config::load_config(config_path, overrides);
    if (print_config) {
      if (group.rank() == 0) std::cout << tandem::config::to_yaml(config);
      return 0;
    }
    tandem::train::Trainer trainer(std::move(config), group, resume);
    return trainer.run();
  } catch (const std::exception& e) {
    tandem::log::error(e.what());
    const int code = tandem::exit_code_for(e);
    if (group.size() > 1) group.abort(code);  // no rank may be left waiting in a collective
    return code;
  }
}
