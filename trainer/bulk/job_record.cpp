#include "trainer/bulk/job_record.h"

#include <sys/stat.h>

#include <stdexcept>

#include "trainer/checkpoint/checkpoint.h"
#include "trainer/common/fnv_hash.h"

namespace tandem::bulk {
namespace {

std::string describe(const InputIdentity& input) {
  return std::to_string(input.lines) + " lines, " + std::to_string(input.bytes) + " bytes";
}

std::string describe(const ModelIdentity& model) {
  return "step " + std::to_string(model.step) + ", saved " + model.created + ", " +
         std::to_string(model.bytes) + " bytes";
}

std::string input_difference(const JobRecord& recorded, const JobRecord& asked) {
  if (recorded.inputs.size() != asked.inputs.size()) {
    return std::to_string(asked.inputs.size()) +
           " input file(s) (recorded: " + std::to_string(recorded.inputs.size()) + ")";
  }
  for (size_t i = 0; i < asked.inputs.size(); ++i) {
    const InputIdentity &was = recorded.inputs[i], &now = asked.inputs[i];
    if (was.lines != now.lines || was.bytes != now.bytes || was.hash != now.hash) {
      return "the input '" + now.path + "' has other content than the recorded '" + was.path +
             "' (recorded: " + describe(was) + "; now " + describe(now) +
             (was.bytes == now.bytes ? ", other bytes" : "") + ")";
    }
  }
  return "";
}

std::string model_difference(const JobRecord& recorded, const JobRecord& asked) {
  if (recorded.models.size() != asked.models.size()) {
    return std::to_string(asked.models.size()) +
           " --checkpoint (recorded: " + std::to_string(recorded.models.size()) + ")";
  }
  for (size_t i = 0; i < asked.models.size(); ++i) {
    const ModelIdentity &was = recorded.models[i], &now = asked.models[i];
    if (was.step != now.step || was.created != now.created || was.bytes != now.bytes) {
      return "the checkpoint '" + now.path + "' is not the recorded '" + was.path +
             "' (recorded: " + describe(was) + "; now " + describe(now) + ")";
    }
  }
  return "";
}

std::string option_difference(const JobRecord& recorded, const JobRecord& asked) {
  const auto value_of = [](const JobRecord& record, const std::string& flag) -> const std::string* {
    for (const auto& [name, value] : record.options) {
      if (name == flag) return &value;
    }
    return nullptr;
  };
  const auto shown = [](const std::string* value) {
    return value == nullptr ? std::string("not given") : value->empty() ? "given" : *value;
  };
  for (const auto* side : {&asked, &recorded}) {
    for (const auto& [flag, value] : side->options) {
      const std::string* now = value_of(asked, flag);
      const std::string* was = value_of(recorded, flag);
      if (now != nullptr && was != nullptr && *now == *was) continue;
      return flag + " " + shown(now) + " (recorded: " + shown(was) + ")";
    }
  }
  return "";
}

}  // namespace

nlohmann::json JobRecord::to_json() const {
  nlohmann::json json{{"tool", tool}, {"chunk_lines", chunk_lines}};
  json["inputs"] = nlohmann::json::array();
  for (const auto& input : inputs) {
    json["inputs"].push_back({{"path", input.path},
                              {"lines", input.lines},
                              {"bytes", input.bytes},
                              {"hash", hash_text(input.hash)}});
  }
  json["models"] = nlohmann::json::array();
  for (const auto& model : models) {
    json["models"].push_back({{"path", model.path},
                              {"step", model.step},
                              {"created", model.created},
                              {"bytes", model.bytes}});
  }
  json["options"] = nlohmann::json::array();
  for (const auto& [flag, value] : options) json["options"].push_back({flag, value});
  return json;
}

JobRecord JobRecord::from_json(const nlohmann::json& json, const std::string& source) {
  JobRecord record;
  try {
    record.tool = json.at("tool").get<std::string>();
    record.chunk_lines = json.at("chunk_lines").get<int64_t>();
    for (const auto& input : json.at("inputs")) {
      record.inputs.push_back({input.at("path").get<std::string>(),
                               input.at("lines").get<int64_t>(), input.at("bytes").get<uint64_t>(),
                               hash_from_text(input.at("hash").get<std::string>(), source)});
    }
    for (const auto& model : json.at("models")) {
      record.models.push_back({model.at("path").get<std::string>(), model.at("step").get<int64_t>(),
                               model.at("created").get<std::string>(),
                               model.at("bytes").get<uint64_t>()});
    }
    for (const auto& option : json.at("options")) {
      record.options.emplace_back(option.at(0).get<std::string>(), option.at(1).get<std::string>());
    }
  } catch (const nlohmann::json::exception& e) {
    throw std::invalid_argument(source + ": not a job record (" + e.what() + ")");
  }
  return record;
}

InputIdentity input_identity(const LineChunks& file) {
  return {file.path, file.lines, file.bytes, file.hash};
}

ModelIdentity model_identity(const std::string& path) {
  const auto description = checkpoint::load_description(path);
  struct stat info {};
  stat(path.c_str(), &info);
  return {path, description.step, description.created, static_cast<uint64_t>(info.st_size)};
}

std::string difference(const JobRecord& recorded, const JobRecord& asked) {
  if (recorded.tool != asked.tool) return "it is " + recorded.tool + "'s output";
  if (std::string why = input_difference(recorded, asked); !why.empty()) return why;
  if (std::string why = model_difference(recorded, asked); !why.empty()) return why;
  if (recorded.chunk_lines != asked.chunk_lines) {
    return "--chunk-lines " + std::to_string(asked.chunk_lines) +
           " (recorded: " + std::to_string(recorded.chunk_lines) + ")";
  }
  return option_difference(recorded, asked);
}

}  // namespace tandem::bulk
